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


def prune_cutoff(conn: psycopg.Connection[Any], keep: timedelta,
                 now: datetime | None = None) -> datetime:
    """The instant before which finished runs are pruned: ``keep`` before ``now`` (by default
    the database's clock, as every other instant crondepot writes)."""
    row = conn.execute(Q.prune_cutoff, {"keep_seconds": keep.total_seconds(),
                                        "now": now}).fetchone()
    assert row is not None
    cutoff: datetime = row[0]
    return cutoff


def prune_finished_runs(conn: psycopg.Connection[Any], keep: timedelta, *, limit: int = PRUNE_BATCH,
                        now: datetime | None = None, cutoff: datetime | None = None) -> int:
    """Delete one pass (at most ``limit``, oldest first) of finished runs older than ``keep``.

    The cut-off is computed first and passed to the delete as a parameter, so that its plan
    is the ``runs_finished_created`` index range of the rows it deletes (queries/retention.sql).
    A caller making several passes may compute it once (``prune_cutoff``) and pass it.
    """
    if cutoff is None:
        cutoff = prune_cutoff(conn, keep, now)
    return conn.execute(Q.prune_finished_runs, {"cutoff": cutoff, "limit": limit}).rowcount
