"""A real worker process killed with SIGKILL between a broker's acceptance of a run's
message and the run's record (issue 35, "Done when"): after the lease expires another
worker retries the run, and

- NATS JetStream holds the message once (``Nats-Msg-Id`` = run id: the stream's duplicate
  window drops the retry's publish; effect once);
- Redis holds one stream entry (the run id's guard key: the retry adds nothing; effect once);
- RabbitMQ holds it twice, both with ``message_id`` = the run id: AMQP is at least once, and
  a consumer deduplicates on ``message_id`` (docs/targets.md).

The kill lands in the gap on purpose: the test holds the job's row lock, which the success
record takes (record_successes heals a failing job's count), so the worker has published
and waits to record when it is killed; its database session, which would otherwise finish
the record once the lock is released, is terminated with it (the record never lands).
Each test skips, naming its broker, when that broker is not running."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.tenancy import connections
from crondepot.tenancy.grants import grant, revoke
from crondepot.worker.targets.redis import guard_key
from crondepot_testkit.processes import Proc, wait_until
from tests.support import brokers
from tests.support.jobs import tenant

LEASE_SECONDS = 5


def _queue_one(conn: psycopg.Connection[Any], kind: str, target: dict[str, Any]) -> str:
    """One job of bank42 with one queued run, ready now; its failing count is 1 so that the
    success record locks the job row (which the test holds). Returns the run id."""
    t = tenant(conn)
    connections.add(conn, "broker", brokers.URLS[kind])
    grant(conn, t, connections=["broker"])
    row = conn.execute(
        "INSERT INTO jobs (tenant_id, key, cron, tz, target, payload, lease_seconds, "
        "max_attempts, active, failing_fires) VALUES (%s, 'renewal', '0 9 * * *', 'UTC', "
        "%s, '{\"template\": \"renewal_due\"}', %s, 6, false, 1) RETURNING id",
        (t, json.dumps({**target, "connection": "broker", "timeout_s": 5}),
         LEASE_SECONDS)).fetchone()
    assert row is not None
    run_id = f"{row[0]}:1791171000"
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at) VALUES (%s, %s, %s, 'normal', now(), now(), now())",
                 (run_id, row[0], t))
    return run_id


def _killed_between_publish_and_record(db_url: str, run_id: str,
                                       published: Callable[[], bool]) -> dict[str, Any]:
    """Run ``run_id`` in a worker that is SIGKILLed once ``published()`` (its record held
    back by the job row's lock), then in a second worker; the run's row once it succeeded."""
    with connect(db_url) as conn, psycopg.connect(db_url) as holder:
        holder.execute("SELECT 1 FROM jobs WHERE id = %s FOR UPDATE",
                       (int(run_id.split(":")[0]),))
        victim = Proc("worker", "--db", db_url, "--name", "victim", "--heartbeat", "1")
        try:
            wait_until(published, timeout=60, message="the victim's publish reached the broker")
            # its record waits on the lock: a statement the server already has would still
            # commit once the lock goes, so the kill takes the victim's waiting session too
            holder_pid = holder.info.backend_pid
            wait_until(lambda: _waiting_on(conn, holder_pid) != [], timeout=30,
                       message="the victim's record waits on the job row")
            victim.kill(signal.SIGKILL)
            victim.popen.wait()
            for pid in _waiting_on(conn, holder_pid):
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        finally:
            victim.stop()
        holder.rollback()
        state = conn.execute("SELECT status, attempt FROM runs WHERE run_id = %s",
                             (run_id,)).fetchone()
        assert state == ("running", 1), state        # killed before its record
        rescuer = Proc("worker", "--db", db_url, "--name", "rescuer", "--heartbeat", "1")
        try:
            wait_until(lambda: conn.execute(
                "SELECT status = 'succeeded' FROM runs WHERE run_id = %s",
                (run_id,)).fetchone() == (True,), timeout=90,
                message="the rescuer's retry succeeded")
        finally:
            rescuer.stop()
        row = conn.execute("SELECT attempt, result, worker FROM runs WHERE run_id = %s",
                           (run_id,)).fetchone()
        assert row is not None
        return {"attempt": row[0], "result": row[1], "worker": row[2]}


def _waiting_on(conn: psycopg.Connection[Any], pid: int) -> list[int]:
    return [r[0] for r in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE %s = ANY (pg_blocking_pids(pid))", (pid,))]


@pytest.fixture
def nats_subject() -> Iterator[tuple[str, str]]:
    brokers.require("nats")
    prefix = brokers.unique("crondepot-kill.s")
    for stream in brokers.nats_stream(prefix):
        yield stream, f"{prefix}.reminders.sms"


@pytest.mark.slow
def test_nats_holds_the_message_once_after_a_kill_between_publish_and_record(
        db_url: str, nats_subject: tuple[str, str]) -> None:
    stream, subject = nats_subject
    with connect(db_url) as conn:
        run_id = _queue_one(conn, "nats", {"type": "nats", "subject": subject})
    done = _killed_between_publish_and_record(
        db_url, run_id, lambda: len(brokers.nats_messages(stream)) == 1)
    assert done["attempt"] == 2 and done["worker"] == "rescuer"
    assert done["result"]["duplicate"] is True        # the stream dropped the retry's publish
    messages = brokers.nats_messages(stream)
    assert [(json.loads(d)["run_id"], h["Nats-Msg-Id"]) for d, h in messages] == [
        (run_id, run_id)]


@pytest.mark.slow
def test_redis_holds_one_entry_after_a_kill_between_publish_and_record(db_url: str) -> None:
    brokers.require("redis")
    stream = brokers.unique("crondepot-kill:reminders:")
    with connect(db_url) as conn:
        run_id = _queue_one(conn, "redis", {"type": "redis", "stream": stream})
    brokers.redis_drop(guard_key(run_id))      # the run id is the same in every test database
    try:
        done = _killed_between_publish_and_record(
            db_url, run_id, lambda: len(brokers.redis_entries(stream)) == 1)
        assert done["attempt"] == 2 and done["result"]["duplicate"] is True
        assert [e[b"run_id"].decode() for e in brokers.redis_entries(stream)] == [run_id]
    finally:
        brokers.redis_drop(stream, guard_key(run_id))


@pytest.fixture
def amqp_exchange() -> Iterator[tuple[str, str]]:
    brokers.require("amqp")
    exchange = brokers.unique("crondepot-kill.")
    for queue in brokers.amqp_queue(exchange, "sms"):
        yield exchange, queue


@pytest.mark.slow
def test_amqp_delivers_at_least_once_after_a_kill_between_publish_and_record(
        db_url: str, amqp_exchange: tuple[str, str]) -> None:
    exchange, queue = amqp_exchange
    taken: list[tuple[bytes, Any]] = []

    def published() -> bool:
        taken.extend(brokers.amqp_messages(queue))
        return len(taken) >= 1

    with connect(db_url) as conn:
        run_id = _queue_one(conn, "amqp", {"type": "amqp", "exchange": exchange,
                                           "routing_key": "sms"})
    done = _killed_between_publish_and_record(db_url, run_id, published)
    assert done["attempt"] == 2
    taken.extend(brokers.amqp_messages(queue))
    # at least once: the victim's message and the rescuer's, one message id
    assert [p.message_id for _, p in taken] == [run_id, run_id]
    assert [json.loads(b)["attempt"] for b, _ in taken] == [1, 2]


@pytest.mark.slow
def test_a_worker_publishes_nothing_for_a_connection_revoked_after_the_run_was_queued(
        db_url: str) -> None:
    brokers.require("redis")
    stream = brokers.unique("crondepot-revoked:reminders:")
    with connect(db_url) as conn:
        run_id = _queue_one(conn, "redis", {"type": "redis", "stream": stream})
        conn.execute("UPDATE jobs SET failing_fires = 0")
        revoke(conn, tenant(conn), connections=["broker"])
        worker = Proc("worker", "--db", db_url, "--name", "w1")
        try:
            wait_until(lambda: conn.execute(
                "SELECT status FROM runs WHERE run_id = %s", (run_id,)).fetchone() not in (
                ("queued",), ("running",)), timeout=60, message="the run was refused")
        finally:
            worker.stop()
        row = conn.execute("SELECT status, error_class, last_error FROM runs "
                           "WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None and row[0] in ("failed", "dead") and row[1] == "GrantMissing"
    assert "connection 'broker' is not granted" in row[2]
    assert brokers.redis_entries(stream) == []
