"""The shared token bucket's reserve (crondepot.limits.buckets, queries/ratelimit.sql)."""

from __future__ import annotations

import math
from typing import Any

import psycopg
import pytest

from crondepot.db import Q
from crondepot.limits.buckets import HOLD_SECONDS, SLACK_SECONDS, set_limit


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
    granted, remaining, _ = row
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
