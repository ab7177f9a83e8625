"""Exclusion calendars as pure functions: the shift rule (timetable/calendar.py) and the plan
that writes a job's fires by it (scheduler/plan.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from crondepot.base.errors import InvalidSchedule
from crondepot.scheduler.plan import DueJob, plan
from crondepot.timetable import Timetable
from crondepot.timetable.calendar import Rule, business_days

MON_FRI = frozenset(range(5))


def _rule(dates: list[date], on: str = "next_business_day", tz: str = "Asia/Kolkata",
          days: frozenset[int] = MON_FRI) -> Rule:
    return Rule(dates=frozenset(dates), on_excluded=on, business_days=days,  # type: ignore[arg-type]
                tz=tz)


def _at(tz: str, *parts: int) -> datetime:
    from zoneinfo import ZoneInfo
    return datetime(*parts, tzinfo=ZoneInfo(tz)).astimezone(UTC)   # type: ignore[misc]


# -- business_days -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "days"), [
    ("mon-fri", {0, 1, 2, 3, 4}), ("sun-thu", {6, 0, 1, 2, 3}), ("mon,wed,fri", {0, 2, 4}),
    ("mon-wed,fri", {0, 1, 2, 4}), ("SAT", {5}), ("fri-mon", {4, 5, 6, 0})])
def test_business_days_read_ranges_lists_and_wrapping_ranges(text: str, days: set[int]) -> None:
    assert business_days(text) == days


@pytest.mark.parametrize("text", ["", "mon-fry", "mon--fri", "monday", "mon-tue-wed", 5])
def test_business_days_refuse_what_is_not_weekday_names(text: object) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        business_days(text)
    assert caught.value.field == "calendar.business_days"


# -- the shift -----------------------------------------------------------------------------

def test_a_fire_on_a_date_not_in_the_calendar_stays() -> None:
    fire = _at("Asia/Kolkata", 2026, 12, 24, 9, 0)
    assert _rule([date(2026, 12, 25)]).shift(fire).at == fire


def test_skip_gives_no_instant() -> None:
    shift = _rule([date(2026, 12, 25)], on="skip").shift(_at("Asia/Kolkata", 2026, 12, 25, 9))
    assert shift.at is None and shift.moved


def test_next_business_day_jumps_the_weekend_at_the_same_local_time() -> None:
    # Friday 25 December 2026 -> Monday the 28th, 09:00 in Kolkata
    fire = _at("Asia/Kolkata", 2026, 12, 25, 9, 0)
    assert _rule([date(2026, 12, 25)]).shift(fire).at == _at("Asia/Kolkata", 2026, 12, 28, 9)


def test_previous_business_day_goes_back_to_the_thursday() -> None:
    fire = _at("Asia/Kolkata", 2026, 12, 25, 9, 0)
    rule = _rule([date(2026, 12, 25)], on="previous_business_day")
    assert rule.shift(fire).at == _at("Asia/Kolkata", 2026, 12, 24, 9)


def test_a_run_of_consecutive_holidays_is_crossed_whole() -> None:
    holidays = [date(2026, 12, 24) + timedelta(days=n) for n in range(9)]   # 24 Dec - 1 Jan
    fire = _at("Asia/Kolkata", 2026, 12, 29, 9, 0)
    assert _rule(holidays).shift(fire).at == _at("Asia/Kolkata", 2027, 1, 4, 9)
    assert _rule(holidays, on="previous_business_day").shift(fire).at == _at(
        "Asia/Kolkata", 2026, 12, 23, 9)


def test_month_and_year_ends_are_crossed() -> None:
    # Friday 30 April 2027 -> Monday 3 May; Friday 1 January 2027 -> Thursday 31 December
    assert _rule([date(2027, 4, 30)]).shift(_at("Asia/Kolkata", 2027, 4, 30, 9)).at == _at(
        "Asia/Kolkata", 2027, 5, 3, 9)
    back = _rule([date(2027, 1, 1)], on="previous_business_day")
    assert back.shift(_at("Asia/Kolkata", 2027, 1, 1, 9)).at == _at("Asia/Kolkata", 2026, 12,
                                                                    31, 9)
    # Thursday 31 December and Friday 1 January both holidays -> Monday 4 January
    both = _rule([date(2026, 12, 31), date(2027, 1, 1)])
    assert both.shift(_at("Asia/Kolkata", 2026, 12, 31, 9)).at == _at("Asia/Kolkata", 2027, 1,
                                                                      4, 9)


def test_the_wall_clock_time_is_kept_across_a_clock_change() -> None:
    # Friday 12 March 2027 09:00 EST (14:00 UTC) -> Monday the 15th 09:00 EDT (13:00 UTC)
    rule = _rule([date(2027, 3, 12)], tz="America/New_York")
    moved = rule.shift(_at("America/New_York", 2027, 3, 12, 9))
    assert moved.at == datetime(2027, 3, 15, 13, 0, tzinfo=UTC)


def test_a_move_onto_a_skipped_local_time_lands_at_the_change() -> None:
    # London skips 01:00-02:00 on Sunday 28 March 2027: 01:30 there fires at the change
    every_day = frozenset(range(7))
    rule = _rule([date(2027, 3, 27)], tz="Europe/London", days=every_day)
    moved = rule.shift(datetime(2027, 3, 27, 1, 30, tzinfo=UTC))      # 01:30 GMT
    assert moved.at == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)         # 02:00 BST


def test_a_move_onto_a_repeated_local_time_keeps_the_first_pass() -> None:
    # London repeats 01:00-02:00 on Sunday 31 October 2027
    every_day = frozenset(range(7))
    rule = _rule([date(2027, 10, 30)], tz="Europe/London", days=every_day)
    moved = rule.shift(datetime(2027, 10, 30, 0, 30, tzinfo=UTC))     # 01:30 BST
    assert moved.at == datetime(2027, 10, 31, 0, 30, tzinfo=UTC)       # 01:30 BST, first


def test_a_calendar_with_no_business_day_in_a_year_skips() -> None:
    rule = _rule([date(2026, 12, 25)], days=frozenset())
    assert rule.shift(_at("Asia/Kolkata", 2026, 12, 25, 9)).at is None


# -- the plan ------------------------------------------------------------------------------

DAILY_9 = Timetable("0 9 * * *", "Asia/Kolkata")
TWICE_DAILY = Timetable("0 9,17 * * *", "Asia/Kolkata")
FIFTH = Timetable("0 9 5 * *", "Asia/Kolkata")


def _next(timetable: Timetable):  # type: ignore[no-untyped-def]
    def lookup(after: datetime) -> datetime | None:
        fires = timetable.next_fires(after, 1)
        return fires[0] if fires else None
    return lookup


def _job(first: datetime, rule: Rule | None, **overrides: object) -> DueJob:
    fields: dict[str, object] = dict(
        id=7, next_nominal_at=first, spread_offset=timedelta(0), catchup="all",
        max_catchup=1000, misfire_policy="run_late", misfire_seconds=None,
        misfire_until=None, tz="Asia/Kolkata", calendar=rule)
    fields.update(overrides)
    return DueJob(**fields)  # type: ignore[arg-type]


def test_skip_writes_the_fire_skipped_with_reason_calendar() -> None:
    fire = _at("Asia/Kolkata", 2026, 12, 25, 9)
    result = plan(_job(fire, _rule([date(2026, 12, 25)], on="skip")),
                  fire + timedelta(seconds=1), _next(DAILY_9))
    (run,) = result.runs
    assert run.skip_reason == "calendar" and run.nominal_at == fire
    assert run.run_id == f"7:{int(fire.timestamp())}"
    assert result.next_nominal_at == _at("Asia/Kolkata", 2026, 12, 26, 9)


def test_next_business_day_keeps_the_run_id_and_adds_the_spread() -> None:
    fire = _at("Asia/Kolkata", 2026, 12, 25, 9)
    spread = timedelta(minutes=7)
    result = plan(_job(fire, _rule([date(2026, 12, 25)]), spread_offset=spread),
                  fire + spread, _next(DAILY_9))
    (run,) = result.runs
    assert run.run_id == f"7:{int(fire.timestamp())}" and run.skip_reason is None
    assert run.due_at == _at("Asia/Kolkata", 2026, 12, 28, 9) + spread
    # Saturday's fire is not in the calendar: it fires on Saturday, not moved
    assert result.next_run_at == _at("Asia/Kolkata", 2026, 12, 26, 9) + spread


def test_a_weekend_fire_not_in_the_calendar_is_not_moved() -> None:
    sunday = _at("Asia/Kolkata", 2026, 12, 27, 9)
    result = plan(_job(sunday, _rule([date(2026, 12, 25)])), sunday, _next(DAILY_9))
    assert result.runs[0].due_at == sunday


def test_previous_business_day_makes_the_job_due_before_its_nominal_time() -> None:
    """The loan instalment of 5 January 2027 (a holiday) is sent on Monday the 4th: the plan
    of December's fire already sets next_run_at to the 4th, and the plan then writes the
    5th's fire, with its own run id, due at once."""
    rule = _rule([date(2027, 1, 5)], on="previous_business_day")
    december = _at("Asia/Kolkata", 2026, 12, 5, 9)
    first = plan(_job(december, rule), december, _next(FIFTH))
    assert first.next_nominal_at == _at("Asia/Kolkata", 2027, 1, 5, 9)
    assert first.next_run_at == _at("Asia/Kolkata", 2027, 1, 4, 9)
    second = plan(_job(first.next_nominal_at, rule), first.next_run_at, _next(FIFTH))
    (run,) = second.runs
    assert run.nominal_at == _at("Asia/Kolkata", 2027, 1, 5, 9)
    assert run.due_at == _at("Asia/Kolkata", 2027, 1, 4, 9)
    assert second.next_nominal_at == _at("Asia/Kolkata", 2027, 2, 5, 9)
    assert second.next_run_at == _at("Asia/Kolkata", 2027, 2, 5, 9)


