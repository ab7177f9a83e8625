"""What one due job turns into: the runs to write and the job's next due time (pure).

Given a claimed job and the database's ``now``, work out every run that fell due since the
job's ``next_run_at`` (the catch-up rule), decide for each whether it is still worth running
(the misfire rule), and find the first run not yet due. Nothing here reads a clock or a
database, so every rule is tested by plain function calls.

Rules:
- ``catchup: all`` writes every missed run, at most ``max_catchup`` of them: when the bound
  bites, the most recent ``max_catchup`` are kept and the older ones are written ``skipped``
  with reason ``catchup_bound`` (so nothing vanishes and the cut is counted).
- ``catchup: latest`` keeps only the most recent due run; the others are ``skipped`` with
  reason ``catchup_latest``.
- ``misfire`` judges each kept run: ``run_late`` always runs; ``skip_after`` skips a run
  written more than ``seconds`` after its due time (reason ``misfire_deadline``);
  ``skip_after_local_time`` skips a run written after the first ``until`` wall-clock time
  (job's zone) at or after its nominal time — 20:00 the same day for a 9:00 reminder
  (reason ``misfire_local_deadline``). A run written in time carries that deadline
  (``deadline_at``): the worker's claim and each retry check it again.
- ``max_runs``: a job writes at most ``remaining`` more fires (max_runs minus the fires it
  has had); every fire counts, a skipped one too.
- ``window`` (a delivery window, timetable/delivery.py): a kept run whose due time falls
  outside it is, with ``outside: defer``, queued with its due time moved to the window's
  next opening (its run id stays the nominal time); with ``skip``, written ``skipped`` with
  reason ``delivery_window``. The misfire deadline is the fire's own, from its nominal due
  time; a deferred run whose deadline comes before the opening is written skipped with the
  misfire reason (it could never be sent in time). The plan says when the job ends:
  ``max_runs`` once that many are written, else the schedule's own reason (``completed``
  for an ``at`` job, ``end_at`` for a closed window) when no fire follows.
- ``calendar`` (timetable/calendar.py; the dates passed in by the caller): a fire whose local
  date is in the job's calendar is written ``skipped`` (reason ``calendar``) or keeps its run
  id and nominal time with a due time on the nearest business day after or before. A fire
  is written once its *write time* has passed: its nominal time plus spread, or its moved
  due time when earlier (previous_business_day). Fires are written in nominal order, so one
  moved earlier brings the fires before it along (each with its own due time, still ahead:
  "written ahead", never cut by the catch-up rules); ``next_run_at`` is the earliest write
  time of the fires left, looked for up to the first business day after the next fire.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from crondepot.base.vocab import EndReason, SkipReason
from crondepot.timetable import run_id
from crondepot.timetable.calendar import Rule
from crondepot.timetable.delivery import DeliveryWindow
from crondepot.timetable.zone import place


@dataclass(frozen=True, slots=True, kw_only=True)
class DueJob:
    """The fields of a claimed job that the plan needs."""

    id: int
    next_nominal_at: datetime
    spread_offset: timedelta
    catchup: Literal["all", "latest"]
    max_catchup: int
    misfire_policy: Literal["run_late", "skip_after", "skip_after_local_time"]
    misfire_seconds: int | None
    misfire_until: time | None
    tz: str
    calendar: Rule | None = None     # the exclusion calendar's rule, its dates included
    window: DeliveryWindow | None = None   # the delivery window in force (job's or tenant's)


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedRun:
    run_id: str
    nominal_at: datetime
    due_at: datetime
    skip_reason: SkipReason | None   # None: queued for the workers
    deadline_at: datetime | None = None   # the misfire deadline; None: run however late
    deferred: bool = False   # its due time is its delivery window's next opening


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    runs: list[PlannedRun]
    next_nominal_at: datetime | None   # None: the timetable has no further fire
    next_run_at: datetime | None
    ended: EndReason | None = None     # the job ends with this plan, and why


# (instant) -> the next fire strictly after it, or None; memoised by the caller.
NextFire = Callable[[datetime], datetime | None]


def plan(job: DueJob, now: datetime, next_fire: NextFire, *, owed: bool = False,
         remaining: int | None = None, end_reason: EndReason = "end_at") -> Plan:
    """The runs of ``job`` that are due at ``now``, judged, and where the job goes next.

    With ``owed``, every fire whose *nominal* time has passed is written, even one whose due
    time (nominal + spread) is still ahead: a change to the job (edit, pause, cancel) applies
    to fires after it, so the fires before it are settled first (docs/ledger.md), with their due
    times as they were.
    """
    timing = _Timing(job, owed)
    nominals, nominal = _due_nominals(job, now, next_fire, timing, remaining)
    # The catch-up rules cut missed fires: those due by their nominal time (a fire a holiday
    # moved earlier, and those written along with it, are not missed).
    cutoff = now if owed else now - job.spread_offset
    due = [n for n in nominals if n <= cutoff]
    keep = _kept_count(job, len(due))
    cut = set(due[: len(due) - keep])
    reason: SkipReason = "catchup_bound" if job.catchup == "all" else "catchup_latest"
    runs = [_cut(job, n, reason) if n in cut else _judge(job, n, now, timing)
            for n in nominals]
    ended: EndReason | None = None
    if remaining is not None and len(nominals) >= remaining:
        ended, nominal = "max_runs", None
    elif nominal is None:
        ended = end_reason
    left = None if remaining is None else remaining - len(nominals)
    next_run_at = _next_run_at(job, nominal, next_fire, timing, left)
    return Plan(runs=runs, next_nominal_at=nominal, next_run_at=next_run_at, ended=ended)


# A fire's verdict before its run id: (due time, misfire deadline, skip reason, deferred).
Verdict = tuple[datetime, datetime | None, SkipReason | None, bool]


class OnTime:
    """The fires of one job judged as the tick that writes each at its write time judges
    it (no catch-up rule cuts a fire written on time). A forecast of the fires ahead
    (crondepot.forecast) reads them this way, for a job whose fires are written one at a
    time: ``ahead`` False (no calendar rule moves fires earlier, bringing others along)."""

    __slots__ = ("_timing", "job")

    def __init__(self, job: DueJob) -> None:
        self.job, self._timing = job, _Timing(job, owed=False)

    @property
    def ahead(self) -> bool:
        return self._timing.looks_ahead()

    def verdict(self, nominal: datetime) -> Verdict:
        return _verdict(self.job, nominal, self._timing.write_time(nominal), self._timing)


class _Timing:
    """When each fire is due and when it must be written, by the job's calendar rule."""

    def __init__(self, job: DueJob, owed: bool) -> None:
        self.job, self.owed = job, owed
        self._shift: dict[datetime, datetime | None] = {}

    def shifted(self, nominal: datetime) -> datetime | None:
        """The instant (before spread) the fire is due at; None: the calendar skips it."""
        rule = self.job.calendar
        if rule is None or not rule.dates:
            return nominal
        if nominal not in self._shift:
            self._shift[nominal] = rule.shift(nominal).at
        return self._shift[nominal]

    def due(self, nominal: datetime) -> datetime:
        return (self.shifted(nominal) or nominal) + self.job.spread_offset

    def write_time(self, nominal: datetime, owed: bool | None = None) -> datetime:
        """The instant from which the fire is written: its nominal time (owed) or due time
        as without a calendar, or its moved due time if that is earlier."""
        owed = self.owed if owed is None else owed
        if owed:
            # A change settles the fires before it, by nominal time only: a fire after it
            # is the new document's, even one a holiday moved before it.
            return nominal
        return min(nominal + self.job.spread_offset, self.due(nominal))

    def looks_ahead(self) -> bool:
        rule = self.job.calendar
        return (not self.owed and rule is not None and rule.moves_earlier
                and bool(rule.dates))


