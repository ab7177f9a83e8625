"""Exclusion calendars: which fires a holiday calendar removes or moves, and where to (pure).

A job's ``calendar`` names a tenant's set of dates; a fire whose *local* date (the job's
zone) is in the set is skipped, or moved to the nearest business day after or before it at
the same local wall-clock time. A business day is a weekday of ``business_days`` whose date
is not in the set. Only dates in the set trigger the rule: a Sunday fire of a daily cron
is not moved because Sunday is not a business day (docs/schedules.md, "Holiday calendars").

Nothing here reads a clock or a database: the scheduler passes the dates in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from crondepot.timetable.days import DAY_NAMES, weekdays
from crondepot.timetable.zone import Kind, place, validate_zone

__all__ = ["DAY_NAMES", "MAX_SEARCH_DAYS", "ON_EXCLUDED", "OnExcluded", "Rule", "Shift",
           "business_days"]

OnExcluded = Literal["skip", "next_business_day", "previous_business_day"]
ON_EXCLUDED: tuple[OnExcluded, ...] = ("skip", "next_business_day", "previous_business_day")
# A move looks this far for a business day; a calendar that leaves none in a year skips.
MAX_SEARCH_DAYS = 366


def business_days(text: object, field: str = "calendar.business_days") -> frozenset[int]:
    """The weekdays (Monday 0) a ``business_days`` text names (timetable/days.py)."""
    return weekdays(text, field)


@dataclass(frozen=True, slots=True)
class Shift:
    """What the rule does to one fire: ``at`` None means skip it; else the instant (before
    spread) it is due. ``moved`` says whether the rule changed anything."""

    at: datetime | None
    moved: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One job's calendar rule, with its calendar's dates."""

    dates: frozenset[date]
    on_excluded: OnExcluded
    business_days: frozenset[int]
    tz: str

    @property
    def moves_earlier(self) -> bool:
        return self.on_excluded == "previous_business_day"

    def excluded(self, nominal: datetime) -> bool:
        return self.local_date(nominal) in self.dates

    def local_date(self, nominal: datetime) -> date:
        return nominal.astimezone(validate_zone(self.tz)).date()

    def shift(self, nominal: datetime) -> Shift:
        """Where the fire of ``nominal`` goes: itself, nowhere (skip), or the same local
        wall-clock time on the nearest business day after or before its date."""
        zone = validate_zone(self.tz)
        local = nominal.astimezone(zone)
        if local.date() not in self.dates:
            return Shift(nominal, moved=False)
        if self.on_excluded == "skip":
            return Shift(None, moved=True)
        target = self.business_day_from(local.date())
        if target is None:
            return Shift(None, moved=True)
        where = place(zone, datetime.combine(target, local.time().replace(fold=0)))
        # A wall-clock time that day has twice: the pass the fire had (fold); one it does
        # not have (a DST gap): the instant the clocks changed, as cron fires do (dst.py).
        instant = where.second if (where.kind is Kind.REPEATED and local.fold
                                   and where.second is not None) else where.first
        return Shift(instant.replace(tzinfo=UTC), moved=True)

    def business_day_from(self, day: date) -> date | None:
        """The nearest business day after ``day`` (or before, for previous_business_day)."""
        step = timedelta(days=-1 if self.moves_earlier else 1)
        for _ in range(MAX_SEARCH_DAYS):
            day += step
            if day.weekday() in self.business_days and day not in self.dates:
                return day
        return None

    def latest_mover(self, nominal: datetime) -> date:
        """The last local date whose fires could be moved to before ``nominal``'s: the first
        business day after its date. A fire on a later date moves at most to that business
        day (previous_business_day), which is later than ``nominal``."""
        day = self.local_date(nominal)
        for _ in range(MAX_SEARCH_DAYS):
            day += timedelta(days=1)
            if day.weekday() in self.business_days and day not in self.dates:
                return day
        return day
