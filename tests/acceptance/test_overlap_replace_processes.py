"""overlap `replace` end to end (issue 31, item 1): a real scheduler and a real worker, a
`replace` job whose call runs long, and a newer run of it triggered meanwhile. The claim
asks the running run to give way; the worker learns it at its next heartbeat and:

- an async handler is cancelled (it sees CancelledError), its run recorded skipped
  'replaced', and the newer run succeeds after it;
- an HTTP call to a slow receiver is abandoned (its connection shut down), likewise;
- a sync handler cannot be cancelled: it runs to its end, its run succeeds and says why it
  was not replaced, and the newer run succeeds after it.

Never two calls of the job at once, and the ledger stays clean."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from crondepot.db import connect
from crondepot.job.store import trigger_job
from crondepot.scheduler.ledger import verify
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import CALLS_TABLE, add_job, tenant
from tests.support.target_server import Route, TargetServer

FAR_CRON = "0 3 1 1 *"      # no scheduled fire during the test: the runs are triggered


def _processes(db_url: str) -> list[Proc]:
    return [Proc("scheduler", "--db", db_url, "--tick", "500ms"),
            Proc("worker", "--db", db_url, "--import", "tests.support.handlers", "--name",
                 "w1", "--heartbeat", "0.5",
                 env={"CRONDEPOT_TEST_CALLS_URL": db_url,
                      "CRONDEPOT_TARGET_ALLOWLIST": "127.0.0.1/32"})]


def _run(conn: psycopg.Connection[Any], run_id: str) -> dict[str, Any]:
    row = conn.execute("SELECT status, skip_reason, error_class, last_error, result "
                       "FROM runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None, run_id
    return dict(zip(("status", "skip_reason", "error_class", "last_error", "result"), row,
                    strict=True))


def _calls(conn: psycopg.Connection[Any], run_id: str) -> dict[int, datetime]:
    """The handler's rows of a run by attempt: n > 0 its start, -n its end, 0 it saw
    CancelledError."""
    return {attempt: at for attempt, at in conn.execute(
        "SELECT attempt, at FROM test_calls WHERE run_id = %s", (run_id,))}


def _trigger_in_a_later_second(conn: psycopg.Connection[Any], t: int, job: int,
                               after: str) -> str:
    """A manual run is named after its second: wait until the database's clock is past the
    second of ``after`` so the new run is a new row."""
    second = int(after.split(":")[1])
    wait_until(lambda: conn.execute("SELECT floor(extract(epoch FROM now())) > %s",
                                    (second,)).fetchone() == (True,),
               timeout=5, interval=0.05, message="the next second")
    triggered = trigger_job(conn, t, job)
    assert triggered.created
    return triggered.run_id


def _replace_while_running(conn: psycopg.Connection[Any], db_url: str, job: int, t: int,
                           started: Any, quick: Any) -> tuple[str, str]:
    """Trigger a run; once its call has started (``started(run_id)``), make the job quick
    (``quick()``: what the next call does) and trigger a newer run; wait until both ended."""
    procs = _processes(db_url)
    try:
        old = trigger_job(conn, t, job).run_id
        wait_until(lambda: started(old), timeout=60, message="the first call started")
        quick()
        new = _trigger_in_a_later_second(conn, t, job, old)
        wait_until(lambda: {_run(conn, old)["status"], _run(conn, new)["status"]}
                   .isdisjoint({"queued", "running"}), timeout=60,
                   message="both runs ended")
    finally:
        for proc in procs:
            proc.stop()
    return old, new


@pytest.fixture
def replace_job(db_url: str) -> Iterator[tuple[psycopg.Connection[Any], int]]:
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)
        yield conn, tenant(conn)


def _quick_payload(conn: psycopg.Connection[Any], job: int) -> Any:
    # the claim reads the job's payload when it leases the run: the newer run's call is short
    return lambda: conn.execute("UPDATE jobs SET payload = %s WHERE id = %s",
                                (Jsonb({"sleep": 0.2}), job))


@pytest.mark.slow
def test_an_async_handler_is_cancelled_and_the_newer_run_succeeds(
        db_url: str, replace_job: tuple[psycopg.Connection[Any], int]) -> None:
    conn, t = replace_job
    job = add_job(conn, t, key="sms:push-batch", cron=FAR_CRON, overlap="replace",
                  target={"type": "python", "handler": "test.replace_async"},
                  payload={"sleep": 600})
    old, new = _replace_while_running(conn, db_url, job, t,
                                      lambda run: 1 in _calls(conn, run),
                                      _quick_payload(conn, job))
    first, second = _calls(conn, old), _calls(conn, new)
    report = verify(conn)

    replaced = _run(conn, old)
    assert (replaced["status"], replaced["skip_reason"]) == ("skipped", "replaced"), replaced
    assert replaced["error_class"] == "Replaced"
    assert "async handler test.replace_async cancelled" in replaced["last_error"]
    assert 0 in first and -1 not in first, first          # it saw CancelledError, never ended
    assert _run(conn, new)["status"] == "succeeded"
    # never two calls at once: the newer one started after the old one was cancelled
    assert second[1] >= first[0], (first, second)
    assert report.clean, report.document()


@pytest.mark.slow
def test_a_sync_handler_is_not_cancelled_and_its_run_says_why(
        db_url: str, replace_job: tuple[psycopg.Connection[Any], int]) -> None:
    conn, t = replace_job
    job = add_job(conn, t, key="sms:push-batch-sync", cron=FAR_CRON, overlap="replace",
                  target={"type": "python", "handler": "test.replace_sync"},
                  payload={"sleep": 4})
    asked = lambda run: conn.execute(   # noqa: E731
        "SELECT replace_requested_at IS NOT NULL FROM runs WHERE run_id = %s",
        (run,)).fetchone() == (True,)
    old, new = _replace_while_running(conn, db_url, job, t,
                                      lambda run: 1 in _calls(conn, run),
                                      _quick_payload(conn, job))
    first, second = _calls(conn, old), _calls(conn, new)
    report = verify(conn)

    ran_on = _run(conn, old)
    assert ran_on["status"] == "succeeded", ran_on
    assert asked(old)
    assert "a sync handler (test.replace_sync) cannot be cancelled" in ran_on["result"]["replace"]
    assert -1 in first                                      # it ran to its end
    assert _run(conn, new)["status"] == "succeeded"
    assert second[1] >= first[-1], (first, second)          # as buffer_one: after it
    assert report.clean, report.document()


@pytest.mark.slow
def test_an_http_call_to_a_slow_receiver_is_abandoned(
        db_url: str, replace_job: tuple[psycopg.Connection[Any], int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    conn, t = replace_job
    monkeypatch.setenv("CRONDEPOT_TARGET_ALLOWLIST", "127.0.0.1/32")    # the job's check
    server = TargetServer()
    server.routes["/hook"] = Route(delay_s=60)
    try:
        job = add_job(conn, t, key="sms:gateway-push", cron=FAR_CRON, overlap="replace",
                      target={"type": "http", "url": server.url("/hook"), "timeout_s": 120})

        def quick() -> None:
            server.routes["/hook"] = Route(delay_s=0)

        old, new = _replace_while_running(
            conn, db_url, job, t,
            lambda run: any(r.headers.get("idempotency-key") == run for r in server.received),
            quick)
        report = verify(conn)
        calls = [r.headers.get("idempotency-key") for r in server.received]
    finally:
        server.close()

    abandoned = _run(conn, old)
    assert (abandoned["status"], abandoned["skip_reason"]) == ("skipped", "replaced"), abandoned
    assert "HTTP call abandoned" in abandoned["last_error"], abandoned
    assert _run(conn, new)["status"] == "succeeded"
    assert calls == [old, new], calls
    assert report.clean, report.document()