# A fire moved earlier is looked for among at most this many fires after the next one (a
# minutely cron over a week of holidays has more: its later moved fires are written late).
LOOKAHEAD_FIRES = 2000


def _due_nominals(job: DueJob, now: datetime, next_fire: NextFire, timing: _Timing,
                  remaining: int | None) -> tuple[list[datetime], datetime | None]:
    """(the fires to write, the next fire not written)."""
    nominals: list[datetime] = []
    pending: list[datetime] = []       # looked at, not due; written if a later one is
    horizon = None
    nominal: datetime | None = job.next_nominal_at
    while nominal is not None and (
            remaining is None or len(nominals) + len(pending) < remaining):
        if timing.write_time(nominal) <= now:
            nominals += [*pending, nominal]
            pending, horizon = [], None
        elif not timing.looks_ahead():
            break
        else:
            assert job.calendar is not None
            horizon = horizon or job.calendar.latest_mover(nominal)
            if job.calendar.local_date(nominal) > horizon or len(pending) >= LOOKAHEAD_FIRES:
                break
            pending.append(nominal)
        nominal = next_fire(nominal)
    return nominals, pending[0] if pending else nominal


def _next_run_at(job: DueJob, nominal: datetime | None, next_fire: NextFire,
                 timing: _Timing, left: int | None) -> datetime | None:
    """When the job is due again: the earliest write time of the fires left (the next one's,
    or a later one's moved earlier than it; of the ``left`` fires max_runs still allows)."""
    if nominal is None:
        return None
    first = timing.write_time(nominal, owed=False)
    rule = job.calendar
    if rule is None or not rule.moves_earlier or not rule.dates:
        return first
    horizon = rule.latest_mover(nominal)
    later = next_fire(nominal)
    for _ in range(min(LOOKAHEAD_FIRES, LOOKAHEAD_FIRES if left is None else left - 1)):
        if later is None or rule.local_date(later) > horizon:
            break
        first = min(first, timing.write_time(later, owed=False))
        later = next_fire(later)
    return first


