"""Retention: old finished runs go, recent and dead ones stay, in bounded passes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from crondepot.runs.retention import prune_finished_runs
from tests.support.jobs import queued_runs


def test_prune_removes_only_old_finished_runs_in_bounded_passes(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 10)
    conn.execute("""
        UPDATE runs SET created_at = now() - interval '40 days',
               status = CASE WHEN job_id % 5 = 0 THEN 'dead' ELSE 'succeeded' END
        WHERE job_id % 2 = 0""")
    # 5 old runs: 1 dead (kept), 4 succeeded (pruned); 5 recent queued runs (kept)
    assert prune_finished_runs(conn, timedelta(days=30), limit=3) == 3
    assert prune_finished_runs(conn, timedelta(days=30), limit=3) == 1
    assert prune_finished_runs(conn, timedelta(days=30), limit=3) == 0
    rows = conn.execute("SELECT status, count(*) FROM runs GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [("dead", 1), ("queued", 5)]
