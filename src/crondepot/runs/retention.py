"""Retention: finished runs older than the retention period are deleted in bounded passes.

The maintenance leader prunes every minute (``maintenance/pruner.py``; ``--retention-days``
on the scheduler and worker, default 30); ``crondepot prune`` does it by hand. Dead-lettered
runs are never pruned.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from crondepot.db import Q

DEFAULT_RETENTION = timedelta(days=30)
PRUNE_BATCH = 5000   # runs deleted per statement: a short transaction, however large the backlog


def prune_finished_runs(conn: psycopg.Connection[Any], keep: timedelta, *, limit: int = PRUNE_BATCH,
                        now: datetime | None = None) -> int:
    """Delete one pass (at most ``limit``) of finished runs older than ``keep``."""
    return conn.execute(Q.prune_finished_runs, {
        "keep_seconds": keep.total_seconds(), "limit": limit, "now": now}).rowcount
