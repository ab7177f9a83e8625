"""Workers calling a real HTTP target on loopback: keys, signatures, retries, the guard."""

from __future__ import annotations

import email.utils
import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.worker.targets import verify
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import queued_runs
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


def _one(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def _db_clock_offset(conn: psycopg.Connection[Any]) -> tuple[float, float]:
    """The database clock minus this process's ``time.time()``, and how far off that may be
    (half the round trip), so arrival times the server took can be compared with
    timestamps the database wrote."""
    before = time.time()
    db_now = _one(conn, "SELECT extract(epoch FROM clock_timestamp())::float8")
    after = time.time()
    return float(db_now) - (before + after) / 2, (after - before) / 2


def _where_runs_are(conn: psycopg.Connection[Any], server: TargetServer, worker: Proc) -> str:
    """What a timed-out wait saw: runs by status and attempt, a few errors, the calls the
    target received and the end of the worker's log."""
    rows = conn.execute(
        "SELECT status, attempt, count(*), min(available_at - now()), max(last_error)"
        " FROM runs GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    log = worker.output().splitlines()[-30:]
    return "\n".join([f"runs (status, attempt, count, min wait, an error): {rows}",
                      f"calls received: {len(server.received)}",
                      f"worker alive: {worker.popen.poll() is None}", "worker log tail:", *log])


# Every claim of a run, with the worker that made it: lease_owner is cleared when the
# outcome is written, so it is kept here, from the claim's own UPDATE (a statement trigger
# with transition tables: one insert per claim batch, not per row).
CLAIMS_LOG = """
CREATE TABLE test_claims (run_id text NOT NULL, attempt integer NOT NULL, owner text);
CREATE FUNCTION test_log_claims() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO test_claims (run_id, attempt, owner)
    SELECT n.run_id, n.attempt, n.lease_owner
    FROM new_rows n JOIN old_rows o USING (run_id)
    WHERE n.status = 'running' AND o.status = 'queued';
    RETURN NULL;
END $$;
CREATE TRIGGER test_log_claims AFTER UPDATE ON runs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION test_log_claims();
"""


@pytest.mark.slow
def test_10000_webhook_runs_over_two_processes_each_posted_exactly_once(
        db_url: str, server: TargetServer) -> None:
    # 10,000 runs over 2 worker processes x 10 slots, a real HTTP target on
    # loopback; every run's target called exactly once, with its run id as the key.
    with connect(db_url) as conn:
        _http_runs(conn, 10_000, server.url())
        conn.execute(CLAIMS_LOG)
        secret = _one(conn, "SELECT signing_secret FROM tenants")
        run_ids = {r[0] for r in conn.execute("SELECT run_id FROM runs")}
        workers = [_worker(db_url, "127.0.0.1/32", "--concurrency", "10", "--urgent-only", "0",
                           "--name", f"w{i}") for i in range(2)]
        try:
            wait_until(lambda: _count(conn, "succeeded") == 10_000, timeout=120, interval=0.2,
                       message="10,000 runs succeeded")
        finally:
            codes = [w.stop() for w in workers]
        assert codes == [0, 0]
        assert _one(conn, "SELECT count(*) FROM runs WHERE attempt <> 1") == 0
        claims = dict(conn.execute("SELECT owner, count(*) FROM test_claims GROUP BY owner")
                      .fetchall())
        assert _one(conn, "SELECT count(DISTINCT run_id) FROM test_claims") == 10_000
        assert _one(conn, "SELECT count(*) FROM test_claims") == 10_000   # one claim each
    received = list(server.received)
    assert len(received) == 10_000
    keys = Counter(r.headers["idempotency-key"] for r in received)
    assert len(keys) == 10_000 and set(keys) == run_ids
    # Both processes worked: each claimed (and so called) a real share of the runs.
    assert set(claims) == {"w0", "w1"} and sum(claims.values()) == 10_000
    assert min(claims.values()) >= 1_000, claims
    # Every signature, not a sample: HMAC-SHA256 over 10,000 small bodies takes well under
    # a second.
    for request in received:
        verify(secret, request.headers, request.body)
        body = json.loads(request.body)
        assert body["run_id"] == request.headers["idempotency-key"] and body["attempt"] == 1


@pytest.mark.slow
def test_each_run_is_posted_once_signed_with_its_run_id_as_key(
        db_url: str, server: TargetServer) -> None:
    with connect(db_url) as conn:
        _http_runs(conn, 200, server.url())
        secret = conn.execute("SELECT signing_secret FROM tenants").fetchone()[0]  # type: ignore[index]
        run_ids = {r[0] for r in conn.execute("SELECT run_id FROM runs")}
        worker = _worker(db_url)
        try:
            try:
                wait_until(lambda: _count(conn, "succeeded") == 200, timeout=60, message="200")
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n{_where_runs_are(conn, server, worker)}") from None
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
    # The tenant learns the host was refused, not which address it resolved to.
    assert server.received == [] and "may not call" in error
    assert "127.0.0.1" not in error and "loopback" not in error


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
        victim.popen.wait()
        server.routes["/hook"] = Route()
        # The victim's last heartbeat set the lease that has to run out; nothing extends it
        # now (the short pause lets a heartbeat statement already sent finish). The rescuer
        # starts well before the lease ends, so a run taken back early would show.
        time.sleep(0.3)
        expires = _one(conn, "SELECT extract(epoch FROM lease_expires_at)::float8 FROM runs "
                             "WHERE status = 'running'")
        rescuer = _worker(db_url)
        try:
            wait_until(lambda: _count(conn, "succeeded") == 1, timeout=60, message="rescue")
        finally:
            rescuer.stop()
        offset, error = _db_clock_offset(conn)
    first, second = server.received[:2]
    assert len(server.received) == 2
    assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
    assert json.loads(first.body)["attempt"] == 1 and json.loads(second.body)["attempt"] == 2
    # On the database's clock, the second call came after the lease had expired.
    late = second.at + offset - expires
    assert late + error >= 0, late


@pytest.mark.slow
def test_retry_after_sets_when_the_run_comes_back(db_url: str, server: TargetServer) -> None:
    # Seconds, an HTTP-date, and a value above the cap (retry.RETRY_AFTER_CAP_SECONDS,
    # one hour). The first attempt's own backoff is at most 30 s, so each hint decides.
    date = int(time.time()) + 300
    server.routes["/seconds"] = Route(status=503, headers={"Retry-After": "120"})
    server.routes["/date"] = Route(
        status=503, headers={"Retry-After": email.utils.formatdate(date, usegmt=True)})
    server.routes["/capped"] = Route(status=503, headers={"Retry-After": "86400"})
    paths = ["/seconds", "/date", "/capped"]
    with connect(db_url) as conn:
        _http_runs(conn, 3, server.url())
        jobs = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
        for job, path in zip(jobs, paths, strict=True):
            conn.execute("UPDATE jobs SET target = jsonb_set(target, '{url}', to_jsonb(%s::text))"
                         " WHERE id = %s", (server.url(path), job))
        worker = _worker(db_url)
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = 'queued' "
                                          "AND attempt = 1") == 3,
                       timeout=30, message="three retries recorded")
            rows = conn.execute(
                """SELECT j.target->>'url', r.attempt, r.error_class, r.last_error,
                          extract(epoch FROM r.available_at - now())::float8,
                          extract(epoch FROM r.available_at - r.updated_at)::float8,
                          extract(epoch FROM r.available_at)::float8
                   FROM runs r JOIN jobs j ON j.id = r.job_id""").fetchall()
            waits = {url.rsplit("/", 1)[1]: row for url, *row in rows}
            for attempt, error_class, last_error, *_ in waits.values():
                assert (attempt, error_class) == (1, "TemporaryError")
                assert "HTTP 503" in last_error
            # available_at - updated_at is the delay the worker wrote (one statement, one
            # now()); available_at - now() is what is still left when the test looks.
            _, _, _, left, delay, _ = waits["seconds"]
            assert delay == pytest.approx(120, abs=0.001) and 118 <= left <= 120
            _, _, _, left, delay, at = waits["date"]
            assert 290 <= delay <= 300 and 288 <= left <= 300
            assert at == pytest.approx(date, abs=2)   # the date, on the database's clock
            _, _, _, left, delay, _ = waits["capped"]
            assert delay == pytest.approx(3600, abs=0.001) and 3598 <= left <= 3600
            assert len(server.received) == 3          # nobody called before the wait ended
            for path in paths:
                server.routes[path] = Route(status=200)
            conn.execute("UPDATE runs SET available_at = now() WHERE status = 'queued'")
            wait_until(lambda: _count(conn, "succeeded") == 3, timeout=30, message="success")
            attempts = [r[0] for r in conn.execute("SELECT attempt FROM runs")]
        finally:
            worker.stop()
    assert attempts == [2, 2, 2]
    assert sorted(server.paths()) == sorted(paths * 2)
    for path in paths:
        keys = {r.headers["idempotency-key"] for r in server.received if r.path == path}
        assert len(keys) == 1
