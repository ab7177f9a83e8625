"""The shared token bucket's reserve (crondepot.limits.buckets, queries/ratelimit.sql)."""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from crondepot.db import Q
from crondepot.limits.buckets import (
    HOLD_SECONDS,
    SLACK_SECONDS,
    RateLimiter,
    put_own_limit,
    set_limit,
)
from crondepot.runtime import metrics
from crondepot_testkit.processes import wait_until
from tests.support.jobs import tenant


def test_a_full_bucket_keeps_back_what_a_worker_may_hold(
        conn: psycopg.Connection[Any]) -> None:
    """A worker may spend a token up to HOLD_SECONDS + SLACK_SECONDS after taking it, so a
    full bucket gives at most burst - rate * (HOLD_SECONDS + SLACK_SECONDS) at once, never
    its whole burst. Deterministic whatever the clock: the bucket starts full, so the
    ceiling, not the refill, decides what a take of more than the burst gets.

    Kills the mutant that removes the hold reserve from take_tokens (the ceiling
    ``burst - rate_per_second * hold`` → ``burst``): a take would then get all 50."""
    rate, burst = 50.0, 50
    hold = HOLD_SECONDS + SLACK_SECONDS          # what RateLimiter passes as %(hold)s
    set_limit(conn, "sms-gateway", rate, burst)
    row = conn.execute(Q.take_tokens, {"name": "sms-gateway", "want": 1000,
                                       "hold": hold}).fetchone()
    assert row is not None
    granted, remaining, *_ = row
    ceiling = burst - rate * hold                # 46.5
    assert granted == math.floor(ceiling) < burst
    assert granted + remaining == pytest.approx(ceiling)


def test_a_taker_whose_clock_reads_earlier_neither_moves_the_refill_back_nor_gains(
        conn: psycopg.Connection[Any]) -> None:
    """Two takers race for a bucket's row: the one that waited for the lock read its clock
    before the other committed, so it finds ``refilled_at`` later than its own reading.
    That state is made here directly (the refill stamped 30 s ahead, the bucket empty),
    since the race itself is too narrow to hit on purpose.

    Kills the mutant that lets the refill clock move backwards (``greatest(refilled_at,
    clock_timestamp())`` → ``clock_timestamp()``): the take would move ``refilled_at``
    back to now, and the next take would be granted the interval a second time."""
    set_limit(conn, "sms-gateway", 1000.0, 1000)
    ahead = conn.execute(
        "UPDATE rate_limits SET tokens = 0, refilled_at = clock_timestamp() + interval '30 s'"
        " WHERE name = 'sms-gateway' RETURNING refilled_at").fetchone()
    assert ahead is not None
    take = {"name": "sms-gateway", "want": 100, "hold": 0.0}
    first = conn.execute(Q.take_tokens, take).fetchone()
    second = conn.execute(Q.take_tokens, take).fetchone()
    assert first is not None and second is not None
    assert (first[0], second[0]) == (0, 0)          # nothing granted before the refill time
    row = conn.execute("SELECT refilled_at FROM rate_limits WHERE name = 'sms-gateway'")
    assert row.fetchone() == ahead                   # and the refill clock did not move back


def test_a_take_commits_without_waiting_for_the_disk_and_only_itself(
        conn: psycopg.Connection[Any]) -> None:
    """The take turns synchronous_commit off for its own transaction (the bucket row's lock
    is then not held through a WAL flush), never for the session: the pool hands the
    connection on to work that must be durable."""
    set_limit(conn, "sms-gateway", 50.0, 50)
    take = {"name": "sms-gateway", "want": 1, "hold": 0.0}
    with conn.transaction():
        assert conn.execute(Q.take_tokens, take).fetchone() is not None
        assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
    assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
    assert conn.execute(Q.take_tokens, take).fetchone() is not None     # autocommit
    assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)


def _waits(label: str) -> float:
    value = metrics.REGISTRY.get_sample_value("crondepot_rate_limit_waits_total",
                                              {"limit": label})
    return value or 0.0


def test_a_wait_names_the_operators_limit_but_never_a_tenants(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """Tenants choose their buckets' names: as metric labels they would grow without bound
    and show one tenant's names to whoever scrapes. A wait on such a bucket is counted as
    ``limit="tenant"``; the operator's buckets keep their names."""
    set_limit(conn, "sms-gateway", 20.0, 1)
    put_own_limit(conn, tenant(conn), "acme-secret-partner", 20.0, 1)
    before = {label: _waits(label) for label in ("sms-gateway", "tenant")}
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True,
                        kwargs={"autocommit": True}) as real:
        for name in ("sms-gateway", "acme-secret-partner"):
            _acquire_after_an_empty_take(conn, real, name)
    assert _waits("sms-gateway") == before["sms-gateway"] + 1
    assert _waits("tenant") == before["tenant"] + 1
    assert _waits("acme-secret-partner") == 0


