"""A real worker process delivers the runs of many jobs to a broker that is restarted under
it (issue 35, "Done when"): the worker's pooled clients reconnect, no run is lost (each
ends succeeded, some after retries) and a deduplicating broker holds each run's message
once.

Each broker is a private one (crondepot_testkit.brokers), never the machine's shared one:

- NATS JetStream, stopped with SIGTERM: the stream (file store) holds one message per
  ``Nats-Msg-Id``;
- Redis with ``appendonly yes`` and ``appendfsync always``, stopped with SIGKILL (a crash):
  one stream entry per run id; the guard keys and the entries come back from the
  append-only file (without persistence a restart forgets both: docs/targets.md);
- RabbitMQ, a node of the test's own stopped with ``rabbitmqctl stop``: at least once, so
  repeats are counted and reported, not forbidden. A publish the restart cut before its
  confirm is an unknown outcome (a dead letter, design: never an automatic repeat to a
  broker that cannot drop one); such a run is not lost only if its message is in the queue
  or its dead letter says so, and the test checks both.

The figures (runs, retried, lost, duplicates, reconnect seconds) are printed, one JSON
line per broker (``pytest -s``)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.tenancy import connections
from crondepot.tenancy.grants import grant
from crondepot_testkit.brokers import NatsServer, PrivateBroker, RabbitNode, RedisServer
from crondepot_testkit.processes import Proc, wait_until
from tests.support import brokers
from tests.support.jobs import tenant

JOBS = 40
RUNS_PER_JOB = 10
RUNS = JOBS * RUNS_PER_JOB
SPREAD_SECONDS = 12.0     # the runs fall due evenly over this long: the load goes on
                          # through the restart


def _queue_runs(conn: psycopg.Connection[Any], url: str, target: dict[str, Any]) -> None:
    """JOBS jobs of bank42 publishing through the connection ``broker`` (``url``), with
    RUNS_PER_JOB runs each falling due one after another over SPREAD_SECONDS. Retries are
    quick and many (up to 100 attempts, at most 2 s apart): a run due while the broker is
    down must outlast the restart, not give up."""
    t = tenant(conn)
    connections.add(conn, "broker", url)
    grant(conn, t, connections=["broker"])
    conn.execute(
        """
        WITH j AS (
          INSERT INTO jobs (tenant_id, key, cron, tz, target, payload, lease_seconds,
                            max_attempts, retry_base_s, retry_cap_s, active)
          SELECT %(t)s, 'renewal-' || g, '0 9 * * *', 'UTC', %(target)s,
                 '{"template": "renewal_due"}', 30, 100, 0.25, 2, false
          FROM generate_series(1, %(jobs)s) AS g
          RETURNING id)
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,
                          available_at)
        SELECT j.id || ':' || (1791171000 + 60 * k), j.id, %(t)s, 'normal',
               to_timestamp(1791171000 + 60 * k), now(),
               now() + make_interval(
                 secs => %(step)s * (row_number() OVER (ORDER BY k, j.id) - 1)::float8)
        FROM j, generate_series(1, %(per_job)s) AS k
        """,
        {"t": t, "target": json.dumps({**target, "connection": "broker", "timeout_s": 5}),
         "jobs": JOBS, "per_job": RUNS_PER_JOB, "step": SPREAD_SECONDS / RUNS})


def _succeeded(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM runs WHERE status = 'succeeded'").fetchone()
    assert row is not None
    return int(row[0])


def _restart_under_load(db_url: str, broker: PrivateBroker, target: dict[str, Any],
                        stop: int) -> dict[str, Any]:
    """Queue the runs, start a worker, stop ``broker`` (with ``stop``) once a quarter of them
    succeeded, start it again once a call has failed on it, and wait until every run has
    ended. The runs' ends by
    status and the restart's figures."""
    with connect(db_url) as conn:
        _queue_runs(conn, broker.url, target)
        worker = Proc("worker", "--db", db_url, "--name", "w1", "--concurrency", "8",
                      "--urgent-only", "0", "--heartbeat", "1")
        try:
            wait_until(lambda: _succeeded(conn) >= RUNS // 4, timeout=120,
                       message="a quarter of the runs delivered before the restart")
            stopped_at = time.monotonic()
            broker.stop(stop)
            # down until the worker has failed a call on it, whatever the clients buffer
            wait_until(lambda: conn.execute(
                "SELECT count(*) > 0 FROM runs WHERE last_error IS NOT NULL").fetchone()
                == (True,), timeout=60, message="a call failed on the stopped broker")
            broker.start()
            up_at, before = time.monotonic(), _succeeded(conn)
            down = up_at - stopped_at
            wait_until(lambda: _succeeded(conn) > before, timeout=60,
                       message="a run delivered after the restart")
            reconnect = time.monotonic() - up_at
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM runs WHERE status IN ('queued', 'running')"
            ).fetchone() == (0,), timeout=240, message="every run ended")
        finally:
            worker.stop()
        ends = dict(conn.execute("SELECT status, count(*) FROM runs GROUP BY 1").fetchall())
        retried = conn.execute("SELECT count(*) FROM runs WHERE attempt > 1").fetchone()
        unknown = [r[0] for r in conn.execute(
            "SELECT run_id FROM runs WHERE status = 'dead' AND error_class = 'OutcomeUnknown'")]
        others = conn.execute(
            "SELECT run_id, status, error_class, last_error FROM runs "
            "WHERE status <> 'succeeded' AND run_id <> ALL (%s) LIMIT 5", (unknown,)).fetchall()
        succeeded = {r[0] for r in conn.execute(
            "SELECT run_id FROM runs WHERE status = 'succeeded'")}
    assert retried is not None
    return {"ends": ends, "succeeded": succeeded, "unknown": unknown, "others": others,
            "retried": retried[0], "down_s": round(down, 2), "reconnect_s": round(reconnect, 2)}