def test_a_fire_moved_before_an_unwritten_one_brings_it_along_in_nominal_order() -> None:
    """09:00 and 17:00 daily; Friday 25 December moved to Thursday the 24th. At 09:00 on the
    24th, the 25th's 09:00 fire is due: the 24th's 17:00 fire (nominally before it) is
    written with it, due at 17:00 as ever, and not cut by catchup: latest."""
    rule = _rule([date(2026, 12, 25)], on="previous_business_day")
    start = _at("Asia/Kolkata", 2026, 12, 24, 9)
    result = plan(_job(start, rule, catchup="latest"), start, _next(TWICE_DAILY))
    assert [(r.nominal_at, r.due_at, r.skip_reason) for r in result.runs] == [
        (start, start, None),
        (_at("Asia/Kolkata", 2026, 12, 24, 17), _at("Asia/Kolkata", 2026, 12, 24, 17), None),
        (_at("Asia/Kolkata", 2026, 12, 25, 9), start, None)]
    assert result.next_nominal_at == _at("Asia/Kolkata", 2026, 12, 25, 17)
    assert result.next_run_at == _at("Asia/Kolkata", 2026, 12, 24, 17)
    later = plan(_job(result.next_nominal_at, rule), result.next_run_at, _next(TWICE_DAILY))
    (run,) = later.runs
    assert run.nominal_at == _at("Asia/Kolkata", 2026, 12, 25, 17)
    assert run.due_at == _at("Asia/Kolkata", 2026, 12, 24, 17)
    assert later.next_run_at == _at("Asia/Kolkata", 2026, 12, 26, 9)   # Saturday, in place


