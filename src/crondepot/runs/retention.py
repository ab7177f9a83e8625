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


def retention_cutoff(conn: psycopg.Connection[Any], keep: timedelta,
                     now: datetime | None = None) -> datetime:
    """The instant ``keep`` before ``now`` (by default the database's clock, as every other
    instant crondepot writes): a finished run created before it is past retention, and a
    partition of runs that ends before it goes whole (runs/partitions.py)."""
    return _cutoffs(conn, keep, now)[0]


def prune_cutoff(conn: psycopg.Connection[Any], keep: timedelta,
                 now: datetime | None = None) -> datetime:
    """The instant before which finished runs are pruned row by row: the retention cut-off,
    or on a partitioned ``runs`` the start of its oldest day partition if that is earlier
    (days go whole, queries/retention.sql)."""
    return _cutoffs(conn, keep, now)[1]


def _cutoffs(conn: psycopg.Connection[Any], keep: timedelta,
             now: datetime | None) -> tuple[datetime, datetime]:
    row = conn.execute(Q.prune_cutoff, {"keep_seconds": keep.total_seconds(),
                                        "now": now}).fetchone()
    assert row is not None
    return row[0], row[1]


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
