"""Exclusion calendars: a tenant's named sets of dates, and reading them from a file.

A job's ``calendar`` field names one (``{"exclude": "in-bank-holidays", ...}``); the rule
it applies is pure (``timetable/calendar.py``). Here: writing, reading and deleting a
tenant's calendars (the API and ``crondepot calendars``), checking that the calendars a job
names exist (job admission), the tick's one-query read of the calendars of a claimed batch
(``TickCalendars``), and parsing an iCalendar (.ics) file or a plain list of dates.

A calendar's change is a timetable change for the ledger only in where fires are due: the
fires themselves (their nominal times, their run ids) are the cron's, so no fire is owed or
disowned by it. Runs already written keep their due times; the jobs naming the calendar are
made due at once (``nudge_calendar_jobs``) so the next tick plans their next fires with the
new dates (a holiday added for tomorrow moves tomorrow's fire to today in time).
Another tenant's calendar reads as one that does not exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import class_row

from crondepot.base.errors import CrondepotError, InvalidJob
from crondepot.base.vocab import CALENDAR_NAME
from crondepot.db import Q

# Ten years of every day; a PUT of that many fits the API's 64 KiB JSON body (the table's
# CHECK allows 10,000).
MAX_DATES = 3650
# Recurring events (RRULE) are expanded this many years from the event's start.
RRULE_YEARS = 10
# Dates from 2000 to 2199: a typo (0026-12-25, 20266-12-25) is refused, not stored.
EARLIEST, LATEST = date(2000, 1, 1), date(2199, 12, 31)


class CalendarNotFound(CrondepotError):
    """No calendar of that name for the tenant (another tenant's reads the same)."""


class InvalidCalendar(CrondepotError, ValueError):
    """A name, a date or a file that cannot be a calendar; ``field`` names what."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class CalendarInUse(CrondepotError):
    """A delete of a calendar that live jobs name."""

    def __init__(self, message: str, *, job_ids: list[int]) -> None:
        super().__init__(message)
        self.job_ids = job_ids


@dataclass(frozen=True, slots=True, kw_only=True)
class Calendar:
    tenant_id: int
    name: str
    dates: list[date]
    version: int
    created_at: datetime
    updated_at: datetime

    def document(self) -> dict[str, Any]:
        return {"name": self.name, "dates": [d.isoformat() for d in self.dates],
                "count": len(self.dates), "version": self.version,
                "created_at": self.created_at.isoformat(),
                "updated_at": self.updated_at.isoformat()}


def check_name(name: object) -> str:
    if not isinstance(name, str) or not CALENDAR_NAME.fullmatch(name):
        raise InvalidCalendar(
            "expected a calendar name of 1-63 lowercase letters, digits or '-', not beginning "
            f"or ending with '-' (like in-bank-holidays), got {name!r}", field="name")
    return name


def check_dates(values: Iterable[object], field: str = "dates") -> list[date]:
    """The dates, sorted and without repeats, each a YYYY-MM-DD string or a date."""
    given = list(values)
    if field == "dates" and len(given) > MAX_DATES:      # a list sent: counted as sent
        raise InvalidCalendar(f"a calendar holds at most {MAX_DATES} dates, got "
                              f"{len(given)}", field=field)
    dates: set[date] = set()
    for i, value in enumerate(given):
        dates.add(_date(value, f"{field}[{i}]" if field == "dates" else field))
    if len(dates) > MAX_DATES:
        raise InvalidCalendar(f"a calendar holds at most {MAX_DATES} dates, got {len(dates)}",
                              field=field)
    return sorted(dates)


_ISO_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _date(value: object, field: str) -> date:
    if isinstance(value, date) and not isinstance(value, datetime):
        day = value
    elif isinstance(value, str) and _ISO_DATE.fullmatch(value):
        try:
            day = date.fromisoformat(value)
        except ValueError:
            raise InvalidCalendar(f"{field}: {value!r} is not a real date", field=field) from None
    else:
        raise InvalidCalendar(f"{field}: expected a date YYYY-MM-DD (like 2026-12-25), got "
                              f"{value!r}", field=field)
    if not EARLIEST <= day <= LATEST:
        raise InvalidCalendar(f"{field}: {day.isoformat()} is out of range {EARLIEST} to "
                              f"{LATEST}", field=field)
    return day


# -- the store -----------------------------------------------------------------------------

def set_calendar(conn: psycopg.Connection[Any], tenant_id: int, name: str,
                 dates: Sequence[date], *, now: datetime | None = None) -> Calendar:
    """Create or replace the tenant's calendar ``name``; its live jobs plan their next fires
    with the new dates at the next tick (due from ``now``, the database's by default).
    Unchanged dates change nothing (same version)."""
    check_name(name)
    with conn.transaction():
        with conn.cursor(row_factory=class_row(Calendar)) as cur:
            written = cur.execute(Q.set_calendar, {"tenant_id": tenant_id, "name": name,
                                                   "dates": list(dates)}).fetchone()
        if written is None:
            return get_calendar(conn, tenant_id, name)
        conn.execute(Q.nudge_calendar_jobs, {"tenant_id": tenant_id, "name": name, "now": now})
        conn.execute(Q.notify_jobs_changed)
    return written


def get_calendar(conn: psycopg.Connection[Any], tenant_id: int, name: str) -> Calendar:
    with conn.cursor(row_factory=class_row(Calendar)) as cur:
        found = cur.execute(Q.get_calendar, {"tenant_id": tenant_id, "name": name}).fetchone()
    if found is None:
        raise CalendarNotFound(f"no calendar named {name!r}")
    return found


def list_calendars(conn: psycopg.Connection[Any], tenant_id: int) -> list[Calendar]:
    with conn.cursor(row_factory=class_row(Calendar)) as cur:
        return cur.execute(Q.list_calendars, {"tenant_id": tenant_id}).fetchall()


def delete_calendar(conn: psycopg.Connection[Any], tenant_id: int, name: str) -> None:
    """Delete a calendar no live job names; raises CalendarInUse (with some of the jobs)
    or CalendarNotFound."""
    params = {"tenant_id": tenant_id, "name": name}
    with conn.transaction():
        if conn.execute(Q.lock_calendar, params).fetchone() is None:
            raise CalendarNotFound(f"no calendar named {name!r}")
        users = [row[0] for row in conn.execute(Q.calendar_users, {**params, "limit": 5})]
        if not users:
            conn.execute(Q.delete_calendar, params)
            return
    shown = ", ".join(str(u) for u in users)
    raise CalendarInUse(f"calendar {name!r} is used by live jobs (ids {shown}"
                        f"{', …' if len(users) == 5 else ''}); change or cancel them first",
                        job_ids=users)


def refuse_unknown(conn: psycopg.Connection[Any], tenant_id: int,
                   names: Iterable[str | None]) -> dict[str, InvalidJob]:
    """For each name the tenant has no calendar of, the refusal of a job naming it."""
    wanted = sorted({n for n in names if n is not None})
    if not wanted:
        return {}
    known = {row[0] for row in conn.execute(Q.known_calendars, {
        "tenant_id": tenant_id, "names": wanted})}
    return {name: InvalidJob(f"calendar.exclude: the tenant has no calendar named {name!r} "
                             "(create it first: crondepot calendars set, or PUT "
                             "/v1/calendars/{name})", field="calendar.exclude")
            for name in wanted if name not in known}


class TickCalendars:
    """The dates of the calendars a tick's claimed jobs name: one query per tick (only when
    a claimed job names one), the sets kept by (tenant, name, version) across ticks so
    the plans' memo groups jobs of one calendar together."""

    def __init__(self) -> None:
        self._sets: dict[tuple[int, str, int], frozenset[date]] = {}

    def load(self, conn: psycopg.Connection[Any],
             wanted: Iterable[tuple[int, str]]) -> dict[tuple[int, str], frozenset[date]]:
        pairs = sorted(set(wanted))
        if not pairs:
            return {}
        found: dict[tuple[int, str], frozenset[date]] = {}
        for tenant_id, name, version, dates in conn.execute(Q.tick_calendars, {
                "tenant_ids": [t for t, _ in pairs], "names": [n for _, n in pairs]}):
            key = (tenant_id, name, version)
            if key not in self._sets:
                if len(self._sets) > 10_000:
                    self._sets.clear()
                self._sets[key] = frozenset(dates)
            found[(tenant_id, name)] = self._sets[key]
        return found


# -- files ---------------------------------------------------------------------------------

def parse_file(text: str, *, filename: str = "") -> list[date]:
    """The dates of an iCalendar file (``BEGIN:VCALENDAR``) or of a plain list (one
    YYYY-MM-DD a line, ``#`` comments and blank lines ignored)."""
    if text.lstrip().upper().startswith("BEGIN:VCALENDAR") or filename.endswith(".ics"):
        return parse_ics(text)
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        value = line.split("#", 1)[0].strip()
        if value:
            values.append(_date(value, f"line {number}"))
    return check_dates(values, field="file")


def parse_ics(text: str | bytes) -> list[date]:
    """Every date of the all-day events (VEVENT with a DTSTART;VALUE=DATE) of an iCalendar
    file: a multi-day event gives each of its days (DTEND is exclusive, RFC 5545), a
    recurring one (RRULE, RDATE, EXDATE) each occurrence in RRULE_YEARS years from its start.
    An event with a time of day is refused: a calendar is of dates."""
    import icalendar  # only the import path pays for it

    try:
        calendar = icalendar.Calendar.from_ical(text)
    except (ValueError, KeyError, IndexError, TypeError) as exc:   # its parser's refusals
        raise InvalidCalendar(f"not an iCalendar file: {exc}", field="file") from None
    dates: list[date] = []
    for event in calendar.walk("VEVENT"):
        dates += _event_dates(event)
    if not dates:
        raise InvalidCalendar("the iCalendar file has no all-day event (VEVENT)", field="file")
    return check_dates(dates, field="file")


def _event_dates(event: Any) -> list[date]:
    summary = str(event.get("SUMMARY", "an event"))
    start = event.get("DTSTART")
    if start is None or isinstance(start.dt, datetime) or not isinstance(start.dt, date):
        raise InvalidCalendar(f"{summary!r}: not an all-day event (its DTSTART has a time of "
                              "day); a calendar is of dates", field="file")
    first: date = start.dt
    end = event.get("DTEND")
    length = 1
    if end is not None and isinstance(end.dt, date) and not isinstance(end.dt, datetime):
        length = max((end.dt - first).days, 1)
    elif event.get("DURATION") is not None:
        length = max(event.get("DURATION").dt.days, 1)
    starts = [first]
    if event.get("RRULE") is not None or event.get("RDATE") is not None:
        starts = _occurrences(event, first, summary)
    return [s + timedelta(days=n) for s in starts for n in range(length)]


def _occurrences(event: Any, first: date, summary: str) -> list[date]:
    """The starts of a recurring all-day event, by its RRULE, RDATE and EXDATE."""
    from dateutil.rrule import rruleset, rrulestr  # type: ignore[import-untyped]

    rules = rruleset()
    start = datetime.combine(first, datetime.min.time())
    for rrule in _as_list(event.get("RRULE")):
        try:
            rules.rrule(rrulestr(rrule.to_ical().decode(), dtstart=start,
                                 ignoretz=True))
        except (ValueError, TypeError) as exc:
            raise InvalidCalendar(f"{summary!r}: its RRULE cannot be read: {exc}",
                                  field="file") from None
    for prop, add in (("RDATE", rules.rdate), ("EXDATE", rules.exdate)):
        for value in _as_list(event.get(prop)):
            for when in value.dts:
                day = when.dt.date() if isinstance(when.dt, datetime) else when.dt
                add(datetime.combine(day, datetime.min.time()))
    if event.get("RRULE") is None:
        rules.rdate(start)
    until = datetime(first.year + RRULE_YEARS, first.month, 1)
    return [when.date() for when in rules.between(start, until, inc=True)]


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]
