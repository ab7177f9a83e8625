"""SIGTERM with a call that outlives the grace period: the worker keeps to its grace, and the
run it abandons comes back after its lease with the same run id (no success lost)."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from tests.support.jobs import queued_runs
from tests.support.processes import Proc, wait_until


def _one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _worker(url: str, name: str, *extra: str) -> Proc:
    return Proc("worker", "--db", url, "--import", "tests.support.handlers", "--name", name,
                *extra, env={"CRONDEPOT_TEST_CALLS_URL": url})


@pytest.mark.slow
@pytest.mark.parametrize("handler", ["test.record", "test.async_blocking"])
def test_a_call_longer_than_the_grace_is_abandoned_at_the_grace_and_its_run_comes_back(
        db_url: str, handler: str) -> None:
    with connect(db_url) as conn:
        # The call takes 10 s, the grace is 1 s, the lease 5 s (the shortest a job may ask
        # for), renewed every second while the worker lives. test.async_blocking waits in
        # asyncio's default executor, whose threads the interpreter joins at exit.
        queued_runs(conn, 1, handler=handler, payload='{"sleep": 10}', lease_seconds=5)
        worker = _worker(db_url, "leaving", "--grace", "1", "--heartbeat", "1")
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="the first call")
        first_token = _one(conn, "SELECT lease_token FROM runs")
        stopping = time.monotonic()
        assert worker.stop(timeout=30) == 0
        took = time.monotonic() - stopping
        # Gone at the grace, not when the call ends: it must not linger without heartbeats
        # or an outcome writer (the call's success could not be recorded then anyway).
        assert took < 5, f"the worker took {took:.1f}s to stop with a 1 s grace"
        assert any("abandoning 1 calls" in str(e.get("msg", "")) for e in worker.lines())

        # The run is still the abandoned attempt's: running, same token, lease not renewed.
        assert _one(conn, "SELECT status FROM runs") == "running"
        assert _one(conn, "SELECT lease_token FROM runs") == first_token
        expires_at = _one(conn, "SELECT lease_expires_at FROM runs")

        conn.execute("UPDATE jobs SET payload = '{}'")          # the second call is quick
        rescuer = _worker(db_url, "rescuer", "--heartbeat", "1")
        try:
            wait_until(lambda: _one(conn, "SELECT status FROM runs") == "succeeded",
                       timeout=60, message="the run comes back and succeeds")
        finally:
            assert rescuer.stop(timeout=30) == 0
        calls = conn.execute("SELECT run_id, attempt, at FROM test_calls ORDER BY at").fetchall()
        assert len(calls) == 2
        assert calls[0][0] == calls[1][0]                       # the same run id, twice
        assert [c[1] for c in calls] == [1, 2]
        assert calls[1][2] >= expires_at                        # not before the lease ended
