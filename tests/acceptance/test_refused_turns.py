"""A scheduler or worker whose statements the database refuses stays up and comes back.

Not the database going away (test_scheduler_processes.py, test_worker_processes.py) but the
database answering with an error a reconnect does not mend, here raised by a trigger: a
process that exited on it would end a worker's calls in flight, and a copy's restarts would
fail the same way. Each process must count the failed turns, log them with the error, keep
retrying on its slower backoff, and do the work once the cause is gone: the fire neither
lost nor doubled, the run called once.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot_testkit.processes import Proc, free_port, wait_until
from tests.support.jobs import bulk_due_jobs, counts, queued_runs
from tests.support.metrics import served_metric

REFUSE = """
    CREATE FUNCTION refuse_for_test() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'refused for the test'; END $$;
    CREATE TRIGGER refuse_for_test BEFORE {event} ON runs
        FOR EACH ROW {when} EXECUTE FUNCTION refuse_for_test();
"""
ALLOW = "DROP TRIGGER refuse_for_test ON runs; DROP FUNCTION refuse_for_test()"


def _one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _refusals(proc: Proc, turn: str) -> list[dict[str, Any]]:
    return [line for line in proc.lines() if line.get("msg", "").startswith(f"{turn} failed")]


def _refused_twice_and_alive(proc: Proc, port: int, metric: str, turn: str) -> None:
    """Wait for a second refused turn (so the first was retried, not fatal), then check
    the process is up and said why."""
    def refused_twice() -> bool:
        try:
            return served_metric(port, metric) >= 2
        except OSError:          # the metrics port is not open yet
            return False

    wait_until(refused_twice, timeout=30, message=f"two refused {turn}s")
    assert proc.popen.poll() is None, proc.output()[-3000:]
    refusals = _refusals(proc, turn)
    assert refusals, proc.output()[-3000:]
    assert "refused for the test" in proc.output()


@pytest.mark.slow
def test_a_scheduler_whose_tick_is_refused_retries_and_writes_the_fire_once(
        db_url: str) -> None:
    port = free_port()
    with connect(db_url) as conn:
        conn.execute(REFUSE.format(event="INSERT", when=""))
        bulk_due_jobs(conn, 20)
        copy = Proc("scheduler", "--db", db_url, "--name", "refused", "--metrics-port",
                    str(port))
        try:
            _refused_twice_and_alive(copy, port, "crondepot_scheduler_errors_total", "tick")
            # Every refused tick rolled back whole: no run, every job still due.
            assert counts(conn) == {"runs": 0, "distinct_runs": 0, "jobs_with_runs": 0,
                                    "still_due": 20}
            conn.execute(ALLOW)
            wait_until(lambda: counts(conn)["still_due"] == 0, timeout=60,
                       message="the due fires written after the trigger went")
            assert copy.popen.poll() is None
        finally:
            assert copy.stop() == 0, copy.output()[-3000:]
        assert counts(conn) == {"runs": 20, "distinct_runs": 20, "jobs_with_runs": 20,
                                "still_due": 0}
        # One run per job, for the fire that was due: nothing skipped as missed.
        assert _one(conn, "SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id "
                          "WHERE r.status = 'queued' AND r.nominal_at < j.next_nominal_at") == 20


@pytest.mark.slow
def test_a_worker_whose_claim_is_refused_retries_and_calls_the_run_once(db_url: str) -> None:
    port = free_port()
    with connect(db_url) as conn:
        queued_runs(conn, 3)
        # The claim's lease (queued -> running) is refused; nothing else the worker does is.
        conn.execute(REFUSE.format(event="UPDATE",
                                   when="WHEN (NEW.status = 'running' "
                                        "AND OLD.status = 'queued')"))
        worker = Proc("worker", "--db", db_url, "--import", "tests.support.handlers",
                      "--name", "refused", "--metrics-port", str(port),
                      env={"CRONDEPOT_TEST_CALLS_URL": db_url})
        try:
            _refused_twice_and_alive(worker, port, "crondepot_worker_claim_errors_total",
                                     "claim")
            assert _one(conn, "SELECT count(*) FROM test_calls") == 0
            assert _one(conn, "SELECT count(*) FROM runs WHERE status = 'queued'") == 3
            conn.execute(ALLOW)
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs "
                                          "WHERE status = 'succeeded'") == 3,
                       timeout=60, message="the runs called after the trigger went")
        finally:
            assert worker.stop() == 0, worker.output()[-3000:]
        assert _one(conn, "SELECT count(*) FROM test_calls") == 3
        assert _one(conn, "SELECT count(DISTINCT run_id) FROM test_calls") == 3
