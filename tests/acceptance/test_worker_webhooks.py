"""Workers calling a real HTTP target on loopback: keys, signatures, retries, the guard."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.worker.targets import verify
from tests.support.jobs import queued_runs
from tests.support.processes import Proc, wait_until
from tests.support.target_server import Route, TargetServer


@pytest.fixture
def server() -> Iterator[TargetServer]:
    target = TargetServer()
    yield target
    target.close()


def _http_runs(conn: psycopg.Connection[Any], count: int, url: str, **target: Any) -> None:
    queued_runs(conn, count)
    conn.execute("UPDATE jobs SET target = %s::jsonb",
                 (json.dumps({"type": "http", "url": url, "timeout_s": 5, **target}),))


def _worker(url: str, allow: str = "127.0.0.1/32", *extra: str) -> Proc:
    return Proc("worker", "--db", url, "--heartbeat", "1", *extra,
                env={"CRONDEPOT_TARGET_ALLOWLIST": allow})


def _count(conn: psycopg.Connection[Any], status: str) -> int:
    row = conn.execute("SELECT count(*) FROM runs WHERE status = %s", (status,)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.slow
def test_each_run_is_posted_once_signed_with_its_run_id_as_key(
        db_url: str, server: TargetServer) -> None:
    with connect(db_url) as conn:
        _http_runs(conn, 200, server.url())
        secret = conn.execute("SELECT signing_secret FROM tenants").fetchone()[0]  # type: ignore[index]
        run_ids = {r[0] for r in conn.execute("SELECT run_id FROM runs")}
        worker = _worker(db_url)
        try:
            wait_until(lambda: _count(conn, "succeeded") == 200, timeout=60, message="200")
        finally:
            worker.stop()
    keys = Counter(r.headers["idempotency-key"] for r in server.received)
    assert set(keys) == run_ids and set(keys.values()) == {1}
    for request in server.received:
        verify(secret, request.headers, request.body)
        assert json.loads(request.body)["run_id"] == request.headers["idempotency-key"]


@pytest.mark.slow
def test_503_is_retried_with_the_same_key_and_400_is_not(db_url: str,
                                                         server: TargetServer) -> None:
    server.routes["/busy"] = Route(status=503, headers={"Retry-After": "1"})
    server.routes["/bad"] = Route(status=400, body=b"invalid number")
    with connect(db_url) as conn:
        _http_runs(conn, 1, server.url("/busy"))
        worker = _worker(db_url)

        def skipping_backoff(condition: Any) -> Any:
            # This test counts calls and keys, not delays: make a waiting retry due now,
            # whenever the worker has recorded it.
            def check() -> bool:
                conn.execute("UPDATE runs SET available_at = now() WHERE status = 'queued'")
                return bool(condition())
            return check

        try:
            wait_until(lambda: len(server.paths()) >= 1, timeout=30, message="first call")
            wait_until(skipping_backoff(lambda: len(server.paths()) >= 2), timeout=30,
                       interval=0.2, message="the retry")
            server.routes["/busy"] = Route(status=200)
            wait_until(skipping_backoff(lambda: _count(conn, "succeeded") == 1), timeout=30,
                       interval=0.2, message="success")
            conn.execute("DELETE FROM runs; DELETE FROM jobs")
            _http_runs(conn, 1, server.url("/bad"))
            wait_until(lambda: _count(conn, "failed") == 1, timeout=30, message="failed")
            error = conn.execute("SELECT last_error FROM runs").fetchone()[0]  # type: ignore[index]
        finally:
            worker.stop()
    busy_keys = {r.headers["idempotency-key"] for r in server.received if r.path == "/busy"}
    assert len(busy_keys) == 1 and server.paths().count("/busy") >= 3
    assert server.paths().count("/bad") == 1 and "invalid number" in error


@pytest.mark.slow
def test_timeout_against_a_target_that_does_not_dedupe_is_dead_not_retried(
        db_url: str, server: TargetServer) -> None:
    server.routes["/slow"] = Route(delay_s=3)
    with connect(db_url) as conn:
        _http_runs(conn, 1, server.url("/slow"), timeout_s=0.5, dedupes=False)
        worker = _worker(db_url)
        try:
            wait_until(lambda: _count(conn, "dead") == 1, timeout=30, message="dead")
        finally:
            worker.stop()
        error = conn.execute("SELECT last_error FROM runs").fetchone()[0]  # type: ignore[index]
    assert "outcome unknown" in error and server.paths().count("/slow") == 1


@pytest.mark.slow
def test_loopback_target_is_refused_unless_allow_listed(db_url: str,
                                                        server: TargetServer) -> None:
    with connect(db_url) as conn:
        _http_runs(conn, 1, server.url(host="localhost"))
        worker = _worker(db_url, "")
        try:
            wait_until(lambda: _count(conn, "failed") == 1, timeout=30, message="refused")
        finally:
            worker.stop()
        error = conn.execute("SELECT last_error FROM runs").fetchone()[0]  # type: ignore[index]
    assert server.received == [] and "loopback" in error


@pytest.mark.slow
def test_kill_9_mid_call_the_second_call_carries_the_same_key(db_url: str,
                                                             server: TargetServer) -> None:
    server.routes["/hook"] = Route(delay_s=20)
    with connect(db_url) as conn:
        _http_runs(conn, 1, server.url(), dedupes=True)
        conn.execute("UPDATE jobs SET lease_seconds = 5")
        victim = _worker(db_url)
        wait_until(lambda: len(server.received) == 1, timeout=30, message="first call")
        victim.kill(signal.SIGKILL)
        server.routes["/hook"] = Route()
        rescuer = _worker(db_url)
        try:
            wait_until(lambda: _count(conn, "succeeded") == 1, timeout=60, message="rescue")
        finally:
            rescuer.stop()
    first, second = server.received[:2]
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert json.loads(second.body)["attempt"] == 2
