"""The timetable of one job: a cron expression read on an IANA zone's clock.

This module is the facade the scheduler and the API use: it validates the pair (cron, tz)
once, then answers "when are the next fires" and "which fires fell due in this window" as
exact aware UTC instants. The parsing lives in ``cron.py``, the clock in ``zone.py``, the
DST rules in ``dst.py``. It never reads the clock: every question carries its ``after``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import islice

from crondepot.timetable.cron import CronSpec, parse_cron
from crondepot.timetable.dst import Fire, fire_stream
from crondepot.timetable.zone import validate_zone

__all__ = ["Timetable", "next_fires"]


def _naive_utc(moment: object, name: str) -> datetime:
    """``moment`` as a naive UTC datetime; refuses naive input, whose instant is unknown."""
    if not isinstance(moment, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(moment).__name__}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(
            f"{name} must be an aware datetime (with a time zone), got naive {moment.isoformat()};"
            " e.g. datetime(..., tzinfo=timezone.utc)"
        )
    return moment.astimezone(UTC).replace(tzinfo=None)


def _checked_count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be 0 or more, got {value}")
    return value


class Timetable:
    """A validated cron expression on a zone's clock.

    Raises InvalidSchedule (a ValueError) naming the field for a bad expression or zone.
    ``hash_key`` seeds ``H``; crondepot passes the job's key or id (None means "").
    """

    __slots__ = ("_spec", "_zone", "cron", "hash_key", "tz")

    def __init__(self, cron: str, tz: str, *, hash_key: str | None = None) -> None:
        self._spec: CronSpec = parse_cron(cron, hash_key=hash_key)
        self._zone = validate_zone(tz)
        self.cron = cron
        self.tz = tz
        self.hash_key = hash_key

    def __repr__(self) -> str:
        return f"Timetable({self.cron!r}, {self.tz!r}, expanded={self.expanded!r})"

    @property
    def expanded(self) -> str:
        """The five fields after alias and ``H`` expansion."""
        return self._spec.expanded

    @property
    def fixed_time(self) -> bool:
        """True when the minute field does not begin with ``*`` and the hour field has no
        ``*`` and no ``/`` (cronie's fixed-time job): the DST rules depend on it."""
        return self._spec.fixed_time

    def fires_after(self, after: datetime) -> Iterator[Fire]:
        """Every fire strictly after ``after`` (aware), in strictly increasing order."""
        # Checked here, not inside the generator, so a bad argument fails at the call.
        return fire_stream(self._spec, self._zone, _naive_utc(after, "after"))

    def next_fires(self, after: datetime, count: int) -> list[datetime]:
        """The next ``count`` fire instants after ``after``, as aware UTC datetimes."""
        wanted = _checked_count(count, "count")
        if wanted == 0:
            _naive_utc(after, "after")
            return []
        return [fire.at for fire in islice(self.fires_after(after), wanted)]

    def fires_between(self, after: datetime, until: datetime, limit: int) -> list[Fire]:
        """The fires with ``after < at <= until``, the earliest ``limit`` of them."""
        end = _naive_utc(until, "until").replace(tzinfo=UTC)
        wanted = _checked_count(limit, "limit")
        fires: list[Fire] = []
        if wanted == 0:
            _naive_utc(after, "after")
            return fires
        for fire in self.fires_after(after):
            if fire.at > end:
                break
            fires.append(fire)
            if len(fires) == wanted:
                break
        return fires


def next_fires(
    cron: str, tz: str, after: datetime, count: int, *, hash_key: str | None = None
) -> list[datetime]:
    """The next ``count`` fires of ``cron`` on ``tz``'s clock after ``after``, aware UTC.

    Raises InvalidSchedule (a ValueError) for a bad expression or zone, ValueError for a
    naive ``after`` or a negative ``count``.
    """
    return Timetable(cron, tz, hash_key=hash_key).next_fires(after, count)
