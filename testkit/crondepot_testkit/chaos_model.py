"""The chaos run's pure parts (bench/chaos.py), which tests/chaos checks without a database:
its model of each job's fires under the operator's edits and pauses, the runs expected from
that model, and the fault a repeated call is attributed to.

The schedule rules of issue 31 the run carries, a few jobs each (``Job.rule``):
- ``calendar``: the job's calendar holds its local date for the whole run, ``on_excluded:
  skip``: every fire is written ``skipped``/``calendar`` and never called;
- ``window``: a delivery window (``defer``) that opens a couple of minutes into the run: a
  fire before the opening is due at it (deferred, delivered once), a later one at its own
  time, and no call comes before the opening;
- ``overlap``: ``overlap: skip`` and a gateway answer slower than the cron's minute: each
  fire is delivered or written ``skipped``/``overlap``, and no two calls of the job are in
  flight at once (``overlapping_calls``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from crondepot.job.spec import JobSpec
from crondepot.timetable import run_id, spread_offset

TARGET_ALLOWLIST = "127.0.0.1/32"   # the run's fake gateways listen on loopback


def clock(moment: float) -> str:
    """A unix time as the run prints it: HH:MM:SS.mmm, UTC."""
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S.%f")[:-3]


@dataclass
class Fault:
    kind: str                   # kill-worker, kill-scheduler, pg-restart, pause, storm, outage
    at: float                   # time.time() when it began
    target: str = ""
    end: float | None = None    # when it ended (interval faults), or when the restart was ready
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Change:
    """One change the operator made to a job, as the database recorded it."""

    kind: str                   # edit-payload, edit-cron, edit-spread, pause, resume
    at: datetime                # when it took effect: the new timetable's start for a cron
                                # edit; else its transaction's now() (a little earlier)
    spec: JobSpec               # the job's document after it
    paused: bool                # paused after it
    version: int                # the job's version after it
    next_fire: datetime | None = None   # the first fire it left to come (None: unknown)


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    spec: JobSpec               # as created
    kind: str                   # "every-minute", "spike" or "imported"
    gateway: str                # "dedupe" or "plain"
    first: datetime             # the first nominal instant, as create_jobs planned it
    changes: list[Change] = field(default_factory=list)   # the operator's, in order
    rule: str | None = None     # "calendar", "window" or "overlap" (module docstring)
    holidays: frozenset[date] = frozenset()     # rule "calendar": the calendar's dates
    opening: datetime | None = None             # rule "window": when the window opens


@dataclass(frozen=True, slots=True)
class Expected:
    run_id: str
    job_id: int
    kind: str                   # "every-minute", "spike" or "imported"
    gateway: str                # "dedupe" or "plain"
    due: float                  # unix seconds
    may_skip: str | None = None  # a skip reason that is not a miss ("overlap")


@dataclass(frozen=True, slots=True)
class ModelFire:
    """A fire of a job's timetable as it was in force, and what the ledger must hold for it."""

    job_id: int
    nominal: datetime
    due: float                  # unix seconds: nominal + the spread offset in force
    state: str                  # "run": a run; "paused": a skipped/paused row; "pending": none;
                                # "calendar": a skipped/calendar row; "run-or-overlap": a run,
                                # or a skipped/overlap row
    early: bool                 # settled by a change before its due time (its row is early)
    deferred: bool = False      # due at its delivery window's opening (its row is early)


def _offset(spec: JobSpec, job_id: int) -> timedelta:
    return timedelta(seconds=spread_offset(spec.spread_key or spec.hash_key(job_id),
                                           spec.spread_seconds))


def _fires_from(spec: JobSpec, job_id: int, first: datetime | None,
                until: datetime) -> list[datetime]:
    """``first`` (a fire) and the fires after it, up to and including ``until``."""
    if first is None or first > until:
        return []
    return [first] + [f.at for f in spec.timetable(job_id).fires_between(first, until, 100_000)]


