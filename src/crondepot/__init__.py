"""crondepot: cron at scale on PostgreSQL.

The public Python surface is what this module exports; everything else is internal.
"""

from __future__ import annotations

from crondepot.base.errors import (
    CrondepotError,
    InvalidJob,
    InvalidSchedule,
    PermanentError,
    TemporaryError,
)
from crondepot.base.version import __version__
from crondepot.timetable import next_fires, run_id, spread_offset
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.periodic import periodic

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
    "periodic",
    "run_id",
    "spread_offset",
]