def _kept_count(job: DueJob, missed: int) -> int:
    if job.catchup == "latest":
        return min(missed, 1)
    return min(missed, job.max_catchup)


def _cut(job: DueJob, nominal: datetime, reason: SkipReason) -> PlannedRun:
    return PlannedRun(run_id=run_id(job.id, nominal), nominal_at=nominal,
                      due_at=nominal + job.spread_offset, skip_reason=reason)


def _judge(job: DueJob, nominal: datetime, now: datetime, timing: _Timing) -> PlannedRun:
    due, deadline, reason, deferred = _verdict(job, nominal, now, timing)
    return PlannedRun(run_id=run_id(job.id, nominal), nominal_at=nominal, due_at=due,
                      skip_reason=reason, deadline_at=deadline, deferred=deferred)


def _verdict(job: DueJob, nominal: datetime, now: datetime, timing: _Timing) -> Verdict:
    base = timing.shifted(nominal)
    if base is None:
        return nominal + job.spread_offset, None, "calendar", False
    due = base + job.spread_offset
    # the deadline is the one the fire has without a window: from its (moved) due time
    deadline = misfire_deadline(job, base, due)
    reason: SkipReason | None = None
    opening = job.window.opening(due, job.tz) if job.window is not None else None
    deferred = False
    if opening is not None:
        if job.window is not None and job.window.outside == "skip":
            reason = "delivery_window"
        else:
            due, deferred = opening, True   # queued now, claimed when the window opens
    if reason is None and deadline is not None and (
            now > deadline or (opening is not None and deadline < due)):
        # past its deadline, or its deadline comes before the window opens
        reason = ("misfire_deadline" if job.misfire_policy == "skip_after"
                  else "misfire_local_deadline")
    return due, deadline, reason, deferred and reason is None


def misfire_deadline(job: DueJob, nominal: datetime, due: datetime) -> datetime | None:
    """The last instant the run of ``nominal`` may start, by the job's misfire rule (None:
    ``run_late``, no deadline). Written with the run: the claim and each retry check it.
    A fire the calendar moved is judged from where it moved to (``nominal`` is then the
    moved instant): a 20:00 local deadline is the moved day's."""
    if job.misfire_policy == "skip_after":
        assert job.misfire_seconds is not None
        return due + timedelta(seconds=job.misfire_seconds)
    if job.misfire_policy == "skip_after_local_time":
        assert job.misfire_until is not None
        return local_deadline(nominal, job.misfire_until, job.tz)
    return None


def local_deadline(nominal: datetime, until: time, tz: str) -> datetime:
    """The first ``until`` wall-clock time in ``tz`` at or after ``nominal``, as an instant.

    A wall-clock time that does not exist that day (a DST gap) counts as the instant the
    clocks changed; one that happens twice counts as its second, later occurrence, so the
    run gets the longer window.
    """
    zone = ZoneInfo(tz)
    local = nominal.astimezone(zone)
    for day in (local.date(), local.date() + timedelta(days=1)):
        where = place(zone, datetime.combine(day, until))
        candidate = (where.second or where.first).replace(tzinfo=UTC)
        if candidate >= nominal:
            return candidate
    raise AssertionError("unreachable: a wall-clock time recurs within two days")