def test_a_moved_fire_written_late_is_due_at_once_and_judged_from_its_moved_time() -> None:
    """A scheduler down over the moved fire's time writes it when it is back (due in the
    past: the workers take it at once); a 20:00 local deadline is the moved day's."""
    from datetime import time
    rule = _rule([date(2026, 12, 25)], on="previous_business_day")
    fire = _at("Asia/Kolkata", 2026, 12, 25, 9)
    back = _at("Asia/Kolkata", 2026, 12, 24, 21)
    result = plan(_job(fire, rule, misfire_policy="skip_after_local_time",
                       misfire_until=time(20, 0)), back, _next(DAILY_9))
    (run,) = result.runs
    assert run.due_at == _at("Asia/Kolkata", 2026, 12, 24, 9)
    assert run.deadline_at == _at("Asia/Kolkata", 2026, 12, 24, 20)
    assert run.skip_reason == "misfire_local_deadline"


def test_a_settle_writes_only_fires_whose_nominal_time_passed() -> None:
    rule = _rule([date(2026, 12, 25)], on="previous_business_day")
    start = _at("Asia/Kolkata", 2026, 12, 24, 9)
    result = plan(_job(start, rule), start + timedelta(hours=1), _next(DAILY_9), owed=True)
    assert [r.nominal_at for r in result.runs] == [start]


def test_max_runs_bounds_the_fires_looked_ahead() -> None:
    """Two fires left: the 24th's 09:00 is written, the 17:00 is the last; the 25th's 09:00
    (moved to the 24th) is beyond max_runs, so it neither is written nor makes the job due
    before the 17:00 fire."""
    rule = _rule([date(2026, 12, 25)], on="previous_business_day")
    start = _at("Asia/Kolkata", 2026, 12, 24, 9)
    result = plan(_job(start, rule), start, _next(TWICE_DAILY), remaining=2)
    assert [r.nominal_at for r in result.runs] == [start]
    assert result.next_run_at == _at("Asia/Kolkata", 2026, 12, 24, 17)
    last = plan(_job(result.next_nominal_at, rule), result.next_run_at, _next(TWICE_DAILY),
                remaining=1)
    assert [r.nominal_at for r in last.runs] == [_at("Asia/Kolkata", 2026, 12, 24, 17)]
    assert last.ended == "max_runs"
