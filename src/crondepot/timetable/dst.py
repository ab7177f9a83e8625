"""The DST firing rules: from the local times a cron expression names to the fires it makes.

This module owns crondepot's answer to clock changes, which follows Vixie cron / cronie:

* A time that happens once fires once.
* **Gap** (clocks go forward): a *fixed-time* job whose time was skipped fires once, at the
  change (note ``"moved"``); several skipped times, and a time that falls exactly on the
  change, collapse into that one fire (note ``"merged"``). A wildcard/step-hour job has no
  fire there: the skipped times do not exist, and it fires again at its next real time.
* **Repeat** (clocks go back): a fixed-time job fires on the first pass only (note
  ``"repeated-once"``); a wildcard/step-hour job fires at every real matching instant, the
  second pass included (note ``"second-pass"``).

"Fixed-time" is ``CronSpec.fixed_time``: a minute field that does not begin with ``*`` (as
cronie's MIN_STAR reads it: ``* 2 * * *`` is a wildcard job, with no fire in a skipped 2
o'clock hour and both passes of a repeated one) and no ``*`` or ``/`` in the hour. The output
is strictly increasing in UTC: second-pass fires are held back until the first pass is over,
and a moved fire until it is clear whether the next one lands on the same instant.
It never looks at the clock; ``after`` is always given.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from zoneinfo import ZoneInfo

from crondepot.timetable.cron import CronSpec
from crondepot.timetable.zone import Kind, place, wall_clock_start

__all__ = ["Fire", "fire_stream"]

MOVED = "moved"
MERGED = "merged"
REPEATED_ONCE = "repeated-once"
SECOND_PASS = "second-pass"


@dataclass(frozen=True, slots=True, kw_only=True)
class Fire:
    """One moment a job is due.

    ``at`` is the aware UTC instant; ``local`` the same instant on the job's clock;
    ``scheduled_local`` the naive wall-clock time the expression named (the first one, when
    several merged); ``note`` says how a clock change shaped it: None, ``"moved"``,
    ``"merged"``, ``"repeated-once"`` or ``"second-pass"``.

    Compare instants through ``at``: by PEP 495 a second-pass ``local`` (fold=1) never
    compares equal to a datetime in another zone, not even to its own ``at``.
    """

    at: datetime
    local: datetime
    scheduled_local: datetime
    note: str | None


class FireStream:
    """``next_fires`` and ``fires_between`` for a timetable that has ``fires_after`` (an
    interval, a list of crons): the questions the scheduler, the ledger and the previews
    ask, answered from the one stream."""

    __slots__ = ()

    def fires_after(self, after: datetime) -> Iterator[Fire]:
        raise NotImplementedError

    def next_fires(self, after: datetime, count: int) -> list[datetime]:
        return [fire.at for fire in islice(self.fires_after(after), max(count, 0))]

    def fires_between(self, after: datetime, until: datetime, limit: int) -> list[Fire]:
        """The fires with ``after < at <= until``, the earliest ``limit`` of them."""
        fires: list[Fire] = []
        for fire in self.fires_after(after):
            if fire.at > until or len(fires) >= limit:
                break
            fires.append(fire)
        return fires


# How each ``Fire.note`` reads for people (``crondepot next``, a job's preview, the plan of
# ``crondepot apply``); ``{scheduled}`` is the fire's ``scheduled_local``.
FIRE_NOTES = {
    "moved": "DST gap: scheduled {scheduled}, fired at the change",
    "merged": "DST gap: {scheduled} and others fired once, at the change",
    "repeated-once": "DST repeat: fired on the first pass only",
    "second-pass": "DST repeat: second pass",
}


# (instant as naive UTC, scheduled wall-clock time, note)
_Due = tuple[datetime, datetime, str | None]


class _Sequencer:
    """Puts the dues read in wall-clock order into UTC order, merging those on one instant.

    Only two things can arrive out of UTC order or on a shared instant: second-pass dues
    (held in ``_later`` until something after them arrives) and a moved due (held in
    ``_moved`` until the next due shows whether it lands on the same change instant).
    """

    __slots__ = ("_later", "_moved")

    def __init__(self) -> None:
        self._later: deque[_Due] = deque()
        self._moved: _Due | None = None

    def defer(self, due: _Due) -> None:
        self._later.append(due)

    def add(self, due: _Due) -> list[_Due]:
        """Take the next due; return the dues now known to come first, in order."""
        moved = self._moved
        if moved is None and not self._later:
            if due[2] == MOVED:
                self._moved = due
                return []
            return [due]
        if moved is not None and moved[0] == due[0]:
            self._moved = (moved[0], moved[1], MERGED)
            return []
        ready: list[_Due] = []
        if moved is not None:
            self._moved = None
            ready += self._release_before(moved[0])
            ready.append(moved)
        ready += self._release_before(due[0])
        if due[2] == MOVED:
            self._moved = due
        else:
            ready.append(due)
        return ready

    def drain(self) -> list[_Due]:
        """Everything still held, in order (the matches ran out)."""
        held = list(self._later)
        if self._moved is not None:
            held.append(self._moved)
        self._later.clear()
        self._moved = None
        return sorted(held, key=lambda due: due[0])

    def _release_before(self, instant: datetime) -> list[_Due]:
        released: list[_Due] = []
        while self._later and self._later[0][0] < instant:
            released.append(self._later.popleft())
        return released


def _read(spec: CronSpec, zone: ZoneInfo, wall: datetime, sequencer: _Sequencer) -> list[_Due]:
    """Apply the rules to one matching wall-clock time; return the dues now in order."""
    placement = place(zone, wall)
    if placement.kind is Kind.ONCE:
        return sequencer.add((placement.first, wall, None))
    if placement.kind is Kind.SKIPPED:
        return sequencer.add((placement.first, wall, MOVED)) if spec.fixed_time else []
    if spec.fixed_time:
        return sequencer.add((placement.first, wall, REPEATED_ONCE))
    ready = sequencer.add((placement.first, wall, None))
    assert placement.second is not None  # a REPEATED placement always has both passes
    sequencer.defer((placement.second, wall, SECOND_PASS))
    return ready


def _fire(zone: ZoneInfo, due: _Due) -> Fire:
    at = due[0].replace(tzinfo=UTC)
    return Fire(at=at, local=at.astimezone(zone), scheduled_local=due[1], note=due[2])


def fire_stream(spec: CronSpec, zone: ZoneInfo, after: datetime) -> Iterator[Fire]:
    """Every fire strictly after ``after`` (a naive UTC instant), in strictly increasing order.

    Dues at or before ``after`` are read (the wall-clock start may be up to one shift early,
    see ``wall_clock_start``) and dropped here; the same comparison against the last fire
    keeps the output strictly increasing whatever the zone data says.
    """
    sequencer = _Sequencer()
    last = after
    for wall in spec.matches_from(wall_clock_start(zone, after)):
        for due in _read(spec, zone, wall, sequencer):
            if due[0] > last:
                last = due[0]
                yield _fire(zone, due)
    for due in sequencer.drain():
        if due[0] > last:
            last = due[0]
            yield _fire(zone, due)
