"""Several schedules on one job: a list of cron expressions read on one zone's clock
(``"cron": ["0 9 * * 1-5", "0 10 * * 6"]``), whose fires are the union of theirs.

Each expression keeps its own DST rules (a fixed-time one is moved at a gap, a wildcard one
is not); fires of two expressions on one instant are one fire, so one run and one run id.
Pure: no clock, no database.

The stored form is the expressions joined by ``SEPARATOR`` (``"0 9 * * 1-5 | 0 10 * * 6"``):
the one string the scheduler tick, the ledger check and backfill key a timetable by. No
expression contains ``|`` (the parser refuses it), so the split is exact.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from datetime import datetime

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable.cron import expand_hash as expand_one
from crondepot.timetable.dst import Fire, FireStream
from crondepot.timetable.table import Timetable

__all__ = ["MAX_CRONS", "SEPARATOR", "Several", "expand_hash", "several_text", "split"]

SEPARATOR = " | "
MAX_CRONS = 20


def several_text(crons: Iterable[str]) -> str:
    return SEPARATOR.join(c.strip() for c in crons)


def split(text: str) -> list[str]:
    """The expressions of a stored text (one for a plain cron)."""
    return [part.strip() for part in text.split("|")]


def expand_hash(text: str, hash_key: str) -> str:
    """``cron.expand_hash`` of each expression, joined again: what the ledger groups H jobs
    by, so two jobs whose lists expand alike share one computation."""
    return several_text(expand_one(part, hash_key) for part in split(text))


class Several(FireStream):
    """The union of several Timetables on one zone, equal instants collapsed."""

    __slots__ = ("cron", "tables", "tz")

    def __init__(self, tables: Iterable[Timetable]) -> None:
        self.tables = tuple(tables)
        if not 1 <= len(self.tables) <= MAX_CRONS:
            raise InvalidSchedule(f"expected 1 to {MAX_CRONS} cron expressions, got "
                                  f"{len(self.tables)}", field="cron")
        zones = {t.tz for t in self.tables}
        if len(zones) != 1:
            raise InvalidSchedule("several cron expressions share one zone", field="tz")
        (self.tz,) = zones
        self.cron = several_text(t.cron for t in self.tables)

    @classmethod
    def from_text(cls, text: str, tz: str, *, hash_key: str | None = None) -> Several:
        return cls(Timetable(part, tz, hash_key=hash_key) for part in split(text))

    def __repr__(self) -> str:
        return f"Several({self.cron!r}, {self.tz!r})"

    @property
    def expanded(self) -> str:
        return several_text(t.expanded for t in self.tables)

    @property
    def fixed_time(self) -> bool:
        return all(t.fixed_time for t in self.tables)

    def fires_after(self, after: datetime) -> Iterator[Fire]:
        """Every fire strictly after ``after`` (aware), in strictly increasing order: each
        stream is strictly increasing, so a fire equal to the last one given is a second
        expression naming the same instant and is dropped (the first expression's Fire,
        with its DST note, stands for both)."""
        streams = [t.fires_after(after) for t in self.tables]   # checks ``after`` now
        return _collapsed(heapq.merge(*streams, key=lambda fire: fire.at))



def _collapsed(fires: Iterator[Fire]) -> Iterator[Fire]:
    last: datetime | None = None
    for fire in fires:
        if last is not None and fire.at == last:
            continue
        last = fire.at
        yield fire
