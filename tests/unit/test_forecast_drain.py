"""The forecast's bucket model (forecast/drain.py) against drain times worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from crondepot.forecast.drain import Arrival, drain, held

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def s(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_burst_goes_first_then_the_rate() -> None:
    # 1,000 runs, a full bucket of 100 at 10/s: 100 at once, 900 more take 90 s.
    (wave,) = drain([Arrival(T0, 1000)], rate=10, burst=100, tokens=100, start=T0)
    assert (wave.runs, wave.sent, wave.drained_at, wave.past_deadline) == (1000, 1000, s(90), 0)


def test_the_seed_burst_drains_in_17_minutes_47_seconds() -> None:
    # 480,112 runs on a 450/s bucket of burst 50: (480,112 - 50) / 450 = 1,066.804 s, so the
    # last run leaves at 09:17:46.804 ("drained by 09:17:47").
    (wave,) = drain([Arrival(T0, 480_112)], rate=450, burst=50, tokens=50, start=T0)
    assert wave.drained_at == s(480_062 / 450)
    assert s(1066.8) < wave.drained_at < s(1066.81)


def test_an_empty_bucket_sends_the_first_run_after_one_token() -> None:
    (wave,) = drain([Arrival(T0, 1000)], rate=10, burst=100, tokens=0, start=T0)
    assert wave.drained_at == s(100)


def test_runs_past_their_deadline_are_skipped_and_take_no_token() -> None:
    # Deadline one minute after 09:00: 100 + 10 * 60 = 700 are sent by then, 300 pass it;
    # the skipped ones take no token, so a later batch is not delayed by them.
    deadline = s(60)
    waves = drain([Arrival(T0, 1000, deadline), Arrival(s(100), 10)], rate=10, burst=100,
                  tokens=100, start=T0)
    first, second = waves
    assert (first.sent, first.past_deadline, first.deadlines) == (700, 300, {deadline: 300})
    assert first.drained_at == s(60)
    # 40 s idle refill the bucket to 100 (capped): the ten go at once.
    assert (second.start, second.drained_at, second.waited) == (s(100), s(100), False)


def test_batches_that_arrive_during_a_backlog_join_its_wave() -> None:
    # 100 at 0 (burst 20, 10/s): done at 8 s; 50 more at 5 s wait until 8 s, done at 13 s.
    waves = drain([Arrival(s(5), 50), Arrival(T0, 100), Arrival(s(20), 5)], rate=10,
                  burst=20, tokens=20, start=T0)
    assert [(w.start, w.runs, w.drained_at) for w in waves] == [
        (T0, 150, s(13)), (s(20), 5, s(20))]


def test_runs_ready_before_the_start_are_ready_at_it() -> None:
    (wave,) = drain([Arrival(s(-300), 30)], rate=10, burst=10, tokens=10, start=T0)
    assert (wave.start, wave.drained_at) == (T0, s(2))


def test_a_deadline_already_past_skips_the_whole_batch() -> None:
    (wave,) = drain([Arrival(T0, 5, s(-1))], rate=10, burst=10, tokens=10, start=T0)
    assert (wave.sent, wave.past_deadline, wave.drained_at) == (0, 5, None)


def test_a_held_limit_sends_nothing_and_deadlines_inside_the_horizon_pass() -> None:
    (wave,) = held([Arrival(T0, 10, s(60)), Arrival(s(30), 5, s(10_000)), Arrival(s(40), 2)],
                   start=T0, until=s(3600))
    assert (wave.runs, wave.sent, wave.drained_at, wave.past_deadline) == (17, 0, None, 10)


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="rate must be positive"):
        drain([Arrival(T0, 1)], rate=0, burst=1, tokens=1, start=T0)
