"""The ledger rule, checked: every fire of every job's timetable has exactly one row in runs.

``verify`` rebuilds, from the database alone, the fires each job's timetable owed in a time
window and compares them with the rows in ``runs``:

- *Which timetable was in force.* A job's current cron and tz are in force after
  ``jobs.timetable_since`` (its creation, or the last edit of either or of its window);
  the ones it had before, each with the interval it was in force and the window
  (``start_at``, ``end_at``) that bounded its fires then, are in ``job_timetables``. A
  cancelled job's timetable ends at ``cancelled_at``, a job that ended by its schedule at
  ``ended_at`` (its last fire); the job's current window bounds its current timetable only,
  and an ``at`` job's one fire is read from its row (docs/schedules.md).
  Pauses change nothing here: a paused fire gets a ``skipped``/``paused`` row like any other.
- *What is owed already.* An active job's ``next_nominal_at`` is the first fire nobody has
  written yet: the scheduler writes fires when they fall due and moves it on in the same
  transaction, a change settles every fire before it. So every fire before it must have a
  row (else it is *unaccounted*: lost), and a fire from it on without one is *pending* (a
  scheduler is behind or the job is paused; it will be written or recorded, not lost).
- *Rows.* A fire's rows are looked up by (job_id, nominal_at) on the runs_job index, so a
  fire with two rows (two run ids for one instant) shows as *duplicated*.

Everything is read in one REPEATABLE READ snapshot, so a tick committing meanwhile is seen
whole or not at all: no false alarm from a race. Fires are computed once per distinct
timetable (cron, tz) in Python and sent as arrays; jobs with ``H`` fields are grouped by
their expanded expression. Runs older than the retention period are pruned (30 days by
default): a window reaching further back reports them as unaccounted.
"""

from __future__ import annotations

import time as clock
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import class_row

from crondepot.base.errors import InvalidSchedule
from crondepot.db import Q
from crondepot.db.clock import database_now
from crondepot.db.transactions import one_snapshot
from crondepot.timetable import AnyTimetable, expand_hash, run_id, timetable_of, uses_hash

DEFAULT_WINDOW = timedelta(hours=24)
MAX_WINDOW = timedelta(days=31)
MAX_LISTED = 1000