def job_fires(job: Job, until: datetime) -> list[ModelFire]:
    """The job's fires up to ``until`` (nominal), by the ledger rule (docs/ledger.md): a change
    at ``t`` settles the fires up to ``t`` under the document and state before it (a fire
    of a pause then gets its skipped/paused row; one still inside its spread window is
    written with its old due time), and the job goes on with the first fire after ``t`` of
    the new document. Fires after a pause that no change followed are pending.

    ``t`` is the database clock read after the job's row lock. A cron edit records it (the
    new timetable's start); for the other changes the timetable stays, and the first fire
    the change left to come (read in its transaction) marks it exactly: the fires before
    that one were settled. Without it, the transaction's now(), a little earlier, is used."""
    out: list[ModelFire] = []
    spec, paused = job.spec, False
    cursor: datetime | None = job.first
    for change in job.changes:
        offset = _offset(spec, job.id)
        same = (change.spec.cron, change.spec.tz) == (spec.cron, spec.tz)
        if same and change.next_fire is not None:
            settled = [at for at in _fires_from(spec, job.id, cursor, change.next_fire)
                       if at < change.next_fire]
        else:
            settled = _fires_from(spec, job.id, cursor, change.at)
        for at in settled:
            due = at + offset
            out.append(ModelFire(job.id, at, due.timestamp(), "paused" if paused else "run",
                                 early=due > change.at))
        spec, paused = change.spec, change.paused
        if change.next_fire is not None:
            cursor = change.next_fire
        else:
            following = spec.timetable(job.id).next_fires(change.at, 1)
            cursor = following[0] if following else None
    offset = _offset(spec, job.id)
    for at in _fires_from(spec, job.id, cursor, until):
        out.append(ModelFire(job.id, at, (at + offset).timestamp(),
                             "pending" if paused else "run", early=False))
    return [_ruled(job, f) for f in out if f.nominal <= until]


def _ruled(job: Job, fire: ModelFire) -> ModelFire:
    """The fire as the job's rule leaves it (the rule jobs are not edited nor paused)."""
    if job.rule == "calendar" and fire.state == "run":
        local = fire.nominal.astimezone(ZoneInfo(job.spec.tz))
        if local.date() in job.holidays:
            return ModelFire(job.id, fire.nominal, fire.due, "calendar", early=False)
    if job.rule == "window" and fire.state == "run":
        assert job.opening is not None
        if fire.due < job.opening.timestamp():
            return ModelFire(job.id, fire.nominal, job.opening.timestamp(), "run",
                             early=False, deferred=True)
    if job.rule == "overlap" and fire.state == "run":
        return ModelFire(job.id, fire.nominal, fire.due, "run-or-overlap", early=False)
    return fire


def expected_runs(jobs: Sequence[Job], cutoff: float) -> list[Expected]:
    """Every run due before the cut-off: the first run the job was created with, then its
    timetable as the operator's changes left it (``job_fires``: the same computation as the
    scheduler's and the store's, done independently here)."""
    end = datetime.fromtimestamp(cutoff, UTC)
    out: list[Expected] = []
    for job in jobs:
        for fire in job_fires(job, end):
            if fire.state in ("run", "run-or-overlap") and fire.due < cutoff:
                out.append(Expected(run_id(job.id, fire.nominal), job.id, job.kind,
                                    job.gateway, fire.due,
                                    "overlap" if fire.state == "run-or-overlap" else None))
    return out


def overlapping_calls(calls: Iterable[tuple[str, float, float]]) -> list[tuple[str, str]]:
    """Pairs of calls (run ids) of one job in flight at once: ``calls`` are (run id, start,
    end) of the job's requests as the gateway saw them; a call starts where the previous one
    ended at the earliest. Empty for a job whose overlap rule held."""
    out: list[tuple[str, str]] = []
    last: tuple[str, float] | None = None
    for key, start, end in sorted(calls, key=lambda c: (c[1], c[2])):
        if last is not None and start < last[1]:
            out.append((last[0], key))
        if last is None or end > last[1]:
            last = (key, end)
    return out


def calls_before(calls: Iterable[tuple[str, float]], opening: float) -> list[str]:
    """The run ids of the calls (run id, arrival) made before a window's opening."""
    return [key for key, arrived in calls if arrived < opening]


def attribute(first: float, faults: Sequence[Fault], evidence: dict[str, str],
              window: float) -> str:
    """The cause of a repeat whose first accepted request arrived at ``first``."""
    if "lost-lease" in evidence:
        return (f"pause past the lease: {evidence['lost-lease']} logged 'lease was lost' "
                "for this run when it resumed")
    if "slot-failed" in evidence:
        restarts = [f for f in faults if f.kind == "pg-restart"
                    and f.at - 1 <= first + window and (f.end or f.at) >= first - 1]
        where = " during the PostgreSQL restart" if restarts else ""
        return (f"outcome write failed{where}: {evidence['slot-failed']} logged 'slot failed'"
                " after the call, the lease expired, the run was called again")
    for f in faults:
        if f.kind == "kill-worker" and first - 1 <= f.at <= first + window:
            return (f"worker kill -9 between send and record: {f.target} killed at "
                    f"{clock(f.at)}, {f.at - first:+.2f}s from the first request")
    for f in faults:
        if f.kind == "pause" and f.at <= first + window and (f.end or math.inf) >= first - 1:
            return f"pause past the lease (by time): {f.target} stopped {clock(f.at)}"
    for f in faults:
        if f.kind == "pg-restart" and f.at - 1 <= first + window and (f.end or f.at) >= first:
            return f"PostgreSQL restart at {clock(f.at)} within the call window (by time)"
    return "UNEXPLAINED"
