"""Backfill: write the fires of one job in a past range that have no row, with their run ids.

After an outage that lost rows, a restore, or rows removed by hand, ``crondepot verify``
reports fires without a row (*unaccounted*). ``backfill`` writes them: for one job and a
range ``[since, until)`` of nominal times, it rebuilds the fires of the timetables in force
at each instant (the current cron, tz and window after ``timetable_since``, the earlier
ones with their own windows from ``job_timetables``, exactly as ``crondepot verify`` does)
and writes a run for each fire that has no row:

- with the run id the tick would have given it (``timetable.run_id``), by one
  ``INSERT ... ON CONFLICT DO NOTHING``: a fire never gets a second row;
- queued and due now, carrying the misfire deadline the tick would have written
  (``deadline_at``); a fire already past that deadline is written ``skipped`` with the
  tick's reason (``misfire_deadline``/``misfire_local_deadline``), so the row exists but
  nothing is sent that the job's rule says must not be.

A job's exclusion calendar applies as in the tick (scheduler/plan.py): a fire on a calendar
date is written ``skipped`` (reason ``calendar``) for ``skip``, or due at its moved time
(now, if that has passed) and judged from it for the business-day moves; its run id is the
nominal one either way.

With ``include_skipped``, fires whose row is ``skipped`` (a pause, a catch-up bound, …) are
queued again: the same row and run id, a fresh attempt budget, as a dead-letter replay does;
one past its misfire deadline stays skipped, and so does one its calendar skips. A fire
whose row is in any other state is left
as it is.

Fires from the job's ``next_nominal_at`` on are the scheduler's (a paused job, a scheduler
behind): they are *pending* and left alone; resume the job, then backfill with
``include_skipped`` to send the fires a pause recorded skipped.

Finished runs older than the retention period are pruned, and a pruned fire cannot be told
from a lost one: the range may not start more than ``MAX_AGE`` (the default retention, 30
days) ago. With a shorter ``--retention`` on the workers, keep the range inside it.

The job row is locked for the call (the same lock as an edit or a pause), so a tick skips
the job meanwhile; the tick writes only fires from ``next_nominal_at`` on anyway. The range
may span at most ``MAX_RANGE`` and must end by now; one call handles at most ``max_fires``
fires, from the start of the range, and says where to go on (``next_since``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.base.vocab import SkipReason
from crondepot.db import Q
from crondepot.db.clock import database_now
from crondepot.job.store import StoredJob, calendar_rules, lock_job
from crondepot.runs.retention import DEFAULT_RETENTION
from crondepot.runtime import metrics
from crondepot.scheduler.plan import DueJob, misfire_deadline
from crondepot.tenancy.audit import record_summary
from crondepot.timetable import Schedule, run_id, schedule, spread_offset, uses_hash
from crondepot.timetable.calendar import Rule

MAX_RANGE = timedelta(days=31)     # as crondepot verify
# Finished runs are pruned by age (the workers' --retention, 30 days by default): a pruned
# fire looks exactly like a lost one, and backfill would send it again. So a range reaches
# back at most this far; with a shorter --retention, keep it inside that (docs/operations.md).
MAX_AGE = DEFAULT_RETENTION
MAX_FIRES = 10_000                 # fires handled by one call (one transaction)
MAX_LISTED = 1000                  # run ids listed per kind in a result


class BackfillRangeError(CrondepotError, ValueError):
    """A range that cannot be backfilled: empty, reversed, in the future or too long;
    ``field`` names the bound at fault ("from" or "to")."""

    def __init__(self, message: str, *, field: str = "from") -> None:
        super().__init__(message)
        self.field = field


@dataclass(slots=True, kw_only=True)
class Backfill:
    """What one call did (or, with ``dry_run``, would do)."""

    job_id: int
    since: datetime
    until: datetime            # the range asked for (``until`` now when not given)
    dry_run: bool
    fires: int = 0             # fires handled by this call
    written: list[str] = field(default_factory=list)          # new rows, queued
    written_skipped: list[str] = field(default_factory=list)  # new rows, past their deadline
    requeued: list[str] = field(default_factory=list)         # skipped rows queued again
    held_past_deadline: list[str] = field(default_factory=list)  # skipped, left: past deadline
    had_row: int = 0           # fires with a row left as it was
    pending_since: datetime | None = None   # fires from here on are the scheduler's
    next_since: datetime | None = None      # more fires remain: call again from here

    def document(self) -> dict[str, Any]:
        def listed(ids: list[str]) -> list[str]:
            return ids[:MAX_LISTED]
        return {
            "job_id": self.job_id, "from": self.since.isoformat(),
            "to": self.until.isoformat(), "dry_run": self.dry_run, "fires": self.fires,
            "written": len(self.written), "written_skipped": len(self.written_skipped),
            "requeued": len(self.requeued),
            "held_past_deadline": len(self.held_past_deadline),
            "already_had_row": self.had_row,
            "pending_from": self.pending_since and self.pending_since.isoformat(),
            "next_from": self.next_since and self.next_since.isoformat(),
            "written_run_ids": listed(self.written),
            "written_skipped_run_ids": listed(self.written_skipped),
            "requeued_run_ids": listed(self.requeued),
            "held_past_deadline_run_ids": listed(self.held_past_deadline),
            "run_ids_listed_at_most": MAX_LISTED,
        }


def check_range(since: datetime, until: datetime, now: datetime) -> None:
    for name, value in (("from", since), ("to", until)):
        if value.utcoffset() is None:
            raise BackfillRangeError(f"{name} needs a UTC offset (Z or +HH:MM)", field=name)
    if since >= until:
        raise BackfillRangeError(f"from ({since.isoformat()}) must be before to "
                                 f"({until.isoformat()})")
    if until > now:
        raise BackfillRangeError(f"to ({until.isoformat()}) is after now "
                                 f"({now.isoformat()}, the database's clock): fires still "
                                 "to come are the scheduler's; backfill a past range",
                                 field="to")
    if until - since > MAX_RANGE:
        raise BackfillRangeError(f"the range is {until - since}; backfill at most "
                                 f"{MAX_RANGE.days} days at a time")
    if since < now - MAX_AGE:
        raise BackfillRangeError(f"from ({since.isoformat()}) is more than {MAX_AGE.days} "
                                 "days ago: finished runs that old are pruned (retention), "
                                 "and a backfill would send them again")


def backfill(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
             since: datetime, until: datetime | None = None, include_skipped: bool = False,
             dry_run: bool = False, max_fires: int = MAX_FIRES,
             now: datetime | None = None) -> Backfill:
    """Write the fires of the tenant's job ``job_id`` with ``since <= nominal < until``
    (``until`` defaults to now) that have no row; see the module's docstring.

    Raises JobNotFound (also for another tenant's job), JobCancelled, BackfillRangeError;
    nothing is written then. ``conn`` is in autocommit mode: one transaction per call.
    """
    with conn.transaction():
        db_now = database_now(conn, now)
        end = db_now if until is None else until
        check_range(since, end, db_now)
        job = lock_job(conn, tenant_id, job_id)
        result = Backfill(job_id=job.id, since=since, until=end, dry_run=dry_run)
        stop = end
        if job.next_nominal_at is not None and job.next_nominal_at < end:
            result.pending_since = max(job.next_nominal_at, since)
            stop = job.next_nominal_at
        fires = _fires(conn, tenant_id, job, since, stop, max_fires + 1)
        if len(fires) > max_fires:
            result.next_since = fires[max_fires]
            fires = fires[:max_fires]
        result.fires = len(fires)
        if not fires:
            return result
        planned = _judge(conn, tenant_id, job, fires, db_now, include_skipped, result)
        if not dry_run:
            _write(conn, tenant_id, job, db_now, planned, result, include_skipped)
    if result.written_skipped and not dry_run:      # counted once committed, as the tick
        for rid in result.written_skipped:
            reason = planned[rid].reason
            assert reason is not None
            metrics.labelled(metrics.runs_skipped, reason).inc()
    return result


def _skip_reason(policy: str) -> SkipReason:
    """The tick's reason for a fire written past the job's misfire deadline."""
    return "misfire_deadline" if policy == "skip_after" else "misfire_local_deadline"


def _fires(conn: psycopg.Connection[Any], tenant_id: int, job: StoredJob, since: datetime,
           until: datetime, limit: int) -> list[datetime]:
    """The fires with since <= nominal < until of the timetables in force at each instant,
    the first ``limit`` of them, in order."""
    if until <= since:
        return []
    hash_key = job.spec.hash_key(job.id)
    # Each earlier timetable is bounded by the window it had while in force (kept with it),
    # the current one by the job's, as `crondepot verify` reads them.
    segments: list[tuple[Schedule, datetime, datetime | None]] = [
        (schedule(cron, tz, hash_key=hash_key if uses_hash(cron) else None,
                  start_at=start_at, end_at=end_at),
         start, stop)
        for cron, tz, start, stop, start_at, end_at in conn.execute(
            Q.backfill_job_timetables, {"job_id": job.id, "tenant_id": tenant_id,
                                        "since": since, "until": until})]
    if job.timetable_since < until:
        segments.append((job.spec.timetable(job.id), job.timetable_since,
                         job.cancelled_at or job.ended_at))
    found: set[datetime] = set()
    for timetable, start, stop in segments:     # in force in (start, stop]
        after = max(start, since - timedelta(microseconds=1))
        for count, fire in enumerate(timetable.fires_after(after)):
            if fire.at >= until or (stop is not None and fire.at > stop) or count >= limit:
                break
            found.add(fire.at)
    return sorted(found)[:limit]


def _due_job(job: StoredJob, calendar: Rule | None) -> DueJob:
    spec = job.spec
    offset = 0
    if spec.spread_seconds:
        offset = spread_offset(spec.spread_key or spec.hash_key(job.id), spec.spread_seconds)
    return DueJob(id=job.id, next_nominal_at=job.next_nominal_at or job.created_at,
                  spread_offset=timedelta(seconds=offset), catchup=spec.catchup,
                  max_catchup=spec.max_catchup, misfire_policy=spec.misfire.policy,
                  misfire_seconds=spec.misfire.seconds, misfire_until=spec.misfire.until,
                  tz=spec.tz, calendar=calendar)


@dataclass(frozen=True, slots=True)
class _Fire:
    nominal: datetime
    due: datetime                   # nominal + spread, or where the calendar moved it
    deadline: datetime | None
    reason: SkipReason | None       # written skipped, and why


Planned = dict[str, _Fire]      # by run id


def _judge(conn: psycopg.Connection[Any], tenant_id: int, job: StoredJob,
           fires: list[datetime], now: datetime, include_skipped: bool,
           result: Backfill) -> Planned:
    """Sort each fire: written (queued or skipped past its deadline or by its calendar),
    requeued, held, or left as it is; the fires to write or requeue, with their deadlines."""
    planned: Planned = {}
    ids = [run_id(job.id, at) for at in fires]
    existing = dict(conn.execute(Q.backfill_existing_runs, {
        "run_ids": ids, "job_id": job.id, "tenant_id": tenant_id}).fetchall())
    due_job = _due_job(job, calendar_rules(conn, tenant_id, [job]).get(job.id))
    for at, rid in zip(fires, ids, strict=True):
        fire = _fire(due_job, at, now)
        status = existing.get(rid)
        if status is None:
            (result.written_skipped if fire.reason else result.written).append(rid)
            planned[rid] = fire
        elif status == "skipped" and include_skipped and fire.reason != "calendar":
            (result.held_past_deadline if fire.reason else result.requeued).append(rid)
            planned[rid] = fire
        else:
            result.had_row += 1
    return planned


def _fire(job: DueJob, at: datetime, now: datetime) -> _Fire:
    """One fire as the tick would write it now (scheduler/plan.py's rules)."""
    base: datetime | None = at
    if job.calendar is not None:
        base = job.calendar.shift(at).at
    if base is None:
        return _Fire(nominal=at, due=at + job.spread_offset, deadline=None, reason="calendar")
    due = base + job.spread_offset
    deadline = misfire_deadline(job, base, due)
    past = deadline is not None and now > deadline
    return _Fire(nominal=at, due=due, deadline=deadline,
                 reason=_skip_reason(job.misfire_policy) if past else None)


def _write(conn: psycopg.Connection[Any], tenant_id: int, job: StoredJob, now: datetime,
           planned: Planned, result: Backfill, include_skipped: bool) -> None:
    new = [*result.written, *result.written_skipped]
    if new:
        rows = conn.execute(Q.backfill_insert_runs, {
            "job_id": job.id, "tenant_id": tenant_id, "priority": job.spec.priority,
            "now": now, "run_ids": new, "nominal_ats": [planned[r].nominal for r in new],
            "due_ats": [planned[r].due for r in new],
            "skip_reasons": [planned[r].reason for r in new],
            "deadline_ats": [planned[r].deadline for r in new]}).fetchall()
        inserted = {rid for rid, _ in rows}
        lost = [r for r in new if r not in inserted]   # written by someone else meanwhile
        result.written = [r for r in result.written if r in inserted]
        result.written_skipped = [r for r in result.written_skipped if r in inserted]
        result.had_row += len(lost)
    if result.requeued:
        rows = conn.execute(Q.backfill_requeue_skipped, {
            "job_id": job.id, "tenant_id": tenant_id, "now": now, "run_ids": result.requeued,
            "deadline_ats": [planned[r].deadline for r in result.requeued]}).fetchall()
        requeued = {rid for (rid,) in rows}
        result.had_row += len(result.requeued) - len(requeued)
        result.requeued = [r for r in result.requeued if r in requeued]
    if result.written or result.requeued:
        conn.execute(Q.notify_runs_queued, {"priorities": job.spec.priority})
    if result.written or result.written_skipped or result.requeued:
        record_summary(conn, tenant_id, "job.backfill", str(job.id), {
            "from": result.since.isoformat(), "to": result.until.isoformat(),
            "written": len(result.written), "written_skipped": len(result.written_skipped),
            "requeued": len(result.requeued), "include_skipped": include_skipped})
