"""The plan with an exclusion calendar, against a model: a scheduler that ticks whenever a
job is due (``next_run_at``) writes every fire of the timetable exactly once, in nominal
order, each due where the rule puts it (its own time, skipped, or the same local time on the
nearest business day after or before), and never after its due time: a fire moved to the
business day before is written in time."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from crondepot.scheduler.plan import DueJob, plan
from crondepot.timetable import Timetable
from crondepot.timetable.calendar import Rule

START = date(2027, 3, 1)
DAYS = 50
TIMETABLES = [("0 9 * * *", "Asia/Kolkata"), ("0 9,17 * * *", "Asia/Kolkata"),
              ("0 9 5 * *", "Asia/Kolkata"), ("30 1 * * *", "Europe/London"),
              ("0 */6 * * 1-5", "America/New_York")]


def _expected_due(rule: Rule, nominal: datetime) -> datetime | None:
    """The model: where the rule puts a fire, by walking days one at a time."""
    zone = ZoneInfo(rule.tz)
    local = nominal.astimezone(zone)
    if local.date() not in rule.dates:
        return nominal
    if rule.on_excluded == "skip":
        return None
    step = -1 if rule.on_excluded == "previous_business_day" else 1
    day = local.date()
    for _ in range(366):
        day += timedelta(days=step)
        if day.weekday() in rule.business_days and day not in rule.dates:
            return rule.shift(nominal).at
    return None


@settings(max_examples=150, deadline=None)
@given(which=st.sampled_from(TIMETABLES),
       holidays=st.sets(st.integers(0, DAYS - 1), max_size=20),
       on=st.sampled_from(["skip", "next_business_day", "previous_business_day"]),
       business=st.sets(st.integers(0, 6), min_size=1),
       spread=st.sampled_from([0, 600]))
def test_every_fire_once_in_order_due_where_the_rule_says_and_written_in_time(
        which: tuple[str, str], holidays: set[int], on: str, business: set[int],
        spread: int) -> None:
    cron, tz = which
    timetable = Timetable(cron, tz)
    rule = Rule(dates=frozenset(START + timedelta(days=d) for d in holidays),
                on_excluded=on, business_days=frozenset(business), tz=tz)  # type: ignore[arg-type]

    def next_fire(after: datetime) -> datetime | None:
        fires = timetable.next_fires(after, 1)
        return fires[0] if fires else None

    begin = datetime(2027, 2, 25, tzinfo=UTC)
    end = datetime.combine(START + timedelta(days=DAYS), datetime.min.time(), UTC)
    first = next_fire(begin)
    assert first is not None
    offset = timedelta(seconds=spread)
    nominal: datetime | None = first
    now = begin
    written: list[tuple[datetime, datetime, str | None, datetime]] = []   # +when written
    for _ in range(5000):
        if nominal is None or nominal > end:
            break
        job = DueJob(id=1, next_nominal_at=nominal, spread_offset=offset, catchup="all",
                     max_catchup=100_000, misfire_policy="run_late", misfire_seconds=None,
                     misfire_until=None, tz=tz, calendar=rule)
        result = plan(job, now, next_fire)
        written += [(r.nominal_at, r.due_at, r.skip_reason, now) for r in result.runs]
        assert result.next_run_at is not None and result.next_nominal_at is not None
        assert result.next_run_at > now or result.runs, "a due job always moves on"
        nominal = result.next_nominal_at
        now = max(now, result.next_run_at)      # the scheduler ticks when the job is due
    fires = []
    at: datetime | None = first
    while at is not None and at <= written[-1][0]:
        fires.append(at)
        at = next_fire(at)
    assert [w[0] for w in written] == fires                 # each fire once, in order
    for nominal_at, due_at, reason, when in written:
        expected = _expected_due(rule, nominal_at)
        if expected is None:
            assert reason == "calendar"
        else:
            assert reason is None and due_at == expected + offset
            # written by its due time (one moved before the first tick: at that tick)
            assert when <= max(due_at, begin)
