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