class WindowError(ValueError):
    """A window that cannot be checked (since after until, or longer than MAX_WINDOW)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FireRecord:
    """One fire with a problem: no row (``rows`` = 0) or more than one."""

    job_id: int
    tenant_id: int
    job_key: str | None
    nominal_at: datetime
    run_id: str           # the id its run has (or would have)
    rows: int

    def document(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "tenant_id": self.tenant_id, "job_key": self.job_key,
                "nominal_at": self.nominal_at.isoformat(), "run_id": self.run_id,
                "rows": self.rows}


@dataclass(frozen=True, slots=True, kw_only=True)
class UnreadableTimetable:
    """A cron and tz in force in the window that no longer parse (a parser grown stricter
    than a row it once accepted): its fires cannot be computed, so they are not checked."""

    cron: str
    tz: str
    error: str
    job_ids: tuple[int, ...]

    def document(self) -> dict[str, Any]:
        return {"cron": self.cron, "tz": self.tz, "error": self.error,
                "job_ids": list(self.job_ids)}


@dataclass(slots=True, kw_only=True)
class Report:
    since: datetime
    until: datetime
    fires: int = 0                 # fires of the window's timetables
    pending: int = 0               # not yet owed a row (a scheduler is behind; paused)
    oldest_pending: datetime | None = None   # the next check must reach back to it
    unaccounted_count: int = 0
    duplicated_count: int = 0
    unaccounted: list[FireRecord] = field(default_factory=list)    # first MAX_LISTED
    duplicated: list[FireRecord] = field(default_factory=list)
    unreadable: list[UnreadableTimetable] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return not self.unaccounted_count and not self.duplicated_count and not self.unreadable

    def document(self) -> dict[str, Any]:
        return {"since": self.since.isoformat(), "until": self.until.isoformat(),
                "fires": self.fires, "pending": self.pending,
                "oldest_pending": self.oldest_pending and self.oldest_pending.isoformat(),
                "unaccounted_count": self.unaccounted_count,
                "duplicated_count": self.duplicated_count,
                "unaccounted": [f.document() for f in self.unaccounted],
                "duplicated": [f.document() for f in self.duplicated],
                "unreadable": [u.document() for u in self.unreadable],
                "seconds": round(self.seconds, 3), "clean": self.clean}


def verify(conn: psycopg.Connection[Any], *, tenant_id: int | None = None,
           since: datetime | None = None, until: datetime | None = None,
           window: timedelta = DEFAULT_WINDOW, now: datetime | None = None,
           listed: int = MAX_LISTED) -> Report:
    """Check the fires with ``since <= nominal <= until`` of every job, or of one tenant's;
    ``until`` defaults to now and is never after it, ``since`` to ``window`` before it.

    ``conn`` is in autocommit mode; the check runs in a transaction of its own.
    """
    started = clock.perf_counter()
    with one_snapshot(conn):
        conn.execute(Q.ledger_no_jit)
        db_now = database_now(conn, now)
        end = min(until or db_now, db_now)
        start = since or end - window
        if start > end:
            raise WindowError(f"since ({start.isoformat()}) is after until "
                              f"({end.isoformat()})")
        if end - start > MAX_WINDOW:
            raise WindowError(f"the window is {end - start}; check at most {MAX_WINDOW.days} "
                              "days at a time")
        report = Report(since=start, until=end)
        scope = {"tenant": tenant_id, "since": start, "until": end}
        unreadable: dict[tuple[str, str], str] = {}
        fires = _fires(conn, scope, unreadable)
        rows = conn.execute(Q.ledger_fires, {**scope, **fires, "limit": listed}).fetchall()
        if unreadable:
            report.unreadable = _unreadable(conn, scope, unreadable)
    (report.fires, report.pending, report.unaccounted_count, report.duplicated_count,
     report.oldest_pending) = rows[0][:5]
    for *_, job_id, tenant, key, nominal_at, count in rows:
        if job_id is None:
            continue
        record = FireRecord(job_id=job_id, tenant_id=tenant, job_key=key, nominal_at=nominal_at,
                            run_id=run_id(job_id, nominal_at), rows=count)
        (report.duplicated if count > 1 else report.unaccounted).append(record)
    report.seconds = clock.perf_counter() - started
    return report


def _unreadable(conn: psycopg.Connection[Any], scope: dict[str, Any],
                errors: dict[tuple[str, str], str]) -> list[UnreadableTimetable]:
    jobs: dict[tuple[str, str], list[int]] = defaultdict(list)
    for job_id, _, cron, tz in conn.execute(Q.ledger_hashed_jobs, {
            **scope, "crons": [c for c, _ in errors], "tzs": [t for _, t in errors]}):
        jobs[(cron, tz)].append(job_id)
    return [UnreadableTimetable(cron=cron, tz=tz, error=error,
                                job_ids=tuple(sorted(jobs[(cron, tz)])))
            for (cron, tz), error in sorted(errors.items())]


def _timetable(cron: str, tz: str, errors: dict[tuple[str, str], str],
               original: str | None = None) -> AnyTimetable | None:
    """The timetable, or None with the reason noted under (the stored cron, tz)."""
    try:
        return timetable_of(cron, tz)
    except InvalidSchedule as exc:
        errors[(original or cron, tz)] = str(exc)
        return None


def _fires(conn: psycopg.Connection[Any], scope: dict[str, Any],
           unreadable: dict[tuple[str, str], str]) -> dict[str, list[Any]]:
    """The fires in the window of every timetable in force in it, as query parameters:
    (cron, tz, nominal) shared by every job of a plain timetable, (job id, cron, tz, nominal)
    for timetables with ``H`` fields, whose fires depend on the job. A timetable that does
    not parse is noted in ``unreadable`` (the stored cron and tz, and why) and skipped."""
    shared: dict[str, list[Any]] = {"crons": [], "tzs": [], "nominals": []}
    own: dict[str, list[Any]] = {"h_job_ids": [], "h_crons": [], "h_tzs": [], "h_nominals": []}
    hashed: list[tuple[str, str]] = []
    for cron, tz in conn.execute(Q.ledger_timetables, scope).fetchall():
        if uses_hash(cron):
            hashed.append((cron, tz))
            continue
        timetable = _timetable(cron, tz, unreadable)
        if timetable is None:
            continue
        for at in _window_fires(timetable, scope):
            shared["crons"].append(cron)
            shared["tzs"].append(tz)
            shared["nominals"].append(at)
    if hashed:
        # Grouped by their expansion (a string operation per job), so a timetable is built
        # once per distinct expansion, not once per job.
        by_expansion: dict[tuple[str, str], list[tuple[int, str]]] = defaultdict(list)
        for job_id, key, cron, tz in conn.execute(Q.ledger_hashed_jobs, {
                **scope, "crons": [c for c, _ in hashed], "tzs": [t for _, t in hashed]}):
            try:
                expanded = expand_hash(cron, key if key is not None else str(job_id))
            except InvalidSchedule as exc:
                unreadable[(cron, tz)] = str(exc)
                continue
            by_expansion[(expanded, tz)].append((job_id, cron))
        for (expanded, tz), jobs in by_expansion.items():
            timetable = _timetable(expanded, tz, unreadable, original=jobs[0][1])
            if timetable is None:
                continue
            at_list = list(_window_fires(timetable, scope))
            for job_id, cron in jobs:
                for at in at_list:
                    own["h_job_ids"].append(job_id)
                    own["h_crons"].append(cron)
                    own["h_tzs"].append(tz)
                    own["h_nominals"].append(at)
    return {**shared, **own}


def _window_fires(timetable: AnyTimetable, scope: dict[str, Any]) -> Iterator[datetime]:
    """The fires with since <= nominal <= until."""
    after = scope["since"] - timedelta(microseconds=1)
    for fire in timetable.fires_after(after):
        if fire.at > scope["until"]:
            return
        yield fire.at


# -- the periodic check the schedulers run ---------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class LatestCheck:
    checked_at: datetime
    since: datetime
    until: datetime
    fires: int
    unaccounted: int
    duplicated: int
    pending: int
    seconds: float


def check_if_due(conn: psycopg.Connection[Any], *, every: timedelta,
                 window: timedelta) -> Report | None:
    """Run and record one ledger check if none was recorded in the last ``every``. Any
    number of scheduler copies call this; an advisory lock lets one of them check at a time,
    and the others return None at once.

    The check covers the last ``window``, and reaches further back to the oldest fire the
    previous check found pending: a fire is pending until it is written (a spread of hours,
    a scheduler outage), and it is when a scheduler moves past it that it is written or lost.
    A window that only slid along would have left it behind by then.
    """
    with conn.transaction():
        locked, due, oldest_pending = conn.execute(
            Q.ledger_check_turn, {"every": every.total_seconds()}).fetchone() or (
            False, False, None)
    if not (locked and due):
        if locked:
            conn.execute(Q.ledger_check_release)
        return None
    try:
        now = database_now(conn)
        since = now - window
        if oldest_pending is not None:
            since = max(min(since, oldest_pending), now - MAX_WINDOW)
        report = verify(conn, since=since, until=now, listed=10)
        conn.execute(Q.record_ledger_check, {
            "since": report.since, "until": report.until, "fires": report.fires,
            "unaccounted": report.unaccounted_count, "duplicated": report.duplicated_count,
            "pending": report.pending, "oldest_pending": report.oldest_pending,
            "seconds": report.seconds})
        return report
    finally:
        conn.execute(Q.ledger_check_release)


def latest_check(conn: psycopg.Connection[Any]) -> LatestCheck | None:
    with conn.cursor(row_factory=class_row(LatestCheck)) as cur:
        return cur.execute(Q.latest_ledger_check).fetchone()
