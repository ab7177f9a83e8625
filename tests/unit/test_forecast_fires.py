"""The forecast's reading of a group's fires (forecast/fires.py): the fast reading, one fire
at a time, gives the runs that ``plan`` called at every tick gives, whatever the rules."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pytest

from crondepot.forecast.fires import Group, group_runs
from crondepot.scheduler.plan import DueJob
from crondepot.timetable import schedule
from crondepot.timetable.calendar import Rule
from crondepot.timetable.delivery import parse_window

NOW = datetime(2026, 3, 2, 8, tzinfo=UTC)          # a Monday
HOLIDAYS = frozenset({date(2026, 3, 3), date(2026, 3, 6)})


def group(cron: str, *, tz: str = "UTC", behind: timedelta = timedelta(0),
          spread: int = 0, remaining: int | None = None, **rules: Any) -> Group:
    table = schedule(cron, tz, hash_key="")
    (first,) = table.next_fires(NOW - behind, 1)
    job = DueJob(id=0, next_nominal_at=first, spread_offset=timedelta(seconds=spread),
                 catchup=rules.pop("catchup", "all"), max_catchup=rules.pop("max_catchup", 1000),
                 misfire_policy=rules.pop("misfire_policy", "run_late"),
                 misfire_seconds=rules.pop("misfire_seconds", None),
                 misfire_until=rules.pop("misfire_until", None), tz=tz, **rules)
    return Group(schedule=table, job=job, next_run_at=first + job.spread_offset,
                 remaining=remaining, rate_limit=None, host_held=False, jobs=1)


def rule(on_excluded: str, tz: str = "UTC") -> Rule:
    return Rule(dates=HOLIDAYS, on_excluded=on_excluded,  # type: ignore[arg-type]
                business_days=frozenset(range(5)), tz=tz)


CASES = {
    "minutely": group("* * * * *"),
    "behind an hour, catch-up latest": group("*/7 * * * *", behind=timedelta(hours=1),
                                             catchup="latest"),
    "behind, bounded": group("* * * * *", behind=timedelta(hours=2), max_catchup=30),
    "spread": group("0 9 * * *", spread=1700),
    "max_runs": group("*/10 * * * *", remaining=7),
    "skip_after": group("*/15 * * * *", misfire_policy="skip_after", misfire_seconds=60,
                        window=parse_window({"from": "09:00", "to": "17:00"})),
    "local deadline, deferred": group("30 * * * *", tz="Asia/Kolkata",
                                      misfire_policy="skip_after_local_time",
                                      misfire_until=time(20),
                                      window=parse_window({"from": "10:00", "to": "18:00"})),
    "window skip": group("0 * * * *", window=parse_window(
        {"from": "22:00", "to": "06:00", "outside": "skip"})),
    "calendar skip": group("0 12 * * *", calendar=rule("skip")),
    "calendar next": group("0 12 * * *", calendar=rule("next_business_day")),
    "calendar previous": group("0 12 * * *", calendar=rule("previous_business_day")),
    "interval": group("@every 5400s from 2026-03-01T00:00:00+00:00"),
    "list": group("0 9 * * * | 30 9 * * 1-5"),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("hours", [1, 24, 168])
def test_the_fast_reading_matches_a_plan_per_tick(name: str, hours: int) -> None:
    chosen, until = CASES[name], NOW + timedelta(hours=hours)
    fast = group_runs(chosen, now=NOW, until=until)
    reference = group_runs(chosen, now=NOW, until=until, plan_per_tick=True)
    assert (fast.queued, fast.skipped) == (reference.queued, reference.skipped)
    assert fast.queued or fast.skipped or hours == 1


def test_exact_counts() -> None:
    day = NOW + timedelta(hours=24)
    assert len(group_runs(CASES["minutely"], now=NOW, until=day).queued) == 24 * 60
    assert len(group_runs(CASES["max_runs"], now=NOW, until=day).queued) == 7
    skipped = group_runs(CASES["calendar skip"], now=NOW, until=NOW + timedelta(days=7))
    assert (len(skipped.queued), skipped.skipped) == (5, {"calendar": 2})
    # behind two hours with a bound of 30: 06:01 .. 08:00 due now, 90 cut, then one a minute
    behind = group_runs(CASES["behind, bounded"], now=NOW, until=day)
    assert behind.skipped == {"catchup_bound": 120 - 30}
    assert len(behind.queued) == 30 + 24 * 60