def _report(kind: str, seen: dict[str, Any], at_broker: Counter[str]) -> dict[str, Any]:
    """The figures: what the broker holds against what the runs say."""
    figures = {
        "broker": kind, "runs": RUNS, "ends": seen["ends"], "retried": seen["retried"],
        "lost": len(seen["succeeded"] - set(at_broker)),
        "duplicates": sum(n - 1 for n in at_broker.values()),
        "unknown_outcome": len(seen["unknown"]),
        "unknown_but_queued": len(set(seen["unknown"]) & set(at_broker)),
        "broker_down_s": seen["down_s"], "reconnect_s": seen["reconnect_s"]}
    print(json.dumps(figures))
    return figures


@pytest.fixture
def private(request: pytest.FixtureRequest) -> Iterator[PrivateBroker]:
    if not request.param.installed():
        pytest.skip(f"{request.param.binary} is not installed (CI machines have it: .ci/run)")
    made: PrivateBroker = request.param()
    try:
        made.start()
        yield made
    finally:
        made.close()


@pytest.mark.slow
@pytest.mark.parametrize("private", [NatsServer], indirect=True)
def test_nats_restarted_under_load_loses_no_run_and_stores_each_once(
        db_url: str, private: PrivateBroker) -> None:
    import nats

    async def make_stream() -> None:
        nc = await nats.connect(private.url)
        await nc.jetstream().add_stream(name="REMINDERS", subjects=["reminders.>"],
                                        duplicate_window=600.0)
        await nc.close()

    asyncio.run(make_stream())
    seen = _restart_under_load(db_url, private, {"type": "nats", "subject": "reminders.sms"},
                               signal.SIGTERM)
    messages = brokers.nats_messages("REMINDERS", private.url)
    at_broker = Counter(h["Nats-Msg-Id"] for _, h in messages)
    figures = _report("nats", seen, at_broker)
    assert seen["ends"] == {"succeeded": RUNS}, seen["others"]
    assert figures["lost"] == 0 and figures["duplicates"] == 0
    assert {json.loads(d)["run_id"] for d, _ in messages} == set(at_broker)


@pytest.mark.slow
@pytest.mark.parametrize("private", [RedisServer], indirect=True)
def test_redis_crashed_under_load_loses_no_run_and_adds_each_once(
        db_url: str, private: PrivateBroker) -> None:
    seen = _restart_under_load(db_url, private, {"type": "redis", "stream": "reminders"},
                               signal.SIGKILL)
    entries = brokers.redis_entries("reminders", private.url)
    at_broker = Counter(e[b"run_id"].decode() for e in entries)
    figures = _report("redis", seen, at_broker)
    assert seen["ends"] == {"succeeded": RUNS}, seen["others"]
    assert figures["lost"] == 0 and figures["duplicates"] == 0


def _amqp_queue(url: str) -> None:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    channel = conn.channel()
    channel.exchange_declare("reminders", "direct", durable=True)
    channel.queue_declare("reminders.sms", durable=True)
    channel.queue_bind("reminders.sms", "reminders", "sms")
    conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("private", [RabbitNode], indirect=True)
def test_amqp_restarted_under_load_loses_no_run(db_url: str, private: PrivateBroker) -> None:
    _amqp_queue(private.url)
    seen = _restart_under_load(
        db_url, private, {"type": "amqp", "exchange": "reminders", "routing_key": "sms"},
        signal.SIGTERM)
    messages = brokers.amqp_messages("reminders.sms", private.url)
    at_broker = Counter(str(p.message_id) for _, p in messages)
    figures = _report("amqp", seen, at_broker)
    assert seen["others"] == [], seen["others"]       # succeeded, or an unknown outcome
    assert figures["lost"] == 0
    # a dead letter says "outcome unknown" for a person to look in the queue: each such run
    # is either there (to be marked done by hand) or visibly not delivered; none is silent
    assert seen["ends"].get("succeeded", 0) + len(seen["unknown"]) == RUNS


