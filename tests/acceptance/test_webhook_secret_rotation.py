"""A tenant's signing secret rotated under a real worker, checked by a real receiver written
with the Standard Webhooks reference library (``standardwebhooks``): it answers 401 to a call
it cannot verify, which fails the run. During the overlap every webhook carries both
signatures, so the receiver switches secrets without losing a call; after it, only the new
one signs; ``--overlap 0`` retires the old one at once."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from crondepot.db import connect
from crondepot.tenancy.tenants import create_tenant
from crondepot.tenancy.webhook_secret import rotate_secret
from crondepot_testkit.processes import Proc, wait_until
from tests.support.target_server import Received, Route, TargetServer


class Receiver:
    """The tenant's endpoint: verifies each call with the one secret it knows now."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.refused = 0

    def answer(self, request: Received) -> Route:
        try:
            Webhook(self.secret).verify(request.body, request.headers)
        except WebhookVerificationError:
            self.refused += 1
            return Route(status=401, body=b"bad signature")
        return Route(status=200)


@pytest.fixture
def server() -> Iterator[TargetServer]:
    target = TargetServer()
    yield target
    target.close()


@pytest.fixture
def worker(db_url: str) -> Iterator[Proc]:
    process = Proc("worker", "--db", db_url, "--heartbeat", "1",
                   env={"CRONDEPOT_TARGET_ALLOWLIST": "127.0.0.1/32"})
    yield process
    assert process.stop() == 0


def _add_runs(conn: psycopg.Connection[Any], tenant_id: int, count: int, url: str,
              tag: str) -> None:
    """``count`` webhook runs due now (jobs inactive: no scheduler is needed). The target
    drops repeated keys, so a connection lost mid-call (a keep-alive race with this test
    server, nothing to do with signatures) is retried rather than dead; a refused signature
    is a 401, a permanent failure, whatever the target says about repeats."""
    conn.execute(
        """
        WITH j AS (
            INSERT INTO jobs (tenant_id, key, cron, tz, target, active)
            SELECT %(tenant)s, %(tag)s || g, '0 9 * * *', 'UTC',
                   jsonb_build_object('type', 'http', 'url', %(url)s::text, 'timeout_s', 5,
                                      'dedupes', true),
                   false
            FROM generate_series(1, %(count)s) AS g
            RETURNING id, tenant_id, priority
        )
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
        SELECT j.id || ':1791171000', j.id, j.tenant_id, j.priority, now(), now(), now()
        FROM j
        """, {"tenant": tenant_id, "tag": tag, "count": count, "url": url})


