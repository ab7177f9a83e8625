"""What the plan tests of the claim and of the success write share: make the session's
plans on the statistics of the moment, and count the rows index scans fetched."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from crondepot.queue import ClaimedRun, Success, claim_runs, record_successes
from tests.support.jobs import queued_runs


def fetched(conn: psycopg.Connection[Any], table: str = "runs") -> int:
    """Live rows of ``table`` fetched by index scans in this transaction so far (a row an
    index scan reads and filters out counts; dead entries passed over do not)."""
    row = conn.execute("SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = %s",
                       (table,)).fetchone()
    return int(row[0]) if row else 0


def make_the_plans(conn: psycopg.Connection[Any], analyze: Sequence[str] = ()) -> ClaimedRun:
    """Claim and record one (bulk) run: the session's claim and record plans are made now,
    on the statistics of the moment (with ``analyze``'s tables analyzed once that run is
    queued). Autovacuum is off for runs and jobs, so that no ANALYZE in the middle of a test
    makes the functions plan again."""
    for table in ("runs", "jobs"):
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    queued_runs(conn, 1, priority="bulk")
    for table in analyze:
        conn.execute(f"ANALYZE {table}")
    (first,) = claim_runs(conn, owner="w", shares={"bulk": 1})
    assert record_successes(conn, [Success(first.run_id, first.lease_token, first.attempt)])
    return first
