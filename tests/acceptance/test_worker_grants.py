"""Workers as real processes against grants: a run whose handler or limit grant went away
after it was queued fails for good without a call, an unknown limit is never "no limit",
and a handler learns which tenant called."""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.db import connect
from crondepot.limits.buckets import set_limit
from crondepot.tenancy import grants
from crondepot.tenancy.grants import CACHE_SECONDS
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import grant_limit, queued_runs, tenant


def _worker(url: str) -> Proc:
    return Proc("worker", "--db", url, "--import", "tests.support.handlers", "--concurrency",
                "4", "--urgent-only", "0", env={"CRONDEPOT_TEST_CALLS_URL": url})


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    return conn.execute(sql).fetchall()


def _all_finished(conn: psycopg.Connection[Any]) -> bool:
    return not _rows(conn, "SELECT 1 FROM runs WHERE status IN ('queued', 'running')")


def test_a_run_whose_handler_grant_was_revoked_after_queueing_fails_without_a_call(
        db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 3, handler="test.record")
        grants.revoke(conn, tenant(conn), handlers=["test.record"])
        worker = _worker(db_url)
        try:
            wait_until(lambda: _all_finished(conn), timeout=60, message="runs finished")
        finally:
            assert worker.stop() == 0
        rows = _rows(conn, "SELECT status, attempt, error_class, last_error FROM runs")
        calls = _rows(conn, "SELECT count(*) FROM test_calls")
    assert calls == [(0,)]
    assert {(status, attempt, error_class) for status, attempt, error_class, _ in rows} == {
        ("failed", 1, "GrantMissing")}
    assert all("handler 'test.record' is not granted to tenant bank42" in row[3]
               for row in rows)


def test_a_live_worker_refuses_runs_within_seconds_of_a_revoke(db_url: str) -> None:
    """The worker caches a tenant's grants for a few seconds only: a revoke made while it
    runs (its cache warm from the first run) stops the runs queued after it."""
    with connect(db_url) as conn:
        set_limit(conn, "sms-gateway", 1000, 100)
        queued_runs(conn, 1, handler="test.record")
        grant_limit(conn, tenant(conn), "sms-gateway")
        conn.execute("UPDATE jobs SET rate_limit = 'sms-gateway'")
        worker = _worker(db_url)
        try:
            wait_until(lambda: _rows(conn, "SELECT status FROM runs") == [("succeeded",)],
                       timeout=60, message="the first run succeeded")
            grants.revoke(conn, tenant(conn), limits=["sms-gateway"])
            with conn.transaction():        # ready once the worker's cached view is stale
                queued_runs(conn, 2, handler="test.record", priority="bulk")
                conn.execute("UPDATE jobs SET rate_limit = 'sms-gateway'")
                conn.execute("UPDATE runs SET available_at = now() + make_interval(secs => "
                             "%s) WHERE priority = 'bulk'", (CACHE_SECONDS + 1,))
            wait_until(lambda: _all_finished(conn), timeout=60, message="runs finished")
        finally:
            assert worker.stop() == 0
        rows = _rows(conn, "SELECT priority, status, error_class FROM runs ORDER BY 1")
        calls = _rows(conn, "SELECT count(*) FROM test_calls")
    assert rows == [("bulk", "failed", "GrantMissing"), ("bulk", "failed", "GrantMissing"),
                    ("normal", "succeeded", None)]
    assert calls == [(1,)]


def test_a_run_naming_an_unknown_limit_fails_for_good_instead_of_running_unlimited(
        db_url: str) -> None:
    """A job written before grants existed, or by the operator's own code, may name a
    limit that does not exist: its runs are never called unlimited."""
    with connect(db_url) as conn:
        queued_runs(conn, 3, handler="test.record")
        conn.execute("UPDATE jobs SET rate_limit = 'no-such-limit'")
        worker = _worker(db_url)
        try:
            wait_until(lambda: _all_finished(conn), timeout=60, message="runs finished")
        finally:
            assert worker.stop() == 0
        rows = _rows(conn, "SELECT DISTINCT status, attempt, last_error FROM runs")
        calls = _rows(conn, "SELECT count(*) FROM test_calls")
    assert calls == [(0,)]
    assert len(rows) == 1 and rows[0][:2] == ("failed", 1)
    assert "rate limit 'no-such-limit' is not one tenant bank42 may use" in rows[0][2]


def test_a_handler_is_told_which_tenant_called(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 2, handler="test.record")
        queued_runs(conn, 2, handler="test.record", tenant_name="shop7")
        worker = _worker(db_url)
        try:
            wait_until(lambda: _all_finished(conn), timeout=60, message="runs finished")
        finally:
            assert worker.stop() == 0
        seen = _rows(conn, "SELECT t.name, c.tenant FROM test_calls c JOIN runs r USING "
                           "(run_id) JOIN tenants t ON t.id = r.tenant_id ORDER BY 1")
    assert seen == [("bank42", "bank42"), ("bank42", "bank42"), ("shop7", "shop7"),
                    ("shop7", "shop7")]