def _finished(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return dict(conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())


def _wait_done(conn: psycopg.Connection[Any], total: int) -> dict[str, Any]:
    wait_until(lambda: sum(v for k, v in _finished(conn).items()
                           if k not in ("queued", "running")) == total,
               timeout=60, interval=0.1, message=f"{total} runs finished")
    done: dict[str, Any] = _finished(conn)
    errors = [row[0] for row in conn.execute(
        "SELECT last_error FROM runs WHERE status <> 'succeeded'")]
    return {**done, "errors": errors} if errors else done


def _tagged(server: TargetServer, tag: str) -> list[Received]:
    """The calls of the runs added with ``tag``: each run called (a retry after a lost
    connection may call one twice)."""
    calls = [r for r in server.received if json.loads(r.body)["job_key"].startswith(tag)]
    assert len({r.headers["webhook-id"] for r in calls}) == 20
    return calls


def _signatures(request: Received) -> list[str]:
    return request.headers["webhook-signature"].split(" ")


def _verifies(secret: str, request: Received) -> bool:
    try:
        Webhook(secret).verify(request.body, request.headers)
    except WebhookVerificationError:
        return False
    return True


def test_a_receiver_switching_secrets_during_the_overlap_loses_no_call(
        db_url: str, server: TargetServer, worker: Proc) -> None:
    with connect(db_url) as conn:
        bank = create_tenant(conn, "bank42")
        receiver = Receiver(bank.signing_secret)
        server.answer = receiver.answer
        stop = threading.Event()
        batches: list[int] = []

        def feed() -> None:         # 5 runs every 50 ms, all through the rotation
            with connect(db_url) as feeder:
                while not stop.is_set():
                    _add_runs(feeder, bank.id, 5, server.url(), f"b{len(batches)}-")
                    batches.append(5)
                    time.sleep(0.05)

        feeder = threading.Thread(target=feed)
        feeder.start()
        try:
            wait_until(lambda: _finished(conn).get("succeeded", 0) >= 20, timeout=30,
                       message="the worker calling with the first secret")
            rotating = time.time()
            rotated = rotate_secret(conn, bank.id, timedelta(hours=1))
            committed = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
            time.sleep(2.0)
            receiver.secret = rotated.signing_secret      # the receiver switches
            switched_at = time.time()
            time.sleep(1.0)
        finally:
            stop.set()
            feeder.join()
        done = _wait_done(conn, sum(batches))
        # Runs claimed after the rotation had committed (both on the database clock).
        claimed_after = {row[0] for row in conn.execute(
            "SELECT run_id FROM runs WHERE first_claimed_at > %s", (committed,))}
    assert done == {"succeeded": sum(batches)}
    assert receiver.refused == 0
    received = list(server.received)
    before = [r for r in received if r.at < rotating]
    during = [r for r in received if r.headers["webhook-id"] in claimed_after]
    assert before and during and any(r.at > switched_at for r in during)
    assert all(len(_signatures(r)) == 1 for r in before)
    # After the rotation: the new signature first, then the old one; each verifies alone.
    for request in during:
        new, old = _signatures(request)
        assert _verifies(rotated.signing_secret, request)
        assert _verifies(bank.signing_secret, request)
        assert _verifies(rotated.signing_secret, Received(
            request.method, request.path, {**request.headers, "webhook-signature": new},
            request.body, request.client_port))
        assert _verifies(bank.signing_secret, Received(
            request.method, request.path, {**request.headers, "webhook-signature": old},
            request.body, request.client_port))


def _rotate_with_the_cli(db_url: str, overlap: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-m", "crondepot", "tenants", "secret", "rotate",
                             "bank42", "--overlap", overlap, "--db", db_url, "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rotated: dict[str, Any] = json.loads(result.stdout)
    return rotated


def test_after_the_overlap_only_the_new_secret_signs_and_overlap_0_ends_it_at_once(
        db_url: str, server: TargetServer, worker: Proc) -> None:
    with connect(db_url) as conn:
        bank = create_tenant(conn, "bank42")
        receiver = Receiver(bank.signing_secret)
        server.answer = receiver.answer
        _add_runs(conn, bank.id, 5, server.url(), "warm-")     # the worker is up
        assert _wait_done(conn, 5) == {"succeeded": 5}
        # 20 s: room for 20 calls on a loaded CI machine (with 8 s, one call once came after
        # the overlap, signed by the new secret alone, and the receiver refused it)
        first = _rotate_with_the_cli(db_url, "20s")
        # During the overlap a receiver still on the old secret accepts every call.
        _add_runs(conn, bank.id, 20, server.url(), "during-")
        assert _wait_done(conn, 25) == {"succeeded": 25}
        assert conn.execute("SELECT max(r.finished_at) < min(t.previous_secret_until) "
                            "FROM runs r, tenants t").fetchone() == (True,), \
            "the calls took longer than the overlap: the test proves nothing"
        during = _tagged(server, "during-")
        assert all(len(_signatures(r)) == 2 for r in during)
        # After it, only the new secret signs: the receiver must have switched.
        ends = conn.execute("SELECT extract(epoch FROM previous_secret_until - now()) "
                            "FROM tenants").fetchone()
        assert ends is not None
        time.sleep(max(0.0, float(ends[0])) + 0.2)
        receiver.secret = first["signing_secret"]
        _add_runs(conn, bank.id, 20, server.url(), "after-")
        assert _wait_done(conn, 45) == {"succeeded": 45}
        after = _tagged(server, "after-")
        assert all(len(_signatures(r)) == 1 for r in after)
        assert not any(_verifies(bank.signing_secret, r) for r in after)
        # --overlap 0: the next call carries the newest signature alone.
        second = _rotate_with_the_cli(db_url, "0")
        receiver.secret = second["signing_secret"]
        _add_runs(conn, bank.id, 20, server.url(), "now-")
        assert _wait_done(conn, 65) == {"succeeded": 65}
        last = _tagged(server, "now-")
        assert all(len(_signatures(r)) == 1 for r in last)
        assert not any(_verifies(first["signing_secret"], r) for r in last)
    assert receiver.refused == 0
