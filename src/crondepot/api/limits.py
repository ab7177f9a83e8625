"""The per-token request budget (429 + Retry-After).

The request budget is an in-process token bucket per API token; several API processes each
keep their own. Bodies are bounded (413) and given a deadline (408) by ``api/intake.py``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    at: float


class RequestBudget:
    """A token bucket per key: ``rate`` requests a second on average, bursts of ``burst``."""

    def __init__(self, rate: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"expected rate > 0 and burst >= 1, got {rate} and {burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[object, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: object) -> float:
        """Spend one request for ``key``: 0.0 if allowed, else the seconds to wait."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(tokens=float(self.burst), at=now)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.rate)
            bucket.at = now
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return 0.0
            return (1 - bucket.tokens) / self.rate


def retry_after(seconds: float) -> str:
    """Retry-After is whole seconds; round up so a client that obeys it is let in."""
    return str(max(1, math.ceil(seconds)))