def _acquire_after_an_empty_take(conn: psycopg.Connection[Any], real: ConnectionPool,
                                 name: str) -> None:
    """One acquire of ``name`` that must wait: the bucket stays empty until its first take
    has come back with nothing, whatever the machine's speed (emptied for the next 50 ms
    only, a slow machine's first take found the token refilled and counted no wait)."""
    conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = clock_timestamp()"
                 " + interval '1 hour' WHERE name = %s", (name,))
    pool = _CountingPool(real)
    limiter = RateLimiter(pool)  # type: ignore[arg-type]
    got: list[float | None] = []
    waiter = threading.Thread(target=lambda: got.append(
        limiter.acquire(name, give_up=lambda: False)))
    waiter.start()
    wait_until(lambda: pool.takes >= 1 and pool.in_flight == 0, timeout=30,
               message="a take that found the bucket empty")
    conn.execute("UPDATE rate_limits SET refilled_at = clock_timestamp()"
                 " - interval '1 second' WHERE name = %s", (name,))
    waiter.join(30)
    assert got and got[0] is not None


class _CountingPool:
    """A real pool that counts the takes sent to the bucket, and how many were in flight at
    once (the limiter uses the pool for nothing else)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self.takes = self.in_flight = self.most_in_flight = 0

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        with self._lock:
            self.takes += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            with self._pool.connection() as conn:
                yield conn
        finally:
            with self._lock:
                self.in_flight -= 1


def test_waiters_on_one_limit_share_one_take_at_a_time(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """Forty calls wait on a bucket that refills one token at a time. One of them at a
    time asks the bucket for all; the others sleep until a token is theirs. When each asked
    for itself, every waiter sent a take per refill, serialised under one lock, and the
    tokens went stale while the waiters that could have used them slept (60 slots behind a
    50/s bucket sent 20/s). Counts, not speed: at most one take in flight, and a bounded
    number of takes per token granted (the herd sent about one per waiter per token)."""
    waiters = 40
    set_limit(conn, "sms-gateway", 40.0, 1)
    conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = clock_timestamp()"
                 " WHERE name = 'sms-gateway'")
    with ConnectionPool(db_url, min_size=4, max_size=8, open=True,
                        kwargs={"autocommit": True}) as real:
        pool = _CountingPool(real)
        limiter = RateLimiter(pool)  # type: ignore[arg-type]
        got: list[float | None] = []

        def call() -> None:
            got.append(limiter.acquire("sms-gateway", give_up=lambda: False))

        threads = [threading.Thread(target=call) for _ in range(waiters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert len(got) == waiters and None not in got
    assert pool.most_in_flight == 1
    assert pool.takes <= 3 * waiters, pool.takes


def test_a_saturated_bucket_is_asked_once_a_batch_not_once_a_token(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """Thirty calls keep waiting on a 200/s bucket that starts empty. The asker waits until
    the bucket holds a token for each waiting call (``batch_size``: 4 at 200/s) before it
    takes, so the takes sent are about a quarter of the tokens. Asking as soon as one token
    had refilled sent 0.9 takes a token and woke every waiter for each (bench/bucket_herd.py).
    Counts, not speed: takes against tokens granted, and at most one take in flight."""
    set_limit(conn, "sms-gateway", 200.0, 60)
    conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = clock_timestamp()"
                 " WHERE name = 'sms-gateway'")
    wanted = 240
    lock = threading.Lock()
    granted = [0]
    with ConnectionPool(db_url, min_size=2, max_size=4, open=True,
                        kwargs={"autocommit": True}) as real:
        pool = _CountingPool(real)
        limiter = RateLimiter(pool)  # type: ignore[arg-type]

        def enough() -> bool:
            with lock:
                return granted[0] >= wanted

        def slot() -> None:
            while limiter.acquire("sms-gateway", give_up=enough) is not None:
                with lock:
                    granted[0] += 1

        threads = [threading.Thread(target=slot) for _ in range(30)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert granted[0] >= wanted
    assert pool.most_in_flight == 1
    assert pool.takes * 2 <= granted[0], (pool.takes, granted[0])


def test_a_waiter_that_gives_up_while_asking_leaves_the_others_served(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """The call asking the bucket for the others may give up (its lease ran out, the worker
    stops): another waiter takes over the asking, and gets its token."""
    set_limit(conn, "sms-gateway", 5.0, 1)
    conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = clock_timestamp()"
                 " WHERE name = 'sms-gateway'")
    stop_first = threading.Event()
    with ConnectionPool(db_url, min_size=1, max_size=2, open=True,
                        kwargs={"autocommit": True}) as pool:
        limiter = RateLimiter(pool)
        results: dict[str, float | None] = {}
        first = threading.Thread(target=lambda: results.__setitem__(
            "first", limiter.acquire("sms-gateway", give_up=stop_first.is_set)))
        first.start()
        stop_first.set()
        second = limiter.acquire("sms-gateway", give_up=lambda: False)
        first.join(10)
    assert second is not None
    assert "first" in results        # it returned: a token, or None for giving up
