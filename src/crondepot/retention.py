"""Retention: finished runs older than the retention period are deleted in bounded passes.

Workers prune as part of their maintenance (``--retention``, default 30 days); ``crondepot
prune`` does it by hand. Dead-lettered runs are never pruned.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg

from crondepot.db import Q

DEFAULT_RETENTION = timedelta(days=30)


def prune_finished_runs(conn: psycopg.Connection[Any], keep: timedelta, *, limit: int = 5000,
                        now: datetime | None = None) -> int:
    """Delete one pass (at most ``limit``) of finished runs older than ``keep``."""
    return conn.execute(Q.prune_finished_runs, {
        "keep_seconds": keep.total_seconds(), "limit": limit, "now": now}).rowcount
