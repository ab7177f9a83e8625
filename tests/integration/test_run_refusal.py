"""The worker's side of grants, against a real database: its cached view of a tenant's
grants, an unknown rate limit (never "no limit"), and the tenant a handler is told."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from crondepot.job.guard import AddressGuard
from crondepot.limits.buckets import RateLimiter, UnknownLimit, set_limit
from crondepot.queue import claim_runs
from crondepot.tenancy import grants
from crondepot.tenancy.grants import GrantCache
from crondepot.worker.execute import Attempt, Executor
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.targets import WebhookTarget
from tests.support.jobs import grant_limit, queued_runs, tenant

SEEN: list[RunContext] = []


@handler("test.grants.seen")
def _seen(run: RunContext) -> None:
    SEEN.append(run)


@pytest.fixture
def pool(db_url: str) -> Any:
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True,
                        kwargs={"autocommit": True}) as opened:
        yield opened


def _execute(pool: ConnectionPool, conn: psycopg.Connection[Any], cache: GrantCache) -> str:
    """Claim the one queued run and execute it as a worker's slot would; its status after."""
    from crondepot.queue.lease import Deadline

    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    outcomes = OutcomeWriter(pool)
    outcomes.start()
    webhooks = WebhookTarget(AddressGuard.from_env())
    executor = Executor(pool, outcomes, RateLimiter(pool), webhooks, stopping=lambda: False,
                        grants=cache)
    try:
        executor.run(Attempt(run=run, deadline=Deadline(time.monotonic() + 30)), lambda: None)
    finally:
        outcomes.close()
        webhooks.close()
    row = conn.execute("SELECT status FROM runs").fetchone()
    assert row is not None
    return str(row[0])


def test_an_unknown_limit_raises_instead_of_granting_an_unlimited_call(
        pool: ConnectionPool) -> None:
    with pytest.raises(UnknownLimit, match="'no-such-limit' does not exist"):
        RateLimiter(pool).acquire("no-such-limit", give_up=lambda: False)


