"""crondepot: cron at scale on PostgreSQL.

The public Python surface is what this module exports; everything else is internal.
"""

from __future__ import annotations

__version__ = "0.1.0"

from crondepot.errors import (
    CrondepotError,
    InvalidJob,
    InvalidSchedule,
    PermanentError,
    TemporaryError,
)
from crondepot.handlers import RunContext, handler
from crondepot.timetable import next_fires, run_id, spread_offset

__all__ = [
    "CrondepotError",
    "InvalidJob",
    "InvalidSchedule",
    "PermanentError",
    "RunContext",
    "TemporaryError",
    "__version__",
    "handler",
    "next_fires",
    "run_id",
    "spread_offset",
]
