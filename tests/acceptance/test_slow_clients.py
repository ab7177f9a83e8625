"""Slow clients and overload, over real sockets against a real ``crondepot api`` process.

Fifty clients trickle request bodies (to ``POST /console/login``, and to ``POST /v1/jobs``
with a valid token) and fifty trickle request heads, reconnecting whenever they are cut off,
while an authenticated ``GET /v1/jobs`` keeps answering in well under a second. Each slow
client is cut at its deadline (the head's: closed; the body's: 408), and a connection left
idle is closed too. A starved pool (two connections, both held behind a table lock) answers
503 with ``Retry-After`` within ``--pool-wait``, ``/readyz`` says 503, and both recover when
the lock goes; past the connection cap a request gets 503. docs/operations.md, "Slow
clients and overload", quotes the figures.
"""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from crondepot.db import connect
from crondepot.tenancy.tenants import create_tenant
from crondepot_testkit.processes import wait_until
from crondepot_testkit.slow_clients import Trickle, slow_requests
from tests.support.api import start_api

HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 4.0
KEEP_ALIVE_TIMEOUT = 1.0
SLACK = 1.5                 # a deadline met on a loaded two-core machine




@pytest.fixture
def api(db_url: str) -> Iterator[tuple[str, str]]:
    with connect(db_url) as conn:
        token = create_tenant(conn, "bank42").token
    process, base = start_api(db_url, "--header-timeout", f"{HEADER_TIMEOUT:g}s",
                         "--body-timeout", f"{BODY_TIMEOUT:g}s",
                         "--keep-alive-timeout", f"{KEEP_ALIVE_TIMEOUT:g}s",
                         "--max-connections", "400", "--pool-wait", "2s",
                         env={"CRONDEPOT_API_RATE": "1000", "CRONDEPOT_API_BURST": "1000"})
    try:
        yield base, token
    finally:
        process.stop()


@pytest.mark.slow
def test_slow_clients_neither_stall_other_requests_nor_outlive_their_deadlines(
        api: tuple[str, str]) -> None:
    base, token = api
    port = int(base.rsplit(":", 1)[1])
    with Trickle(port, slow_requests(token), per_kind=25) as trickle, \
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                         timeout=30) as client:
        # 25 + 25 body tricklers (50) and 25 head tricklers at first; more below
        wait_until(lambda: trickle.open_now() >= 75, timeout=10, message="the slow clients")
        with Trickle(port, {"head": slow_requests(token)["head"]}, per_kind=25) as more_heads:
            timings = _time_reads(client, trickle, more_heads, count=40)
        wait_until(lambda: all(c.closed for c in trickle.clients if c.kind != "head"
                               and time.monotonic() - c.opened > BODY_TIMEOUT + SLACK),
                   timeout=BODY_TIMEOUT + 2 * SLACK, message="the late bodies to be answered")
        clients = [*trickle.clients, *more_heads.clients]

    median, worst = statistics.median(timings), max(timings)
    print(f"\nGET /v1/jobs under 50 body + 50 head tricklers: {len(timings)} requests, "
          f"median {median * 1000:.0f} ms, worst {worst * 1000:.0f} ms")
    assert worst < 1.0, f"median {median:.3f} s, worst {worst:.3f} s: {timings}"

    heads = [c for c in clients if c.kind == "head" and c.closed]
    bodies = [c for c in clients if c.kind != "head" and c.closed]
    assert len(heads) >= 50 and len(bodies) >= 50, (len(heads), len(bodies))
    for c in heads:          # closed at the head's deadline, not before, and with no answer
        assert HEADER_TIMEOUT - 0.2 <= c.lifetime <= HEADER_TIMEOUT + SLACK, c
        assert c.answer == b"", c.answer
    for c in bodies:         # answered 408 at the body's deadline, and closed
        assert c.answer.startswith(b"HTTP/1.1 408 "), c.answer[:200]
        assert b"request-timeout" in c.answer, c.answer
        assert BODY_TIMEOUT - 0.2 <= c.lifetime <= BODY_TIMEOUT + SLACK, c
    assert _refused(base, "head_timeout") >= len(heads)
    assert _refused(base, "body_timeout") >= len(bodies)


def _time_reads(client: httpx.Client, *trickles: Trickle, count: int) -> list[float]:
    timings = []
    for _ in range(count):
        # the load is on throughout (a client cut off is reopened within a tick)
        assert sum(t.open_now() for t in trickles) >= 50
        started = time.monotonic()
        response = client.get("/v1/jobs")
        timings.append(time.monotonic() - started)
        assert response.status_code == 200, response.text
        time.sleep(0.1)     # pacing, so the reads span several of the slow clients' deadlines
    return timings