def test_a_bucket_removed_while_the_grant_is_cached_fails_the_run_for_good(
        pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
    set_limit(conn, "sms-gateway", 100, 10)
    queued_runs(conn, 1, handler="test.grants.seen")
    grants.grant(conn, tenant(conn), handlers=["test.grants.seen"])
    grant_limit(conn, tenant(conn), "sms-gateway")
    conn.execute("UPDATE jobs SET rate_limit = 'sms-gateway'")
    cache = GrantCache(pool, ttl=3600)
    assert "sms-gateway" in cache.get(tenant(conn)).limits        # the view is warm
    conn.execute("DELETE FROM rate_limits WHERE name = 'sms-gateway'")
    SEEN.clear()
    assert _execute(pool, conn, cache) == "failed"
    assert SEEN == []
    assert conn.execute("SELECT attempt, error_class, last_error LIKE '%does not exist%' "
                        "FROM runs").fetchone() == (1, "UnknownLimit", True)


def test_a_handler_gets_its_tenants_name(pool: ConnectionPool,
                                         conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, handler="test.grants.seen", tenant_name="shop7")
    grants.grant(conn, tenant(conn, "shop7"), handlers=["test.grants.seen"])
    SEEN.clear()
    assert _execute(pool, conn, GrantCache(pool)) == "succeeded"
    assert [run.tenant for run in SEEN] == ["shop7"]


def _cached_then_revoked(pool: ConnectionPool, conn: psycopg.Connection[Any]
                         ) -> tuple[GrantCache, list[float], int]:
    """A cache (ttl 2 s, its clock ``now[0]``) holding the bank's grants, then the bank's
    test.record handler revoked in the database."""
    now = [0.0]
    cache = GrantCache(pool, ttl=2.0, clock=lambda: now[0])
    bank = tenant(conn)
    assert "test.record" in cache.get(bank).handlers
    grants.revoke(conn, bank, handlers=["test.record"])
    return cache, now, bank


def test_the_cached_grants_are_read_again_after_their_ttl(
        pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
    cache, now, bank = _cached_then_revoked(pool, conn)
    now[0] = 1.9
    assert "test.record" in cache.get(bank).handlers              # still the cached view
    now[0] = 2.0
    assert "test.record" not in cache.get(bank).handlers


def _reads(pool: ConnectionPool) -> int:
    return int(pool.get_stats().get("requests_num", 0))


def _at_once(count: int, call: Callable[[], object]) -> list[object]:
    """``call`` from ``count`` threads released together; each one's result or exception."""
    start = threading.Barrier(count)
    results: list[object] = [None] * count

    def one(i: int) -> None:
        start.wait()
        try:
            results[i] = call()
        except Exception as exc:
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_slots_that_find_no_view_wait_for_one_read_of_it(
        pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
    # A 100-slot worker's first claim: every slot asks for the same tenant's grants at once.
    bank = tenant(conn)
    cache = GrantCache(pool, ttl=3600)
    before = _reads(pool)
    results = _at_once(40, lambda: cache.get(bank))
    assert _reads(pool) - before == 1
    assert all(isinstance(r, grants.TenantUses) and "test.record" in r.handlers
               for r in results)


def test_two_tenants_read_at_once_each_get_their_own_grants(
        pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
    # Slots of two tenants on a cold view at once: one read each, and no slot of one tenant
    # takes the other's read.
    bank = tenant(conn)
    shop = tenant(conn, "shop7")
    grants.revoke(conn, shop, handlers=["test.record"])
    cache = GrantCache(pool, ttl=3600)
    before = _reads(pool)
    turn = itertools.count()

    def one() -> tuple[int, grants.TenantUses]:
        asked = (bank, shop)[next(turn) % 2]        # half the slots each
        return asked, cache.get(asked)

    seen = _at_once(40, one)
    assert _reads(pool) - before == 2
    pairs = [r for r in seen if isinstance(r, tuple)]
    assert len(pairs) == 40
    assert {uses.tenant for t, uses in pairs if t == bank} == {"bank42"}
    assert {uses.tenant for t, uses in pairs if t == shop} == {"shop7"}
    assert all("test.record" in uses.handlers for t, uses in pairs if t == bank)
    assert not any("test.record" in uses.handlers for t, uses in pairs if t == shop)


def test_slots_that_find_the_view_stale_wait_for_one_read_and_see_the_revoke(
        pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
    cache, now, bank = _cached_then_revoked(pool, conn)
    now[0] = 2.5
    before = _reads(pool)
    results = _at_once(40, lambda: cache.get(bank))
    assert _reads(pool) - before == 1
    assert all(isinstance(r, grants.TenantUses) and "test.record" not in r.handlers
               for r in results)


def test_slots_waiting_on_a_read_that_fails_fail_with_it_without_a_read_each() -> None:
    # Nothing listens on port 1: the read waits out the pool's timeout, then fails.
    with ConnectionPool("postgresql://postgres@127.0.0.1:1/none", min_size=0, max_size=2,
                        timeout=2.0, open=True) as dead:
        cache = GrantCache(dead, ttl=3600)
        started = time.monotonic()
        results = _at_once(20, lambda: cache.get(1))
        elapsed = time.monotonic() - started
        assert all(isinstance(r, psycopg.OperationalError) for r in results)
        assert all("grants of tenant 1 could not be read" in str(r) for r in results)
        # One read waited out its timeout; the others took its failure instead of queueing
        # 19 more timeouts behind it.
        assert _reads(dead) == 1 and elapsed < 10, (_reads(dead), elapsed)


def test_slots_that_waited_for_a_slow_read_take_it_even_when_it_took_longer_than_the_ttl(
        pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
    # A read slower than the ttl (a saturated pool): the slots that waited for it take its
    # view rather than finding it stale and reading again one after another.
    now, asked = [0.0], [0]

    def clock() -> float:
        asked[0] += 1       # once as each slot arrives, once as the read starts
        return now[0]

    cache = GrantCache(pool, ttl=2.0, clock=clock)
    bank = tenant(conn)
    with pool.connection() as held, pool.connection() as held_too, \
            pool.connection() as held_three, pool.connection() as held_four:
        assert held and held_too and held_three and held_four    # the pool (max 4) is busy
        before = _reads(pool)
        waiting = threading.Thread(target=lambda: _at_once(10, lambda: cache.get(bank)))
        waiting.start()
        until = time.monotonic() + 20
        while asked[0] < 11 and time.monotonic() < until:    # every slot has arrived
            time.sleep(0.01)
        time.sleep(0.2)
        now[0] = 5.0            # the read in progress is now older than the ttl
    waiting.join(10)
    assert _reads(pool) - before == 1
