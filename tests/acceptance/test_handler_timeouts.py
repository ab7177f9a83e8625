"""A python target's ``timeout_s``, kept by real worker processes: a hung sync handler frees
its slot and its run is dead-lettered (it may have acted); an async one is cancelled and,
as it dedupes, retried; a worker whose abandoned threads reach --max-abandoned restarts
itself in the same process and goes on."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import queued_runs


def _worker(url: str, *extra: str) -> Proc:
    return Proc("worker", "--db", url, "--import", "tests.support.handlers", "--concurrency",
                "1", "--urgent-only", "0", *extra, env={"CRONDEPOT_TEST_CALLS_URL": url})


def _rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    return conn.execute(sql).fetchall()


def _status(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, str | None, str | None]]:
    return {key: (status, error_class, error) for key, status, error_class, error in _rows(
        conn, "SELECT j.key, r.status, r.error_class, r.last_error FROM runs r "
              "JOIN jobs j ON j.id = r.job_id")}


@pytest.mark.slow
def test_a_hung_sync_handler_frees_its_slot_and_its_run_goes_to_the_dead_letter(
        db_url: str) -> None:
    with connect(db_url) as conn:
        # One slot: the quick job's run can only be called once the hung one lets go.
        queued_runs(conn, 1, payload='{"sleep": 600}', target='{"timeout_s": 1}')
        queued_runs(conn, 1, priority="bulk")
        worker = _worker(db_url)
        try:
            wait_until(lambda: {s for s, _, _ in _status(conn).values()} == {"dead",
                                                                                "succeeded"},
                       timeout=60, message="the hung run dead, the quick one done")
        finally:
            worker.stop()
        status = _status(conn)
    status_, error_class, error = status["normal1"]
    assert (status_, error_class) == ("dead", "HandlerTimeout")
    assert error is not None and "did not finish within 1 s (abandoned, still running)" in error
    assert status["bulk1"][0] == "succeeded"


@pytest.mark.slow
def test_an_async_handler_that_dedupes_is_cancelled_at_its_timeout_and_retried(
        db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, handler="test.async_sleep", payload='{"sleep": 600}',
                    target='{"timeout_s": 1, "dedupes": true}')
        worker = _worker(db_url)
        try:
            wait_until(lambda: _rows(conn, "SELECT count(*) FROM run_attempts") == [(1,)],
                       timeout=60, message="the first attempt ended")
        finally:
            worker.stop()
        attempts = _rows(conn, "SELECT attempt, outcome, error_class FROM run_attempts")
        calls = _rows(conn, "SELECT attempt FROM test_calls WHERE attempt IN (1, -1)")
    assert attempts == [(1, "retried", "HandlerTimeoutRetried")]
    assert calls == [(1,)]                      # called, and its sleep never finished


@pytest.mark.slow
def test_a_worker_whose_abandoned_threads_reach_the_limit_restarts_itself(
        db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 600}', target='{"timeout_s": 1}')
        worker = _worker(db_url, "--max-abandoned", "1", "--heartbeat", "0.5")
        try:
            wait_until(lambda: worker.output().count("worker started") >= 2, timeout=60,
                       message="the worker started a second time")
            assert worker.popen.poll() is None        # the same process, started afresh
            queued_runs(conn, 1, priority="bulk")     # and it works on
            wait_until(lambda: _status(conn).get("bulk1", ("",))[0] == "succeeded",
                       timeout=60, message="a run after the restart")
        finally:
            worker.stop()
    assert "still running (limit 1): draining, then restarting this worker" in worker.output()