@pytest.mark.slow
def test_idle_connections_are_closed_at_their_timeouts(api: tuple[str, str]) -> None:
    port = int(api[0].rsplit(":", 1)[1])
    silent = socket.create_connection(("127.0.0.1", port))
    kept = socket.create_connection(("127.0.0.1", port))
    kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n")
    answer = _until_closed(kept, within=KEEP_ALIVE_TIMEOUT + SLACK + 1)
    assert answer.startswith(b"HTTP/1.1 200 "), answer
    # the silent connection opened first: it is closed by the head's deadline
    assert _until_closed(silent, within=HEADER_TIMEOUT + SLACK) == b""


def _until_closed(sock: socket.socket, *, within: float) -> bytes:
    """What the server sent before closing ``sock``; fails if it is still open after
    ``within`` seconds."""
    sock.settimeout(within)
    received = b""
    started = time.monotonic()
    try:
        while chunk := sock.recv(65536):
            received += chunk
            sock.settimeout(max(0.01, within - (time.monotonic() - started)))
    except TimeoutError:
        raise AssertionError(f"still open after {within:g} s; got {received!r}") from None
    finally:
        sock.close()
    return received


@pytest.mark.slow
def test_a_starved_pool_or_a_full_house_answers_503_at_once_and_recovers(db_url: str) -> None:
    with connect(db_url) as conn:
        token = create_tenant(conn, "bank42").token
    process, base = start_api(db_url, "--pool-wait", "500ms", "--max-connections", "6",
                         env={"CRONDEPOT_API_POOL_SIZE": "2"})
    auth = {"Authorization": f"Bearer {token}"}
    try:
        with connect(db_url) as locker, ThreadPoolExecutor(2) as held:
            # Two requests each hold a pooled connection, blocked on the token lookup.
            locker.execute("BEGIN")
            locker.execute("LOCK TABLE api_tokens IN ACCESS EXCLUSIVE MODE")
            waiting = [held.submit(httpx.get, f"{base}/v1/jobs", headers=auth, timeout=60)
                       for _ in range(2)]
            wait_until(lambda: _blocked_api_backends(db_url) == 2, timeout=10,
                       message="two API requests blocked on the lock")
            started = time.monotonic()
            starved = httpx.get(f"{base}/v1/jobs", headers=auth, timeout=10)
            took = time.monotonic() - started
            assert starved.status_code == 503, starved.text
            assert starved.headers["content-type"] == "application/problem+json"
            assert starved.json()["type"].endswith("/pool-starved")
            assert int(starved.headers["Retry-After"]) >= 1
            assert 0.5 <= took < 0.5 + SLACK, took
            assert httpx.get(f"{base}/readyz", timeout=10).status_code == 503
            assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
            # the request, /readyz, and this scrape itself, which then leaves out the
            # database gauges rather than wait
            assert _refused(base, "pool_starved") == 3
            locker.execute("ROLLBACK")
            assert [f.result().status_code for f in waiting] == [200, 200]
        assert httpx.get(f"{base}/readyz", timeout=10).status_code == 200
        assert httpx.get(f"{base}/v1/jobs", headers=auth, timeout=10).status_code == 200
        _connection_cap(base)
    finally:
        process.stop()


def _connection_cap(base: str) -> None:
    """With --max-connections 6 and six connections open, a seventh's request gets 503 (and
    no database work); once they close, requests are served again."""
    port = int(base.rsplit(":", 1)[1])
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(6)]

    def status() -> int:
        return httpx.get(f"{base}/healthz", timeout=10).status_code

    try:
        wait_until(lambda: status() == 503, timeout=10, message="503 past the connection cap")
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: status() == 200, timeout=10, message="a connection let in again")


def _refused(base: str, reason: str) -> float:
    """crondepot_api_refused_total{reason} as the API's /metrics says (0 if absent)."""
    text = httpx.get(f"{base}/metrics", timeout=10).text
    line = f'crondepot_api_refused_total{{reason="{reason}"}} '
    return sum(float(row[len(line):]) for row in text.splitlines() if row.startswith(line))


def _blocked_api_backends(db_url: str) -> int:
    with connect(db_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'crondepot-api' AND wait_event_type = 'Lock'").fetchone()
    return int(row[0]) if row else 0
