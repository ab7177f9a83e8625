"""Failure notices with real processes: a worker whose run is dead-lettered, and the
maintenance leader (the same worker process) sending the notice to a loopback webhook
receiver and through a real SMTP server; a leader killed with SIGKILL before it composed
the events leaves them to the next leader, none lost."""

from __future__ import annotations

import json
import signal
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.notices.channels import add_channel
from crondepot.worker.targets import verify
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import queued_runs, tenant
from tests.support.notices import smtp_server
from tests.support.target_server import Route, TargetServer

ALLOW = {"CRONDEPOT_TARGET_ALLOWLIST": "127.0.0.1/32"}


def _worker(url: str, *extra: str, env: dict[str, str] | None = None) -> Proc:
    return Proc("worker", "--db", url, "--import", "tests.support.handlers", "--heartbeat",
                "1", "--reap-every", "1s", *extra,
                env={**ALLOW, **(env or {})})


def _statuses(conn: psycopg.Connection[Any]) -> list[str]:
    return [row[0] for row in conn.execute("SELECT status FROM notice_messages ORDER BY id")]


@pytest.fixture(autouse=True)
def _loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRONDEPOT_TARGET_ALLOWLIST", ALLOW["CRONDEPOT_TARGET_ALLOWLIST"])


def test_a_worker_dead_letters_a_run_and_its_leader_tells_both_channels(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    t = tenant(conn, "bank42")
    gateway, receiver = TargetServer(), TargetServer()
    gateway.routes["/sms"] = Route(status=503, body=b"gateway down")
    try:
        add_channel(conn, t, "webhook", receiver.url("/notices"))
        add_channel(conn, t, "email", "oncall@bank42.example")
        queued_runs(conn, 1, max_attempts=1)
        conn.execute("UPDATE jobs SET target = %s::jsonb", (json.dumps(
            {"type": "http", "url": gateway.url("/sms"), "timeout_s": 5}),))
        with smtp_server() as (inbox, relay):
            worker = _worker(db_url, "--notice-every", "1s", "--smtp-url",
                             f"smtp://127.0.0.1:{relay.port}?from=notices@crondepot.test")
            try:
                wait_until(lambda: _statuses(conn) == ["sent", "sent"], timeout=60)
            finally:
                worker.stop()
        (call,) = receiver.received
        secret = conn.execute("SELECT signing_secret FROM tenants WHERE id = %s",
                              (t,)).fetchone()
        assert secret is not None
        verify(secret[0], call.headers, call.body)
        body = json.loads(call.body)
        assert body["events"][0]["kind"] == "run_dead"
        assert "HTTP 503" in body["events"][0]["detail"]
        ((to, mail),) = inbox.messages
        assert to == ["oncall@bank42.example"] and "dead-lettered" in mail["Subject"]
    finally:
        gateway.close()
        receiver.close()


def test_events_outlive_a_killed_leader(db_url: str, conn: psycopg.Connection[Any]) -> None:
    t = tenant(conn, "bank42")
    receiver = TargetServer()
    try:
        add_channel(conn, t, "webhook", receiver.url("/notices"))
        queued_runs(conn, 3, max_attempts=1, handler="test.fail")
        # Notices off: the worker dead-letters the runs (events committed with them), then
        # dies by SIGKILL before any leader composed them.
        first = _worker(db_url, "--notice-every", "0")
        try:
            wait_until(lambda: _count(conn, "SELECT count(*) FROM notice_events") == 3,
                       timeout=60)
        finally:
            first.popen.send_signal(signal.SIGKILL)
            first.popen.wait(10)
        assert _statuses(conn) == []
        second = _worker(db_url, "--notice-every", "1s")
        try:
            wait_until(lambda: _statuses(conn) == ["sent"] * 3, timeout=60)
        finally:
            second.stop()
        told = sorted(json.loads(r.body)["events"][0]["run_id"] for r in receiver.received)
        with connect(db_url) as check:
            dead = sorted(row[0] for row in check.execute(
                "SELECT run_id FROM runs WHERE status = 'dead'"))
        assert told == dead and len(dead) == 3
    finally:
        receiver.close()


def _count(conn: psycopg.Connection[Any], sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0
