"""Failure notices (notices/, docs/notices.md): events written by triggers in the
transaction of their cause, composed at most one message per channel and job an hour (a
digest beyond), delivered by the sender to a real loopback webhook receiver (its signature
checked) and a real SMTP server, retried with backoff, failed for good on a refusal."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import Q
from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.notices.channels import add_channel
from crondepot.notices.outbox import MAX_ATTEMPTS, held_events, list_messages
from crondepot.worker.targets.webhook_signature import verify
from tests.support.jobs import add_job, tenant
from tests.support.notices import dead_runs, sender, smtp_server
from tests.support.target_server import Route, TargetServer


@pytest.fixture(autouse=True)
def _loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWLIST_ENV, "127.0.0.1/32")


@pytest.fixture
def receiver() -> Any:
    server = TargetServer()
    yield server
    server.close()


def _events(conn: psycopg.Connection[Any]) -> list[tuple[str, int, str | None]]:
    return [(kind, job, run) for kind, job, run in conn.execute(
        "SELECT kind, job_id, run_id FROM notice_events ORDER BY id")]


def _secret(conn: psycopg.Connection[Any], tenant_id: int) -> str:
    row = conn.execute("SELECT signing_secret FROM tenants WHERE id = %s",
                       (tenant_id,)).fetchone()
    assert row is not None
    return str(row[0])


def _db_now(conn: psycopg.Connection[Any]) -> Any:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]


def test_a_dead_letter_makes_one_signed_notice(conn: psycopg.Connection[Any],
                                               receiver: TargetServer) -> None:
    t = tenant(conn)
    job = add_job(conn, t, key="emi-7", cron="0 9 * * *")
    add_channel(conn, t, "webhook", receiver.url("/notices"))
    (run_id,) = dead_runs(conn, job, 1)
    assert _events(conn) == [("run_dead", job, run_id)]

    done = sender().turn(conn)

    assert (done.composed, done.sent) == (1, 1)
    (call,) = receiver.received
    verify(_secret(conn, t), call.headers, call.body)         # signed as runs are
    body = json.loads(call.body)
    assert body["type"] == "notice" and body["job_id"] == job and body["job_key"] == "emi-7"
    assert call.headers["webhook-id"] == body["id"] == f"notice-{list_messages(conn, t)[0].id}"
    (event,) = body["events"]
    assert event["kind"] == "run_dead" and event["run_id"] == run_id
    assert "HTTP 503 from the gateway" in event["detail"]
    (message,) = list_messages(conn, t)
    assert (message.status, message.attempts, message.last_error) == ("sent", 1, None)
    assert sender().turn(conn).sent == 0                       # nothing sent twice


def test_an_event_is_written_with_its_cause_or_not_at_all(
        conn: psycopg.Connection[Any], receiver: TargetServer) -> None:
    t = tenant(conn)
    job = add_job(conn, t, key="rolled-back", cron="0 9 * * *")
    add_channel(conn, t, "webhook", receiver.url())
    with pytest.raises(RuntimeError), conn.transaction():
        dead_runs(conn, job, 1)
        raise RuntimeError("the worker's transaction fails after the dead letter")
    assert _events(conn) == []
    assert conn.execute("SELECT count(*) FROM runs WHERE status = 'dead'").fetchone() == (0,)


def test_a_tenant_without_a_channel_gets_no_event(conn: psycopg.Connection[Any],
                                                  receiver: TargetServer) -> None:
    quiet, loud = tenant(conn, "quiet"), tenant(conn, "loud")
    add_channel(conn, loud, "webhook", receiver.url())
    dead_runs(conn, add_job(conn, quiet, key="q", cron="0 9 * * *"), 2)
    assert _events(conn) == []


def test_failures_within_the_hour_make_one_notice_then_one_digest(
        conn: psycopg.Connection[Any], receiver: TargetServer) -> None:
    t = tenant(conn)
    # A threshold out of reach: the events here are the dead letters alone.
    job = add_job(conn, t, key="flaky", cron="0 9 * * *", alert_after_failures=100)
    other = add_job(conn, t, key="other", cron="0 9 * * *")
    add_channel(conn, t, "webhook", receiver.url())
    notices = sender()
    dead_runs(conn, job, 1)
    assert notices.turn(conn).sent == 1                        # the first: at once
    folded = dead_runs(conn, job, 4, first=1_800_000_000)
    dead_runs(conn, other, 1)                                  # another job: its own notice
    later = notices.turn(conn)
    assert (later.composed, later.sent) == (1, 1)
    assert len(receiver.received) == 2 and held_events(conn, t) == 4

    hour = _db_now(conn) + timedelta(minutes=61)
    digest = notices.turn(conn, now=hour)

    assert (digest.composed, digest.sent) == (1, 1) and held_events(conn, t) == 0
    body = json.loads(receiver.received[-1].body)
    assert body["type"] == "digest" and body["job_id"] == job
    assert [e["run_id"] for e in body["events"]] == folded
    kinds = [(m.job_id, m.digest, len(m.events)) for m in reversed(list_messages(conn, t))]
    assert kinds == [(job, False, 1), (other, False, 1), (job, True, 4)]
    # One more failure: the digest opened a new window, so it waits for that one.
    dead_runs(conn, job, 1, first=1_900_000_000)
    assert notices.turn(conn, now=hour).composed == 0
    assert notices.turn(conn, now=hour + timedelta(minutes=61)).sent == 1


def test_a_failing_channel_is_retried_with_backoff_then_delivered(
        conn: psycopg.Connection[Any], receiver: TargetServer) -> None:
    t = tenant(conn)
    add_channel(conn, t, "webhook", receiver.url("/down"))
    dead_runs(conn, add_job(conn, t, key="j", cron="0 9 * * *"), 1)
    receiver.routes["/down"] = Route(status=503, body=b"maintenance")
    notices = sender()

    first = notices.turn(conn, jitter=0.5)

    assert (first.sent, first.retried) == (0, 1)
    (message,) = list_messages(conn, t)
    assert message.status == "pending" and message.attempts == 1
    assert message.last_error is not None and "HTTP 503" in message.last_error
    assert message.next_attempt_at > _db_now(conn)             # backoff: not due yet
    assert notices.turn(conn).retried == 0 and len(receiver.received) == 1
    receiver.routes["/down"] = Route(status=200)
    again = notices.turn(conn, now=_db_now(conn) + timedelta(hours=2))
    assert again.sent == 1
    (message,) = list_messages(conn, t)
    assert (message.status, message.attempts, message.last_error) == ("sent", 2, None)
    first_id, second_id = (r.headers["webhook-id"] for r in receiver.received)
    assert first_id == second_id                               # a receiver may drop repeats


def test_a_refusal_fails_the_message_at_once_and_attempts_are_bounded(
        conn: psycopg.Connection[Any], receiver: TargetServer) -> None:
    t = tenant(conn)
    gone = add_channel(conn, t, "webhook", receiver.url("/gone"))[0]
    receiver.routes["/gone"] = Route(status=410, body=b"no such hook")
    dead_runs(conn, add_job(conn, t, key="j", cron="0 9 * * *"), 1)
    assert sender().turn(conn).failed == 1
    (message,) = list_messages(conn, t, status="failed")
    assert message.channel_id == gone.id and "HTTP 410" in (message.last_error or "")

    # A channel that never answers well: retried MAX_ATTEMPTS times, then failed.
    receiver.routes["/gone"] = Route(status=500)
    dead_runs(conn, add_job(conn, t, key="k", cron="0 9 * * *"), 1, first=1_800_000_000)
    notices, when = sender(), _db_now(conn)
    for _ in range(MAX_ATTEMPTS):
        notices.turn(conn, now=when)
        when += timedelta(hours=2)
    assert [m.status for m in list_messages(conn, t)] == ["failed", "failed"]
    assert list_messages(conn, t)[0].attempts == MAX_ATTEMPTS


def test_a_webhook_to_a_refused_address_fails_at_connect_time(
        conn: psycopg.Connection[Any], receiver: TargetServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A name that resolves to loopback passes the write-time check (names are not
    # resolved then); the sender's guard refuses the address it connects to.
    t = tenant(conn)
    add_channel(conn, t, "webhook", receiver.url(host="localhost"))
    dead_runs(conn, add_job(conn, t, key="j", cron="0 9 * * *"), 1)
    from crondepot.job.guard import AddressGuard
    from crondepot.notices.sender import NoticeSender
    assert NoticeSender(guard=AddressGuard()).turn(conn).failed == 1
    (message,) = list_messages(conn, t)
    assert "may not call" in (message.last_error or "") and receiver.received == []
    assert message.status == "failed"                          # the guard's refusal is final


def test_email_goes_through_a_real_smtp_server_and_is_retried(
        conn: psycopg.Connection[Any]) -> None:
    t = tenant(conn)
    job = add_job(conn, t, key="emi-9", cron="0 9 * * *")
    add_channel(conn, t, "email", "ops@bank.example")
    (run_id,) = dead_runs(conn, job, 1)
    with smtp_server() as (inbox, relay):
        inbox.refuse = 1
        notices = sender(relay)
        assert notices.turn(conn).retried == 1                 # 451: tried again later
        assert "451" in (list_messages(conn, t)[0].last_error or "")
        assert notices.turn(conn, now=_db_now(conn) + timedelta(hours=2)).sent == 1
    ((to, mail),) = inbox.messages
    assert to == ["ops@bank.example"] and mail["From"] == "notices@crondepot.test"
    assert mail["Subject"] == f"crondepot: job {job} (emi-9) dead-lettered a run"
    assert run_id in mail.get_payload() and mail["X-Crondepot-Notice"].startswith("notice-")


def test_email_without_a_relay_waits_with_that_as_its_error(
        conn: psycopg.Connection[Any]) -> None:
    t = tenant(conn)
    add_channel(conn, t, "email", "ops@bank.example")
    dead_runs(conn, add_job(conn, t, key="j", cron="0 9 * * *"), 1)
    assert sender().turn(conn).retried == 1
    assert "CRONDEPOT_SMTP_URL" in (list_messages(conn, t)[0].last_error or "")


def test_a_job_turning_unhealthy_is_one_event_until_it_heals(
        conn: psycopg.Connection[Any], receiver: TargetServer) -> None:
    t = tenant(conn)
    job = add_job(conn, t, key="sick", cron="0 9 * * *", alert_after_failures=2)
    add_channel(conn, t, "webhook", receiver.url())
    dead_runs(conn, job, 1)
    assert [k for k, _, _ in _events(conn)] == ["run_dead"]
    dead_runs(conn, job, 3, first=1_800_000_000)               # crosses 2, then stays over
    assert [k for k, _, _ in _events(conn)].count("job_unhealthy") == 1
    conn.execute("UPDATE jobs SET failing_fires = 0 WHERE id = %s", (job,))   # a success
    dead_runs(conn, job, 2, first=1_900_000_000)
    assert [k for k, _, _ in _events(conn)].count("job_unhealthy") == 2
    sender().turn(conn)
    (first,) = json.loads(receiver.received[0].body)["events"][:1]
    assert first["kind"] == "run_dead"


def test_a_job_ended_by_max_runs_or_end_at_is_an_event_and_completed_is_not(
        conn: psycopg.Connection[Any], receiver: TargetServer) -> None:
    t = tenant(conn)
    add_channel(conn, t, "webhook", receiver.url())
    ids = {reason: add_job(conn, t, key=reason, cron="0 9 * * *")
           for reason in ("max_runs", "end_at", "completed")}
    for reason, job in ids.items():
        conn.execute(Q.end_job, {"id": job, "tenant_id": t, "reason": reason,
                                 "ended_at": _db_now(conn)})
    assert sorted((k, j) for k, j, _ in _events(conn)) == sorted(
        [("job_ended", ids["max_runs"]), ("job_ended", ids["end_at"])])
    assert sender().turn(conn).sent == 2
    details = {json.loads(r.body)["job_id"]: json.loads(r.body)["events"][0]["detail"]
               for r in receiver.received}
    assert "max_runs" in details[ids["max_runs"]] and "end_at" in details[ids["end_at"]]


def test_each_channel_gets_its_own_message(conn: psycopg.Connection[Any],
                                           receiver: TargetServer) -> None:
    t = tenant(conn)
    add_channel(conn, t, "webhook", receiver.url("/a"))
    add_channel(conn, t, "webhook", receiver.url("/b"))
    dead_runs(conn, add_job(conn, t, key="j", cron="0 9 * * *"), 1)
    assert sender().turn(conn).sent == 2
    assert sorted(r.path for r in receiver.received) == ["/a", "/b"]
