"""The misfire deadline is checked when it matters: when a run is claimed (the claim passes
over it; the workers' sweep records it), after a long wait for a rate-limit token, before
each retry, and at replay (docs/ledger.md, "Deadlines"). A run past it is recorded skipped,
'deadline_passed', and never sent; a replay sends it only when asked to.

A loss the ledger rule closed: the scheduler judged skip_after / skip_after_local_time once,
when it wrote the run; a run then waiting in the queue, retrying, or replayed from the dead
letter went out whatever the time ("renewal offer, never after noon" sent at 15:00).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from crondepot.job import JobSpec
from crondepot.job.store import create_jobs
from crondepot.queue import ClaimedRun, claim_runs, record_final_failure, record_retry
from crondepot.queue.lease import skip_runs_past_deadline
from crondepot.runs.deadletter import DeadFilter, replay
from crondepot.scheduler.tick import tick
from tests.support.jobs import queued_runs, tenant

DAY = datetime(2026, 3, 2, tzinfo=UTC)
NOON_IST = DAY + timedelta(hours=6, minutes=30)         # 12:00 in Asia/Kolkata


def _job(conn: psycopg.Connection[Any], misfire: dict[str, Any], **doc: Any) -> int:
    spec = JobSpec.from_document({
        "key": "renewal", "cron": "0 9 * * *", "tz": "Asia/Kolkata", "misfire": misfire,
        "target": {"type": "python", "handler": "test.noop"}, **doc})
    (created,) = create_jobs(conn, tenant(conn), [spec], now=DAY - timedelta(hours=1))
    return created.id


def _row(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = conn.execute("SELECT status, skip_reason, attempt, lease_token IS NULL FROM runs"
                       ).fetchone()
    assert row is not None
    return tuple(row)


def test_a_queued_run_claimed_after_its_local_deadline_is_skipped_not_sent(
        conn: psycopg.Connection[Any]) -> None:
    _job(conn, {"policy": "skip_after_local_time", "until": "12:00"})
    tick(conn, batch=10, now=DAY + timedelta(hours=3, minutes=31))    # 09:01 IST: queued
    (deadline,) = conn.execute("SELECT deadline_at FROM runs").fetchone()  # type: ignore[misc]
    assert deadline == NOON_IST
    # The workers were busy (or down) until 15:00 IST: the claim passes over it, and the
    # workers' sweep records why it was not sent.
    late = NOON_IST + timedelta(hours=3)
    assert claim_runs(conn, owner="w", shares={"normal": 5}, now=late) == []
    assert _row(conn) == ("queued", None, 0, True)
    assert [r[0] for r in skip_runs_past_deadline(conn, now=late)] == [
        conn.execute("SELECT run_id FROM runs").fetchone()[0]]  # type: ignore[index]
    assert _row(conn) == ("skipped", "deadline_passed", 0, True)
    assert skip_runs_past_deadline(conn, now=late) == []


def test_late_runs_ahead_in_the_queue_do_not_hold_back_a_fresh_one(
        conn: psycopg.Connection[Any]) -> None:
    # After an outage 300 runs past their deadline wait at the head of the queue: a claim of
    # one still gets the one run worth sending, in one call.
    queued_runs(conn, 301)
    conn.execute("UPDATE runs SET available_at = now() - interval '1 hour', "
                 "deadline_at = now() - interval '1 minute' "
                 "WHERE run_id <> (SELECT max(run_id) FROM runs)")
    (fresh,) = conn.execute("SELECT max(run_id) FROM runs").fetchone()  # type: ignore[misc]
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    assert run.run_id == fresh
    assert len(skip_runs_past_deadline(conn)) == 300


def test_a_queued_run_claimed_before_its_deadline_is_sent(conn: psycopg.Connection[Any]) -> None:
    _job(conn, {"policy": "skip_after", "seconds": 600})
    due = DAY + timedelta(hours=3, minutes=30)
    tick(conn, batch=10, now=due)
    (run,) = claim_runs(conn, owner="w", shares={"normal": 5}, now=due + timedelta(seconds=599))
    assert _row(conn) == ("running", None, 1, False)
    assert run.attempt == 1


def _claimed_on_the_database_clock(conn: psycopg.Connection[Any], deadline: str) -> ClaimedRun:
    """A run claimed now by the database's own clock (as record_retry and replay read it),
    with its deadline ``deadline`` from now."""
    _job(conn, {"policy": "skip_after", "seconds": 600})
    tick(conn, batch=10, now=DAY + timedelta(hours=3, minutes=31))      # queued
    conn.execute("UPDATE runs SET available_at = now(), deadline_at = now() + %s::interval",
                 (deadline,))
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    return run


def test_a_retry_that_would_come_after_the_deadline_is_not_queued(
        conn: psycopg.Connection[Any]) -> None:
    run = _claimed_on_the_database_clock(conn, "60 s")
    assert record_retry(conn, run.run_id, run.lease_token, delay=5, error="HTTP 503",
                        error_class="TemporaryError") == "queued"
    conn.execute("UPDATE runs SET available_at = now()")
    (again,) = claim_runs(conn, owner="w", shares={"normal": 1})
    assert record_retry(conn, again.run_id, again.lease_token, delay=120, error="HTTP 503",
                        error_class="TemporaryError") == "skipped"
    assert _row(conn) == ("skipped", "deadline_passed", 2, True)
    (error,) = conn.execute("SELECT last_error FROM runs").fetchone()  # type: ignore[misc]
    assert error == "HTTP 503"                  # why the last attempt failed is kept


def test_replay_holds_back_runs_past_their_deadline_unless_told(
        conn: psycopg.Connection[Any]) -> None:
    run = _claimed_on_the_database_clock(conn, "1 h")
    record_final_failure(conn, run.run_id, run.lease_token, status="dead",
                         error="timeout", error_class="OutcomeUnknown")
    conn.execute("UPDATE runs SET deadline_at = now() - interval '1 minute'")   # time passes

    held = replay(conn, DeadFilter(run_ids=[run.run_id]))
    assert (held.replayed, [r.run_id for r in held.past_deadline]) == ([], [run.run_id])
    assert _row(conn)[0] == "dead"              # still in the dead letter

    sent = replay(conn, DeadFilter(run_ids=[run.run_id]), ignore_deadline=True)
    assert [r.run_id for r in sent.replayed] == [run.run_id] and sent.past_deadline == []
    (deadline,) = conn.execute("SELECT deadline_at FROM runs").fetchone()  # type: ignore[misc]
    assert deadline is None                     # a replay on purpose is not skipped again
    (claimed,) = claim_runs(conn, owner="w", shares={"normal": 1})
    assert claimed.run_id == run.run_id


def test_run_late_runs_have_no_deadline(conn: psycopg.Connection[Any]) -> None:
    _job(conn, {"policy": "run_late"})
    tick(conn, batch=10, now=DAY + timedelta(hours=4))
    late = DAY + timedelta(days=30)
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1}, now=late)
    assert run.attempt == 1


def test_a_run_that_waited_for_a_rate_limit_past_its_deadline_is_not_sent(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    # The claim took it in time; then the gateway's bucket held it back (1 token every 2 s,
    # and the bucket is empty): by the time a token came, the deadline had passed.
    from psycopg_pool import ConnectionPool

    from crondepot.job.guard import AddressGuard
    from crondepot.limits.buckets import RateLimiter, set_limit
    from crondepot.queue.lease import Deadline
    from crondepot.tenancy.grants import grant
    from crondepot.worker.execute import Attempt, Executor
    from crondepot.worker.outcome_writer import OutcomeWriter
    from crondepot.worker.targets import WebhookTarget

    set_limit(conn, "sms-gateway", 0.5, 1)
    grant(conn, tenant(conn), limits=["sms-gateway"])
    conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = now()")
    _job(conn, {"policy": "skip_after", "seconds": 600}, rate_limit="sms-gateway")
    run = _claimed_on_the_database_clock(conn, "1 s")
    assert run.rate_limit == "sms-gateway"
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True,
                        kwargs={"autocommit": True}) as pool:
        webhooks = WebhookTarget(AddressGuard.from_env())
        outcomes = OutcomeWriter(pool)
        executor = Executor(pool, outcomes, RateLimiter(pool), webhooks,
                            stopping=lambda: False)
        attempt = Attempt(run=run, deadline=Deadline(time.monotonic() + 60))
        assert executor.run(attempt, lambda: None) == "not-started"
        outcomes.close()
        webhooks.close()
    assert attempt.lost and not attempt.started
    assert _row(conn) == ("skipped", "deadline_passed", 0, True)
