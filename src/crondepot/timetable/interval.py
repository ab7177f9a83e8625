"""Intervals: a job that fires every N seconds from an anchor instant (``"every": "90s"``).

An interval is absolute time: its fires are ``anchor + k·every`` for every integer k (negative
too, so an anchor in the past or the future both work), counted in UTC seconds. The zone's
clock plays no part, so clock changes neither move nor merge a fire: an interval is exempt
from DST by definition (docs/schedules.md, "Intervals"). Pure: no clock, no database.

The stored form of an interval is the text ``@every <seconds>s from <anchor>`` (``TEXT``):
the one string the scheduler tick, the ledger check and backfill key a timetable by, as they
key a cron by its expression. It is never accepted as a document's ``cron`` (the document
says ``every`` and ``anchor``); ``interval_text`` writes it, ``Interval.from_text`` reads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable.dst import Fire, FireStream
from crondepot.timetable.zone import validate_zone

__all__ = ["EPOCH", "INTERVAL_PREFIX", "MAX_EVERY_SECONDS", "Interval", "every_seconds",
           "every_text", "interval_text", "is_interval_text"]

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
INTERVAL_PREFIX = "@every "
# Ten years: an interval longer than that is no reminder schedule, and the bound keeps
# every_s (an integer column) and anchor + k·every far from datetime's range.
MAX_EVERY_SECONDS = 10 * 365 * 86_400
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
# An integer count (ASCII digits, no sign, no fraction, no leading zero) and one unit.
EVERY = re.compile(r"([1-9][0-9]{0,9})([smhd])")
TEXT = re.compile(r"@every ([1-9][0-9]*)s(?: from (\S+))?")


def every_seconds(value: object) -> int:
    """The seconds of an ``every`` text ("90s", "15m", "4h", "1d"); raises InvalidSchedule
    (field ``every``) saying what was expected and what was given."""
    expected = ('expected every to be a whole number and a unit s, m, h or d, at least 1 s, '
                'like "90s", "15m", "4h" or "1d"')
    if not isinstance(value, str):
        raise InvalidSchedule(f"{expected}; got {type(value).__name__}", field="every")
    match = EVERY.fullmatch(value)
    if match is None:
        raise InvalidSchedule(f"{expected}; got {value[:40]!r}", field="every")
    seconds = int(match[1]) * UNITS[match[2]]
    if seconds > MAX_EVERY_SECONDS:
        raise InvalidSchedule(f"every {value!r} is {seconds} s; at most {MAX_EVERY_SECONDS} s "
                              "(3650d)", field="every")
    return seconds


def every_text(seconds: int) -> str:
    """The shortest ``every`` text of ``seconds``: the largest unit that divides it whole
    (5400 → "90m", 90 → "90s", 86400 → "1d")."""
    for unit, size in sorted(UNITS.items(), key=lambda item: -item[1]):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    raise AssertionError("every whole number of seconds has a unit")


def interval_text(every_s: int, anchor: datetime | None) -> str:
    """The stored form: ``@every 90s from 2026-12-06T06:00:00+00:00`` (anchor in UTC);
    without an anchor, ``@every 90s`` (anchored at the Unix epoch until the store gives it
    the job's creation instant)."""
    text = f"{INTERVAL_PREFIX}{every_s}s"
    return text if anchor is None else f"{text} from {anchor.astimezone(UTC).isoformat()}"


def is_interval_text(text: str) -> bool:
    return text.startswith(INTERVAL_PREFIX)


class Interval(FireStream):
    """Fires at ``anchor + k·every`` (aware UTC), shown on ``tz``'s clock."""

    __slots__ = ("_zone", "anchor", "cron", "every", "every_s", "tz")

    def __init__(self, every_s: int, anchor: datetime, tz: str) -> None:
        if isinstance(every_s, bool) or not isinstance(every_s, int) or not (
                1 <= every_s <= MAX_EVERY_SECONDS):
            raise InvalidSchedule(f"every must be 1 to {MAX_EVERY_SECONDS} seconds, got "
                                  f"{every_s!r}", field="every")
        if anchor.tzinfo is None or anchor.utcoffset() is None:
            raise InvalidSchedule("anchor must be an aware instant", field="anchor")
        self._zone = validate_zone(tz)
        self.every_s, self.every = every_s, timedelta(seconds=every_s)
        self.anchor = anchor.astimezone(UTC)
        self.tz = tz
        self.cron = interval_text(every_s, self.anchor)

    @classmethod
    def from_text(cls, text: str, tz: str) -> Interval:
        """The interval a stored text names (``interval_text``)."""
        match = TEXT.fullmatch(text.strip())
        if match is None:
            raise InvalidSchedule(f"cannot read the interval {text[:80]!r}; expected "
                                  "'@every <seconds>s from <instant>'", field="every")
        try:
            anchor = EPOCH if match[2] is None else datetime.fromisoformat(match[2])
        except ValueError:
            raise InvalidSchedule(f"cannot read the anchor {match[2]!r}", field="anchor") from None
        return cls(int(match[1]), anchor, tz)

    def __repr__(self) -> str:
        return f"Interval({self.cron!r}, {self.tz!r})"

    @property
    def expanded(self) -> str:
        return self.cron

    @property
    def fixed_time(self) -> bool:
        return True

    def fires_after(self, after: datetime) -> Iterator[Fire]:
        """Every fire strictly after ``after`` (aware), in increasing order."""
        if not isinstance(after, datetime) or after.tzinfo is None or after.utcoffset() is None:
            raise ValueError(f"after must be an aware datetime, got {after!r}")
        # timedelta arithmetic is exact (whole microseconds): floor division gives the last
        # k with anchor + k·every <= after, whatever the sign of after - anchor.
        k = (after.astimezone(UTC) - self.anchor) // self.every + 1
        return self._from(k)

    def _from(self, k: int) -> Iterator[Fire]:
        zone = self._zone
        while True:
            try:
                at = self.anchor + k * self.every
                local = at.astimezone(zone)
            except OverflowError:      # past datetime's range: no fire is left
                return
            yield Fire(at=at, local=local, scheduled_local=local.replace(tzinfo=None), note=None)
            k += 1

