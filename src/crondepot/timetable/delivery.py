"""Local delivery windows: the hours of the day a run may reach its target (pure).

A window is ``from``..``to`` local wall-clock time in the job's zone, on some days of the
week (``days``, default every day), and what happens to a fire that falls due outside it
(``outside``: ``defer`` to the next opening, or ``skip``). ``from`` after ``to`` is an
overnight window (22:00-06:00): it opens on a listed day and closes on the next morning, so
``days`` names the day a window *opens*. ``from`` equal to ``to`` is refused (it would mean
either always or never).

DST: a window opens the first instant the local clock shows ``from`` and closes the first
instant it shows ``to``; a wall-clock time skipped by a clock change counts as the change
instant (``zone.place``). So a 02:30 opening on a spring-forward day opens at 03:00 local,
and a window is never opened twice in one local day.

This module decides nothing about runs: ``scheduler/plan.py`` applies a window to a fire,
the worker (``worker/execute.py``) to a claimed run. No clock, no database.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import lru_cache
from typing import Any, Literal

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable.days import DAY_NAMES, format_days, weekdays
from crondepot.timetable.zone import Placement, place, validate_zone

__all__ = ["DAY_NAMES", "OPT_OUT", "DeliveryWindow", "InvalidWindow", "parse_days",
           "parse_window", "resolve"]

ALL_DAYS = frozenset(range(7))
# What a job says to have no window even when its tenant has a default.
OPT_OUT = "none"
Outside = Literal["defer", "skip"]
OUTSIDE: tuple[Outside, ...] = ("defer", "skip")
_LOCAL_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
_FIELDS = frozenset({"from", "to", "days", "outside"})


class InvalidWindow(ValueError):
    """A window that cannot be read; ``field`` is its JSON path inside the window."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryWindow:
    start: time                       # "from"
    end: time                         # "to"; before start: overnight
    days: frozenset[int] = ALL_DAYS   # weekdays (0 = Monday) on which the window opens
    outside: Outside = "defer"

    @property
    def overnight(self) -> bool:
        return self.end < self.start

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"from": self.start.strftime("%H:%M"),
                               "to": self.end.strftime("%H:%M")}
        if self.days != ALL_DAYS:
            doc["days"] = format_days(self.days)
        doc["outside"] = self.outside
        return doc

    @property
    def text(self) -> str:
        """In one line, for people: "09:00-21:00 mon-sat, outside: defer"."""
        days = "every day" if self.days == ALL_DAYS else format_days(self.days)
        return (f"{self.start:%H:%M}-{self.end:%H:%M} {days}"
                f"{' (overnight)' if self.overnight else ''}, outside: {self.outside}")

    def _bounds(self, day: date, tz: str) -> tuple[datetime, datetime]:
        """The window that opens on local ``day``, as aware UTC instants [open, close)."""
        zone = validate_zone(tz)
        close_day = day + timedelta(days=1) if self.overnight else day
        return (_instant(place(zone, datetime.combine(day, self.start))),
                _instant(place(zone, datetime.combine(close_day, self.end))))

    def opening(self, at: datetime, tz: str) -> datetime | None:
        """None if ``at`` (aware) is inside the window; else the next instant it opens."""
        local_day = at.astimezone(validate_zone(tz)).date()
        # The window that opened yesterday may still be open (overnight), so look back one
        # day; a listed day comes within a week, so eight days ahead always find one.
        for offset in range(-1, 9):
            day = local_day + timedelta(days=offset)
            if day.weekday() not in self.days:
                continue
            opens, closes = self._bounds(day, tz)
            if opens <= at < closes:
                return None
            if opens > at:
                return opens
        raise AssertionError("unreachable: a window has at least one day a week")


def _instant(where: Placement) -> datetime:
    # the first instant the clock shows the time; a skipped time: the change instant
    return where.first.replace(tzinfo=UTC)


def parse_days(text: Any, path: str = "delivery_window.days") -> frozenset[int]:
    """"mon-sat", "mon,wed,fri", "fri-mon" (a range may wrap past Sunday), "sat,sun"."""
    try:
        return weekdays(text, path)
    except InvalidSchedule as exc:
        raise InvalidWindow(str(exc), field=path) from None


def _local_time(window: dict[str, Any], name: str, path: str) -> time:
    value = window.get(name)
    match = _LOCAL_TIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise InvalidWindow(f"expected {path}.{name} to be a local time HH:MM (00:00-23:59), "
                            f"got {json.dumps(value)}", field=f"{path}.{name}")
    return time(int(match[1]), int(match[2]))


def parse_window(value: Any, path: str = "delivery_window") -> DeliveryWindow:
    """A window object; raises InvalidWindow naming the bad member."""
    if not isinstance(value, dict):
        raise InvalidWindow(f"expected {path} to be an object like {{\"from\": \"09:00\", "
                            f"\"to\": \"21:00\"}} or \"{OPT_OUT}\", got {json.dumps(value)}",
                            field=path)
    extra = sorted(set(value) - _FIELDS)
    if extra:
        raise InvalidWindow(f"unknown field {path}.{extra[0]}; allowed: days, from, outside, "
                            "to", field=f"{path}.{extra[0]}")
    start, end = _local_time(value, "from", path), _local_time(value, "to", path)
    if start == end:
        raise InvalidWindow(f"{path}.to equals {path}.from ({start:%H:%M}): a window must "
                            "have a length (from after to is an overnight window)",
                            field=f"{path}.to")
    # days absent: every day; present, it must be days (null too is refused, as the
    # published schema refuses it)
    days = parse_days(value["days"], f"{path}.days") if "days" in value else ALL_DAYS
    outside = value.get("outside", "defer")
    if outside not in OUTSIDE:
        raise InvalidWindow(f"expected {path}.outside to be one of defer, skip, got "
                            f"{json.dumps(outside)}", field=f"{path}.outside")
    return DeliveryWindow(start=start, end=end, days=days, outside=outside)


@lru_cache(maxsize=1024)
def _cached(text: str) -> DeliveryWindow | None:
    value = json.loads(text)
    return None if value == OPT_OUT else parse_window(value)


def resolve(own: Any, tenant_default: Any) -> DeliveryWindow | None:
    """The window in force for a job: its own (``"none"``: no window at all), else its
    tenant's default (stored jsonb values, as read). Windows are few and shared: cached."""
    chosen = tenant_default if own is None else own
    if chosen is None:
        return None
    return _cached(json.dumps(chosen, sort_keys=True))
