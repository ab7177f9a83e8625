"""The shared token bucket's reserve (crondepot.limits.buckets, queries/ratelimit.sql)."""

from __future__ import annotations

import math
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
                        kwargs={"autocommit": True}) as pool:
        limiter = RateLimiter(pool)
        for name in ("sms-gateway", "acme-secret-partner"):
            conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = clock_timestamp()"
                         " WHERE name = %s", (name,))
            assert limiter.acquire(name, give_up=lambda: False) is not None
    assert _waits("sms-gateway") == before["sms-gateway"] + 1
    assert _waits("tenant") == before["tenant"] + 1
    assert _waits("acme-secret-partner") == 0
