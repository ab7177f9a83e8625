"""crondepot: cron at scale on PostgreSQL.

The public Python surface is what this module exports; everything else is internal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crondepot.base.errors import (
    CrondepotError,
    InvalidJob,
    InvalidSchedule,
    PermanentError,
    TemporaryError,
)
from crondepot.base.lazy import on_first_use
from crondepot.base.version import __version__
from crondepot.timetable import next_fires, run_id, spread_offset
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.periodic import periodic

if TYPE_CHECKING:
    from crondepot.client import AsyncClient, Client
else:
    # The HTTP client (and httpx) loads when first named: a worker or the CLI never needs it.
    __getattr__ = on_first_use(__name__, {"Client": "client", "AsyncClient": "client"})

__all__ = [
    "AsyncClient",
    "Client",
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
