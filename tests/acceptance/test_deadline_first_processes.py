"""Deadline first within a rate limit, through a real worker process (docs/worker.md): a
gateway bucket of 40/s and 200 queued reminders, the 100 queued last due within the hour,
the 100 queued first by the evening. The worker calls the near deadlines first; with the
limit left off the runs (runs.rate_limit NULL: the queue order of before) it calls them last.
Counted by the order of the calls, not by the clock."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.limits.buckets import set_limit
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import grant_limit, queued_runs, tenant

CONCURRENCY = 4


def _near_calls_before_the_first_far_one(db_url: str, limit_on_runs: bool) -> int:
    with connect(db_url) as conn:
        queued_runs(conn, 200)
        conn.execute("UPDATE jobs SET rate_limit = 'sms-gateway'")
        set_limit(conn, "sms-gateway", 40, 1)
        grant_limit(conn, tenant(conn), "sms-gateway")
        # Queue order = job order; the later half has the nearer deadline.
        conn.execute(
            "UPDATE runs AS r SET available_at = now() - interval '1 minute' "
            "+ make_interval(secs => r.job_id / 1000.0), "
            "deadline_at = now() + CASE WHEN r.job_id > (SELECT min(id) + 99 FROM jobs) "
            "THEN interval '1 hour' ELSE interval '10 hours' END, rate_limit = %s",
            ("sms-gateway" if limit_on_runs else None,))
        worker = Proc("worker", "--db", db_url, "--import", "tests.support.handlers",
                      "--concurrency", str(CONCURRENCY), "--urgent-only", "0",
                      env={"CRONDEPOT_TEST_CALLS_URL": db_url})
        try:
            wait_until(lambda: _count(conn, "SELECT count(*) FROM test_calls") == 200,
                       timeout=120, interval=0.2, message="200 calls")
        finally:
            worker.stop()
        near = [bool(row[0]) for row in conn.execute(
            "SELECT r.deadline_at < now() + interval '2 hours' FROM test_calls AS c "
            "JOIN runs AS r USING (run_id) ORDER BY c.at").fetchall()]
    return near.index(False)


def _count(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.slow
def test_a_worker_behind_a_saturated_limit_calls_the_near_deadlines_first(
        db_url: str) -> None:
    # At most the runs in hand when the last near one was claimed go out of order.
    assert _near_calls_before_the_first_far_one(db_url, True) >= 100 - 2 * CONCURRENCY


@pytest.mark.slow
def test_without_the_limit_on_the_runs_the_queue_order_is_kept(db_url: str) -> None:
    assert _near_calls_before_the_first_far_one(db_url, False) <= 2 * CONCURRENCY
