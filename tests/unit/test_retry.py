"""Retry decisions and full-jitter backoff (pure)."""

from __future__ import annotations

import random
from collections import Counter

from crondepot.queue.retry import backoff_cap, decide, retry_wait


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


# --- a job's own curve (its retry object) --------------------------------------------------


def test_the_default_curve_is_the_field_table_s_default() -> None:
    from crondepot.job import fields as F
    from crondepot.queue.retry import BASE_SECONDS, CAP_SECONDS

    assert (F.RETRY_BASE_S.default, F.RETRY_CAP_S.default) == (BASE_SECONDS, CAP_SECONDS)
    assert F.RETRY_MAX_ATTEMPTS.default == 6


def test_a_job_s_curve_doubles_from_its_base_up_to_its_cap() -> None:
    assert [backoff_cap(a, 1, 2) for a in range(1, 5)] == [1, 2, 2, 2]
    assert [backoff_cap(a, 0.5, 3) for a in range(1, 5)] == [0.5, 1, 2, 3]
    assert backoff_cap(10_000, 1, 5) == 5               # no overflow far past the cap


def test_the_wait_is_the_jitter_s_share_of_the_cap_or_retry_after_if_longer() -> None:
    assert retry_wait(3, jitter=0.5, base_s=1, cap_s=2) == 1.0
    assert retry_wait(1, jitter=0.0, base_s=1, cap_s=2) == 0.0
    assert retry_wait(1, jitter=0.999, at_least=90, base_s=1, cap_s=2) == 90
    assert retry_wait(2, jitter=0.999, at_least=1, base_s=10, cap_s=20) == 19.98


def test_decide_draws_within_the_job_s_curve_and_says_its_jitter() -> None:
    rng = random.Random(7)
    for attempt in (1, 2, 3, 9):
        d = decide(kind="temporary", attempt=attempt, max_attempts=10, rng=rng,
                   base_s=1, cap_s=2)
        assert d.action == "retry" and 0 <= d.jitter < 1
        assert 0 <= d.delay_seconds <= backoff_cap(attempt, 1, 2)
        assert d.delay_seconds == retry_wait(attempt, jitter=d.jitter, base_s=1, cap_s=2)


def test_retry_after_longer_than_the_curve_wins_and_is_passed_on_capped() -> None:
    d = decide(kind="temporary", attempt=1, max_attempts=3, retry_after=45, base_s=1, cap_s=2)
    assert d.delay_seconds == 45 and d.at_least == 45
    d = decide(kind="temporary", attempt=1, max_attempts=3, retry_after=10**9, base_s=1,
               cap_s=2)
    assert d.at_least == 3600


def test_a_job_s_max_attempts_ends_in_the_dead_letter() -> None:
    assert decide(kind="temporary", attempt=2, max_attempts=3).action == "retry"
    assert decide(kind="temporary", attempt=3, max_attempts=3).action == "dead"
