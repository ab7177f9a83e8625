"""A job's schedule: its timetable (a cron, several, an interval, or one ``at`` instant)
inside its window.

This module owns the three limits a job document may put on its timetable (docs/schedules.md):
``at`` (one fire at an instant instead of a cron), ``start_at`` (no fire before it) and
``end_at`` (no fire after it; both bounds inclusive). ``max_runs`` is not here: it counts
the fires the job has had, which only the job's row knows (scheduler/plan.py applies it).
A Schedule answers the same questions as a Timetable, so the scheduler, the store, the
ledger check and the CLI read a windowed job exactly as they read a plain one. Pure: no
clock, no database.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from itertools import islice

from crondepot.base.vocab import EndReason
from crondepot.timetable.dst import Fire
from crondepot.timetable.interval import Interval, is_interval_text
from crondepot.timetable.several import Several
from crondepot.timetable.table import Timetable
from crondepot.timetable.zone import validate_zone

__all__ = ["AnyTimetable", "EndReason", "Schedule", "schedule", "timetable_of"]

# What a stored timetable text reads as: one cron, several (joined by " | "), or an interval
# ("@every 90s from …"). All three answer fires_after / next_fires / fires_between alike.
AnyTimetable = Timetable | Several | Interval


def timetable_of(text: str, tz: str, *, hash_key: str | None = None) -> AnyTimetable:
    """The timetable a stored ``cron`` text names; raises InvalidSchedule naming the field.

    Every reader of a stored job's timetable comes here (through ``schedule``), so the
    scheduler tick, the store, the ledger check, backfill and the previews read a list of
    crons and an interval alike."""
    if is_interval_text(text):
        return Interval.from_text(text, tz)
    if "|" in text:
        return Several.from_text(text, tz, hash_key=hash_key)
    return Timetable(text, tz, hash_key=hash_key)

_TINY = timedelta(microseconds=1)


class Schedule:
    """The fires of a job: a Timetable's (or the one ``at``), cut to [start_at, end_at]."""

    __slots__ = ("_at", "_end", "_start", "_table", "_zone", "tz")

    def __init__(self, table: AnyTimetable | None, tz: str, *, at: datetime | None = None,
                 start_at: datetime | None = None, end_at: datetime | None = None) -> None:
        if (table is None) == (at is None):
            raise ValueError("a schedule has a timetable or an at instant, exactly one")
        self._table, self._at, self.tz = table, at, tz
        self._zone = validate_zone(tz)
        self._start, self._end = start_at, end_at

    def __repr__(self) -> str:
        what = repr(self._table) if self._table is not None else f"at={self._at}"
        return f"Schedule({what}, start_at={self._start}, end_at={self._end})"

    @property
    def cron(self) -> str | None:
        return self._table.cron if self._table is not None else None

    @property
    def expanded(self) -> str | None:
        return self._table.expanded if self._table is not None else None

    @property
    def fixed_time(self) -> bool:
        return self._table.fixed_time if self._table is not None else True

    @property
    def end_reason(self) -> EndReason:
        """Why no fire follows the last one (asked once ``fires_after`` ran out)."""
        return "completed" if self._at is not None else "end_at"

    def fires_after(self, after: datetime) -> Iterator[Fire]:
        """Every fire strictly after ``after`` (aware) inside the window, in order."""
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError(f"after must be an aware datetime, got naive {after.isoformat()}")
        if self._at is not None:
            return iter([self._at_fire()] if self._at > after else [])
        assert self._table is not None
        start = after if self._start is None else max(after, self._start - _TINY)
        return self._until_end(self._table.fires_after(start))

    def _at_fire(self) -> Fire:
        assert self._at is not None
        at = self._at.astimezone(UTC)
        local = at.astimezone(self._zone)
        return Fire(at=at, local=local, scheduled_local=local.replace(tzinfo=None), note=None)

    def _until_end(self, fires: Iterator[Fire]) -> Iterator[Fire]:
        for fire in fires:
            if self._end is not None and fire.at > self._end:
                return
            yield fire

    def next_fires(self, after: datetime, count: int) -> list[datetime]:
        return [fire.at for fire in islice(self.fires_after(after), count)]

    def fires_between(self, after: datetime, until: datetime, limit: int) -> list[Fire]:
        """The fires with ``after < at <= until``, the earliest ``limit`` of them."""
        fires: list[Fire] = []
        for fire in islice(self.fires_after(after), limit):
            if fire.at > until:
                break
            fires.append(fire)
        return fires


def schedule(cron: str | None, tz: str, *, hash_key: str | None = None,
             at: datetime | None = None, start_at: datetime | None = None,
             end_at: datetime | None = None) -> Schedule:
    """The Schedule of a job's fields; raises InvalidSchedule for a bad cron or zone."""
    table = timetable_of(cron, tz, hash_key=hash_key) if cron is not None else None
    return Schedule(table, tz, at=at if table is None else None, start_at=start_at,
                    end_at=end_at)
