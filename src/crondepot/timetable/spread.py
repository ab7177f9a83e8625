"""Spread: a stable per-job delay that keeps jobs sharing a schedule from firing together.

This module owns the offset only: ``sha256(key) mod seconds``, the same for a key in every
process and release (never Python's salted ``hash()``). Adding it to the nominal time, and
keeping the nominal time in the run id, is the scheduler's business.
"""

from __future__ import annotations

from hashlib import sha256

__all__ = ["spread_offset"]


def spread_offset(key: str, seconds: int) -> int:
    """The offset in ``[0, seconds)`` for ``key``; 0 when ``seconds`` is 0 or less."""
    if seconds <= 0:
        return 0
    # 256 bits mod a few thousand: the modulo bias is far below anything measurable.
    return int.from_bytes(sha256(key.encode()).digest(), "big") % seconds
