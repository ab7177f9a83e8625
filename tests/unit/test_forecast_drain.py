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


def _one_each(specs: list[tuple[float, float | None]]) -> list[Arrival]:
    """One run per (ready seconds, deadline seconds or None)."""
    return [Arrival(s(ready), 1, None if deadline is None else s(deadline))
            for ready, deadline in specs]


def _sent_by(arrivals: list[Arrival], *, rate: float = 10, burst: float = 10,
             tokens: float = 10, fifo: bool = False) -> tuple[int, int, datetime | None]:
    (wave,) = drain(arrivals, rate=rate, burst=burst, tokens=tokens, start=T0, fifo=fifo)
    return wave.sent, wave.past_deadline, wave.drained_at


def test_deadline_first_where_first_come_would_skip_70() -> None:
    # The claim's test (integration/claim/test_claim_deadline_first.py): 100 runs "within
    # 30 s" queued before 100 "within 12 s", 10/s. First come: the 100 go by 9 s, 30 of the
    # urgent ones by 12 s, 70 pass. Deadline first: the urgent ones by 9 s, the rest by 19 s.
    burst = _one_each([(-10 + i / 1000, 30) for i in range(100)]
                      + [(-9.9 + i / 1000, 12) for i in range(100)])
    assert _sent_by(burst, fifo=True) == (130, 70, s(12))
    assert _sent_by(burst) == (200, 0, s(19))


def test_a_later_arrival_with_an_earlier_deadline_takes_the_next_turns() -> None:
    # 100 runs until 1,000 s at 09:00, 20 more at 5 s that must go by 8 s: they go 5..7 s.
    arrivals = [Arrival(T0, 100, s(1000)), Arrival(s(5), 20, s(8))]
    assert _sent_by(arrivals) == (120, 0, s(11))
    assert _sent_by(arrivals, fifo=True) == (100, 20, s(9))


def test_runs_without_a_deadline_keep_their_turn() -> None:
    # One token a second from 1 s. Queue A (until 100 s), B (no deadline), C (until 1.5 s):
    # A's turn goes to C (sent at 1 s), then A at 2 s, B at 3 s; first come, C passes.
    queue = _one_each([(-3, 100), (-2, None), (-1, 1.5)])
    assert _sent_by(queue, rate=1, burst=1, tokens=0) == (3, 0, s(3))
    assert _sent_by(queue, rate=1, burst=1, tokens=0, fifo=True) == (2, 1, s(2))
    # B queued before A (until 1.5 s) keeps its turn, as in the claim: A passes.
    assert _sent_by(_one_each([(-2, None), (-1, 1.5)]), rate=1, burst=1, tokens=0) == (
        1, 1, s(1))


def test_one_deadline_for_all_is_first_come_first_served() -> None:
    # 480 k reminders "until 20:00": nothing to reorder, the same drain as first come.
    arrivals = [Arrival(T0, 480_112, s(11 * 3600))]
    assert (drain(arrivals, rate=450, burst=50, tokens=50, start=T0)
            == drain(arrivals, rate=450, burst=50, tokens=50, start=T0, fifo=True))
