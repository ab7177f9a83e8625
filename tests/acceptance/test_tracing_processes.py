"""OpenTelemetry traces across real processes (runtime/tracing.py): one run is one trace,
from the scheduler's tick to the webhook receiver and the broker's message.

The scheduler and the worker run as real processes through ``crondepot_testkit.traced``,
which keeps their spans in the SDK's InMemorySpanExporter and writes them out when the
process exits (SIGTERM), with the OpenTelemetry modules the process loaded.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.runtime.tracing import run_ids, trace_id_hex
from crondepot.tenancy import connections
from crondepot.tenancy.grants import grant
from crondepot.worker.targets.redis import guard_key
from crondepot_testkit.processes import Proc, wait_until
from tests.support import brokers
from tests.support.jobs import bulk_due_jobs, queued_runs, tenant
from tests.support.target_server import Received, Route, TargetServer

TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
LOOPBACK = {"CRONDEPOT_TARGET_ALLOWLIST": "127.0.0.1/32"}


@pytest.fixture(autouse=True)
def _no_otel_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The processes see only the OTEL_* settings a test gives them."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    target = TargetServer()
    yield target
    target.close()


class Traced:
    """A crondepot command in its own process, its spans kept (``on``) and read at exit."""

    def __init__(self, tmp_path: Path, *args: str, on: bool = True,
                 env: dict[str, str] | None = None) -> None:
        self.out = tmp_path / f"{args[0]}-{len(list(tmp_path.iterdir()))}.json"
        self.proc = Proc(*args, module="crondepot_testkit.traced",
                         env={"CRONDEPOT_TEST_SPANS": str(self.out),
                              **({"CRONDEPOT_TEST_TRACING": "on"} if on else {}),
                              **(env or {})})

    def stop(self) -> dict[str, Any]:
        assert self.proc.stop() == 0, self.proc.output()[-3000:]
        document: dict[str, Any] = json.loads(self.out.read_text())
        return document


def _named(spans: list[dict[str, Any]], name: str, run_id: str | None = None
           ) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name
            and (run_id is None or s["attributes"].get("crondepot.run_id") == run_id)]


def _traceparent(headers: dict[str, str]) -> tuple[str, str]:
    """(trace id, parent span id) of a valid W3C traceparent: version 00, ids not zero."""
    match = TRACEPARENT.fullmatch(headers["traceparent"])
    assert match is not None, headers["traceparent"]
    trace_id, span_id, flags = match.groups()
    assert trace_id != "0" * 32 and span_id != "0" * 16
    assert int(flags, 16) & 1, "sampled"
    return trace_id, span_id


def _only_run(conn: psycopg.Connection[Any]) -> str:
    (run_id,) = conn.execute("SELECT run_id FROM runs").fetchone() or (None,)
    assert isinstance(run_id, str)
    return run_id


def _status(conn: psycopg.Connection[Any], run_id: str) -> Any:
    return conn.execute("SELECT status, attempt FROM runs WHERE run_id = %s",
                        (run_id,)).fetchone()


@pytest.mark.slow
def test_a_run_is_one_trace_from_the_tick_through_each_attempt_to_the_receiver(
        db_url: str, tmp_path: Path, server: TargetServer) -> None:
    with connect(db_url) as conn:
        bulk_due_jobs(conn, 1)
        # the first call answers 503: a retry soon after (a wait of 0 to 1 s), then 200
        conn.execute("UPDATE jobs SET retry_base_s = 1, retry_cap_s = 1, target = %s::jsonb",
                     (json.dumps({"type": "http", "url": server.url(), "timeout_s": 5}),))
    calls: list[int] = []

    def answer(received: Received) -> Route:
        calls.append(1)
        return Route(status=503) if len(calls) == 1 else Route()

    server.answer = answer
    scheduler = Traced(tmp_path, "scheduler", "--db", db_url, "--name", "s1")
    worker = Traced(tmp_path, "worker", "--db", db_url, "--name", "w1", "--heartbeat", "1",
                    env=LOOPBACK)
    try:
        with connect(db_url) as conn:
            wait_until(lambda: conn.execute("SELECT count(*) FROM runs").fetchone() == (1,),
                       timeout=60, message="the scheduler wrote the run")
            run_id = _only_run(conn)
            wait_until(lambda: _status(conn, run_id) == ("succeeded", 2), timeout=60,
                       message="the run succeeded at its second attempt")
    finally:
        written = scheduler.stop()
        taken = worker.stop()
    assert {s["service"] for s in written["spans"]} == {"crondepot-scheduler"}
    assert {s["service"] for s in taken["spans"]} == {"crondepot-worker"}
    trace_id, root_id = trace_id_hex(run_id), f"{run_ids(run_id)[1]:016x}"

    # the scheduler: the run's root, linked to the tick that wrote it
    (tick,) = [t for t in _named(written["spans"], "crondepot.tick")
               if t["attributes"]["crondepot.written"]]
    (root,) = _named(written["spans"], "crondepot.run", run_id)
    assert (root["trace_id"], root["span_id"], root["parent_id"]) == (trace_id, root_id, None)
    assert root["links"] == [{"trace_id": tick["trace_id"], "span_id": tick["span_id"]}]
    assert tick["trace_id"] != trace_id and tick["attributes"]["crondepot.claimed"] == 1

    # the worker: each attempt a child of the root, linked to its claim; call and outcome
    # its children
    claims = {c["span_id"]: c for c in _named(taken["spans"], "crondepot.claim")}
    attempts = sorted(_named(taken["spans"], "crondepot.attempt", run_id),
                      key=lambda s: s["attributes"]["crondepot.attempt"])
    assert [a["attributes"]["crondepot.attempt"] for a in attempts] == [1, 2]
    calls_by_attempt, outcomes = {}, {}
    for attempt in attempts:
        assert (attempt["trace_id"], attempt["parent_id"]) == (trace_id, root_id)
        (link,) = attempt["links"]
        assert run_id in claims[link["span_id"]]["attributes"]["crondepot.run_ids"]
        (call,) = [s for s in _named(taken["spans"], "crondepot.call", run_id)
                   if s["parent_id"] == attempt["span_id"]]
        (outcome,) = [s for s in _named(taken["spans"], "crondepot.outcome", run_id)
                      if s["parent_id"] == attempt["span_id"]]
        assert call["trace_id"] == outcome["trace_id"] == trace_id
        assert call["kind"] == "CLIENT"
        calls_by_attempt[attempt["attributes"]["crondepot.attempt"]] = call
        outcomes[attempt["attributes"]["crondepot.attempt"]] = outcome["attributes"]
    assert calls_by_attempt[1]["status"] == "ERROR"
    assert calls_by_attempt[1]["attributes"]["http.response.status_code"] == 503
    assert calls_by_attempt[2]["status"] == "UNSET"
    assert calls_by_attempt[2]["attributes"]["http.response.status_code"] == 200
    assert [outcomes[1]["crondepot.outcome"], outcomes[2]["crondepot.outcome"]] == [
        "retry", "succeeded"]

    # the receiver: each call's traceparent, the run's trace and that call's span
    assert [_traceparent(r.headers) for r in server.received] == [
        (trace_id, calls_by_attempt[1]["span_id"]), (trace_id, calls_by_attempt[2]["span_id"])]


@pytest.mark.slow
def test_tracing_off_sends_no_traceparent_and_loads_no_opentelemetry(
        db_url: str, tmp_path: Path, server: TargetServer) -> None:
    with connect(db_url) as conn:
        bulk_due_jobs(conn, 1)
        conn.execute("UPDATE jobs SET target = %s::jsonb",
                     (json.dumps({"type": "http", "url": server.url(), "timeout_s": 5}),))
    scheduler = Traced(tmp_path, "scheduler", "--db", db_url, on=False)
    worker = Traced(tmp_path, "worker", "--db", db_url, "--heartbeat", "1", on=False,
                    env=LOOPBACK)
    try:
        with connect(db_url) as conn:
            wait_until(lambda: conn.execute("SELECT count(*) FROM runs WHERE status = "
                                            "'succeeded'").fetchone() == (1,),
                       timeout=60, message="the run succeeded")
    finally:
        written = scheduler.stop()
        taken = worker.stop()
    (received,) = server.received
    assert "traceparent" not in received.headers and "tracestate" not in received.headers
    assert written == {"spans": [], "modules": []}
    assert taken == {"spans": [], "modules": []}


def _broker_run(conn: psycopg.Connection[Any], kind: str, target: dict[str, Any]) -> str:
    """One queued run of a job publishing to ``kind`` on the loopback broker."""
    queued_runs(conn, 1)
    connections.add(conn, "broker", brokers.URLS[kind])
    grant(conn, tenant(conn), connections=["broker"])
    conn.execute("UPDATE jobs SET target = %s::jsonb",
                 (json.dumps({**target, "connection": "broker", "timeout_s": 5}),))
    return _only_run(conn)


@pytest.fixture
def nats_subject() -> Iterator[tuple[str, str]]:
    brokers.require("nats")
    prefix = brokers.unique("crondepot-trace.s")
    for stream in brokers.nats_stream(prefix):
        yield stream, f"{prefix}.reminders"


def _published(db_url: str, tmp_path: Path, kind: str, target: dict[str, Any]
               ) -> tuple[str, dict[str, Any]]:
    """Run the one queued run in a traced worker; (run id, its call span)."""
    with connect(db_url) as conn:
        run_id = _broker_run(conn, kind, target)
        if kind == "redis":       # the run id is the same in every test database
            brokers.redis_drop(guard_key(run_id))
        worker = Traced(tmp_path, "worker", "--db", db_url, "--heartbeat", "1")
        try:
            wait_until(lambda: _status(conn, run_id) == ("succeeded", 1), timeout=60,
                       message=f"the {kind} run succeeded")
        finally:
            taken = worker.stop()
    (call,) = _named(taken["spans"], "crondepot.call", run_id)
    assert call["kind"] == "PRODUCER" and call["trace_id"] == trace_id_hex(run_id)
    return run_id, call


@pytest.mark.slow
def test_a_nats_message_carries_the_call_spans_traceparent(
        db_url: str, tmp_path: Path, nats_subject: tuple[str, str]) -> None:
    stream, subject = nats_subject
    run_id, call = _published(db_url, tmp_path, "nats", {"type": "nats", "subject": subject})
    ((_, headers),) = brokers.nats_messages(stream)
    assert headers["Nats-Msg-Id"] == run_id
    assert _traceparent(headers) == (call["trace_id"], call["span_id"])
    assert call["attributes"]["messaging.system"] == "nats"


@pytest.mark.slow
def test_a_redis_entry_carries_the_call_spans_traceparent(db_url: str, tmp_path: Path) -> None:
    brokers.require("redis")
    stream = brokers.unique("crondepot-trace:reminders:")
    try:
        run_id, call = _published(db_url, tmp_path, "redis",
                                  {"type": "redis", "stream": stream})
        (entry,) = brokers.redis_entries(stream)
        fields = {k.decode(): v.decode() for k, v in entry.items()}
        assert fields["run_id"] == run_id and json.loads(fields["body"])["run_id"] == run_id
        assert _traceparent(fields) == (call["trace_id"], call["span_id"])
    finally:
        brokers.redis_drop(stream)


@pytest.fixture
def amqp_exchange() -> Iterator[tuple[str, str]]:
    brokers.require("amqp")
    exchange = brokers.unique("crondepot-trace.")
    for queue in brokers.amqp_queue(exchange, "sms"):
        yield exchange, queue


@pytest.mark.slow
def test_an_amqp_message_carries_the_call_spans_traceparent(
        db_url: str, tmp_path: Path, amqp_exchange: tuple[str, str]) -> None:
    exchange, queue = amqp_exchange
    run_id, call = _published(db_url, tmp_path, "amqp",
                              {"type": "amqp", "exchange": exchange, "routing_key": "sms"})
    ((_, properties),) = brokers.amqp_messages(queue)
    assert properties.message_id == run_id
    assert _traceparent(properties.headers) == (call["trace_id"], call["span_id"])


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("OTEL_TRACES_EXPORTER", "zipkin", "OTEL_TRACES_EXPORTER: expected otlp, console or none"),
    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc",
     "OTEL_EXPORTER_OTLP_PROTOCOL: crondepot sends traces as http/protobuf, got 'grpc'"),
])
@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_a_tracing_setting_crondepot_cannot_honour_stops_the_process_at_start(
        db_url: str, command: str, variable: str, value: str, says: str) -> None:
    env = {variable: value}
    if variable != "OTEL_TRACES_EXPORTER":
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
    proc = Proc(command, "--db", db_url, env=env)
    assert proc.popen.wait(timeout=60) == 2
    assert f"crondepot: error: {says}" in proc.output()
    with connect(db_url) as conn:      # it never started: no worker announced itself
        assert conn.execute("SELECT count(*) FROM workers").fetchone() == (0,)
