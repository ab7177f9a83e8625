"""Retry decisions and full-jitter backoff (pure)."""

from __future__ import annotations

import random
from collections import Counter

from crondepot.queue.retry import backoff_cap, decide


def test_backoff_caps_double_from_30_to_600_seconds() -> None:
    assert [backoff_cap(a) for a in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]


def test_temporary_error_is_retried_within_the_cap() -> None:
    rng = random.Random(1)
    for attempt in range(1, 6):
        d = decide(kind="temporary", attempt=attempt, max_attempts=6, rng=rng)
        assert d.action == "retry" and 0 <= d.delay_seconds <= backoff_cap(attempt)


def test_retry_after_is_honoured_and_capped() -> None:
    d = decide(kind="temporary", attempt=1, max_attempts=6, retry_after=90,
               rng=random.Random(0))
    assert d.delay_seconds >= 90
    d = decide(kind="temporary", attempt=1, max_attempts=6, retry_after=10**9)
    assert d.delay_seconds == 3600


def test_permanent_error_fails_without_retry() -> None:
    assert decide(kind="permanent", attempt=1, max_attempts=6).action == "fail"


def test_unknown_outcome_goes_to_the_dead_letter_not_a_retry() -> None:
    d = decide(kind="unknown", attempt=1, max_attempts=6)
    assert d.action == "dead" and "outcome unknown" in d.reason


def test_sixth_failed_attempt_is_dead() -> None:
    assert decide(kind="temporary", attempt=5, max_attempts=6).action == "retry"
    assert decide(kind="temporary", attempt=6, max_attempts=6).action == "dead"


def test_50000_runs_failing_together_spread_over_30_seconds() -> None:
    rng = random.Random(20261130)
    delays = [decide(kind="temporary", attempt=1, max_attempts=6, rng=rng).delay_seconds
              for _ in range(50_000)]
    per_second = Counter(int(d) for d in delays)
    assert max(delays) - min(delays) >= 29.5           # spread over ≥ 30 s
    busiest = max(per_second.values())
    assert abs(busiest - 1750) <= 175, busiest         # within 10 % of the 1,750 measured
