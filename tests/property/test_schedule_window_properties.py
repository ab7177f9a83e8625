"""Properties of a job's schedule beyond cron: a window keeps exactly the timetable's fires
inside it; L and D#n name exactly the days a brute-force calendar walk finds; max_runs
writes exactly min(due fires, runs left) and ends the job exactly when they run out."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta
from itertools import islice

from hypothesis import given, settings
from hypothesis import strategies as st

from crondepot.scheduler.plan import DueJob, plan
from crondepot.timetable import Timetable, schedule
from tests.property.test_timetable_properties import EXPRESSIONS, ZONES, _table

PROPERTY = settings(max_examples=150, deadline=None)
INSTANTS = st.datetimes(min_value=datetime(2025, 1, 1), max_value=datetime(2030, 12, 31),
                        timezones=st.just(UTC))


@PROPERTY
@given(cron=EXPRESSIONS, tz=st.sampled_from(ZONES), after=INSTANTS,
       start=st.none() | st.timedeltas(timedelta(0), timedelta(days=3)),
       length=st.none() | st.timedeltas(timedelta(minutes=1), timedelta(days=4)))
def test_a_window_keeps_exactly_the_fires_inside_it(
        cron: str, tz: str, after: datetime, start: timedelta | None,
        length: timedelta | None) -> None:
    table: Timetable = _table(cron, tz)
    start_at = after + start if start is not None else None
    end_at = (start_at or after) + length if length is not None else None
    windowed = schedule(cron, tz, start_at=start_at, end_at=end_at)
    horizon = (end_at or after + timedelta(days=8)) + timedelta(hours=1)
    plain = [f.at for f in table.fires_between(after, horizon, 10**6)]
    inside = [at for at in plain if (start_at is None or at >= start_at)
              and (end_at is None or at <= end_at)]
    assert [f.at for f in windowed.fires_between(after, horizon, 10**6)] == inside


def _last_days(first: date, months: int) -> list[date]:
    days = []
    year, month = first.year, first.month
    for _ in range(months):
        days.append(date(year, month, calendar.monthrange(year, month)[1]))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return days


@PROPERTY
@given(weekday=st.integers(0, 7), nth=st.integers(1, 5), year=st.integers(2025, 2040))
def test_nth_weekday_is_what_a_calendar_walk_finds(weekday: int, nth: int, year: int) -> None:
    after = datetime(year, 1, 1, tzinfo=UTC) - timedelta(seconds=1)
    fires = [f.date() for f in Timetable(f"0 0 * * {weekday}#{nth}", "UTC")
             .next_fires(after, 12) if f.year == year]
    iso = 7 if weekday % 7 == 0 else weekday          # date.isoweekday(): Sunday is 7
    expected = []
    for month in range(1, 13):
        days = [d for d in (date(year, month, day) for day in
                            range(1, calendar.monthrange(year, month)[1] + 1))
                if d.isoweekday() == iso]
        if len(days) >= nth:
            expected.append(days[nth - 1])
    assert fires == expected[:len(fires)] and len(fires) == min(len(expected), 12)


@PROPERTY
@given(year=st.integers(2025, 2060), month=st.integers(1, 12), tz=st.sampled_from(ZONES))
def test_l_is_the_last_day_of_each_month_on_the_jobs_clock(year: int, month: int,
                                                           tz: str) -> None:
    table = Timetable("0 12 L * *", tz)
    first = datetime(year, month, 1, tzinfo=UTC) - timedelta(days=1)
    fires = [fire.local.date() for fire in islice(table.fires_after(first), 14)]
    assert fires[1:13] == _last_days(fires[1].replace(day=1), 12)


@PROPERTY
@given(due=st.integers(1, 40), remaining=st.integers(0, 50), latest=st.booleans())
def test_max_runs_writes_what_is_left_and_ends_exactly_when_it_runs_out(
        due: int, remaining: int, latest: bool) -> None:
    table = schedule("* * * * *", "UTC")
    first = datetime(2026, 1, 1, tzinfo=UTC)
    job = DueJob(id=1, next_nominal_at=first, spread_offset=timedelta(0),
                 catchup="latest" if latest else "all", max_catchup=1000,
                 misfire_policy="run_late", misfire_seconds=None, misfire_until=None, tz="UTC")

    def next_fire(after: datetime) -> datetime | None:
        return table.next_fires(after, 1)[0]

    result = plan(job, first + timedelta(minutes=due - 1, seconds=30), next_fire,
                  remaining=remaining)
    assert len(result.runs) == min(due, remaining)
    assert (result.ended == "max_runs") == (due >= remaining)
    assert (result.next_nominal_at is None) == (due >= remaining)
