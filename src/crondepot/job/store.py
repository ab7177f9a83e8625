"""Persisting jobs. Every write computes the first ``next_run_at`` on the database clock.

Reads and changes are scoped by tenant: a job of another tenant is not found, exactly like
an unknown id. Every change names the state it expects (the version, "active", "paused") and
raises instead of writing when the job is not in it; nothing here knows about HTTP.

The ledger rule (docs/ledger.md): a change (edit, pause, resume, cancel) applies to the fires
after it. Every fire whose nominal time has passed and that has no row yet is *settled*
first, in the change's transaction: written as the scheduler would have written it (its
catch-up and misfire rules decide; its due time, spread included, as it was), or recorded
skipped ``paused`` if the job was paused. Only then does the job move on, from the change's
instant. An edit of cron, tz or the window (start_at, end_at) also keeps the old timetable,
its window and the interval it was in force, in ``job_timetables``: ``crondepot verify``
(crondepot.scheduler.ledger) and ``crondepot backfill`` read them back.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from crondepot.base import jsontext
from crondepot.base.errors import CrondepotError, InvalidJob, InvalidSchedule
from crondepot.base.vocab import SkipReason
from crondepot.db import Q
from crondepot.db.clock import database_clock, database_now
from crondepot.job import fields as F
from crondepot.job.admission import admit, admit_change
from crondepot.job.columns import COPY_TYPES, WRITES, patch_params, spec_from_row
from crondepot.job.spec import DOCUMENT_FIELDS, JobSpec, Misfire
from crondepot.runtime import metrics
from crondepot.scheduler.plan import DueJob, PlannedRun, plan
from crondepot.scheduler.tick import insert_runs
from crondepot.tenancy.calendars import TickCalendars
from crondepot.timetable import every_text, run_id, spread_offset, uses_hash
from crondepot.timetable.calendar import Rule, business_days
from crondepot.timetable.delivery import resolve

log = logging.getLogger("crondepot.jobs")


class JobNotFound(CrondepotError, LookupError):
    """No job with this id for this tenant (it may exist for another: that is not said)."""


class JobCancelled(CrondepotError):
    """The job is cancelled; it can be read but no longer changed or triggered."""


class VersionMismatch(CrondepotError):
    """The job changed since the caller read it (optimistic concurrency)."""

    def __init__(self, message: str, *, current: int) -> None:
        super().__init__(message)
        self.current = current


class KeyConflict(CrondepotError):
    """A create named a key the tenant already uses for a different document."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedJob:
    id: int
    key: str | None
    next_run_at: datetime | None
    next_nominal_at: datetime | None
    created: bool          # False: the key existed and nothing was written


FirstFires = dict[tuple[Any, ...], datetime | None]


def first_run(spec: JobSpec, job_id: int, now: datetime,
              memo: FirstFires | None = None) -> tuple[datetime | None, datetime | None]:
    """(nominal, due) of the first run after ``now``.

    ``memo`` shares the first fire among jobs with one timetable (an import batch of
    thousands of "0 9 5 * *" reminders computes it once).
    """
    hash_key = spec.hash_key(job_id) if spec.cron is not None and uses_hash(spec.cron) else ""
    key = (spec.cron, spec.tz, hash_key, spec.at, spec.start_at, spec.end_at)
    if memo is not None and key in memo:
        nominal = memo[key]
    else:
        fires = spec.timetable(job_id).next_fires(now, 1)
        nominal = fires[0] if fires else None
        if memo is not None:
            memo[key] = nominal
    if nominal is None:
        return None, None
    due = nominal + spread_of(spec, job_id)
    if spec.calendar is not None and spec.calendar["on_excluded"] == "previous_business_day":
        # A holiday may move a fire to before its nominal time: due now, so the next tick
        # plans the job with its calendar's dates (scheduler/plan.py) and sets the right time.
        due = min(due, now)
    return nominal, due


def spread_of(spec: JobSpec, job_id: int) -> timedelta:
    """The job's stable delay after each nominal time (its spread)."""
    if not spec.spread_seconds:
        return timedelta(0)
    return timedelta(seconds=spread_offset(spec.spread_key or spec.hash_key(job_id),
                                           spec.spread_seconds))


def create_jobs(conn: psycopg.Connection[Any], tenant_id: int, specs: Sequence[JobSpec], *,
                now: datetime | None = None) -> list[CreatedJob]:
    """Insert ``specs`` in one statement; return one entry per spec, in order.

    The plain writer: it checks no grant and no quota (``admission``; the tenant-facing
    ``create_job`` and ``import_batch`` do), for the operator's own code. It takes the
    tenant's row lock first, as they do, so writers of one tenant's jobs take turns.
    """
    if not specs:
        return []
    with conn.transaction():
        conn.execute(Q.lock_tenant, {"tenant_id": tenant_id})
        db_now = database_now(conn, now)
        # An interval without an anchor is anchored at its creation instant.
        specs = [spec.anchored(db_now) for spec in specs]
        ids = [row[0] for row in conn.execute(Q.reserve_job_ids, {"count": len(specs)})]
        memo: FirstFires = {}
        firsts = [first_run(spec, job_id, db_now, memo)
                  for spec, job_id in zip(specs, ids, strict=True)]
        values = _values(tenant_id, specs, ids, firsts, db_now)
        insert = _insert_copied if len(specs) >= COPY_AT_LEAST else _insert_unnested
        inserted = insert(conn, values)
        for spec, job_id, first in zip(specs, ids, firsts, strict=True):
            if first[0] is None and job_id in inserted:
                # No fire left from now (admission refuses the plain cases; an H job's
                # own fire times are known only here): the job is born ended.
                _end(conn, job_id, spec.timetable(job_id).end_reason, db_now)
        conn.execute(Q.notify_jobs_changed)
    return [CreatedJob(id=job_id, key=spec.key, next_nominal_at=first[0], next_run_at=first[1],
                       created=job_id in inserted)
            for spec, job_id, first in zip(specs, ids, firsts, strict=True)]


# A change to a job takes effect at the database clock read *after* the job's row lock
# (database_clock), not at its transaction's start: a scheduler tick that began after that start
# and held the lock meanwhile may have written fires later than it under the old timetable,
# and the change must apply after them.


# From this many jobs a batch is staged by binary COPY (less Python CPU per job than packing
# arrays, and a little less server CPU); a smaller one, such as the API's single create, is
# one INSERT, one round trip fewer than COPY and INSERT … SELECT.
COPY_AT_LEAST = 100


def _values(tenant_id: int, specs: Sequence[JobSpec], ids: list[int],
            firsts: list[tuple[datetime | None, datetime | None]],
            now: datetime) -> list[list[Any]]:
    """Every column of job_writes_7 (columns.WRITES, in its order) as the list of its values
    for ``specs``: a column of the document is read from each spec, the others are the
    writer's. Column by column, so each is one ``map`` and a COPY row one ``zip``."""
    count = len(specs)
    writers: dict[str, list[Any]] = {
        "id": ids, "tenant_id": [tenant_id] * count,
        "next_run_at": [due for _, due in firsts],
        "next_nominal_at": [nominal for nominal, _ in firsts], "created_at": [now] * count}
    return [writers[c.name] if c.attr is None else list(map(c.read, specs)) for c in WRITES]


def _insert_unnested(conn: psycopg.Connection[Any], values: list[list[Any]]) -> set[int]:
    arrays = {c.name: column for c, column in zip(WRITES, values, strict=True)}
    return {row[0] for row in conn.execute(Q.insert_jobs, arrays)}


def _insert_copied(conn: psycopg.Connection[Any], values: list[list[Any]]) -> set[int]:
    conn.execute(Q.create_import_table)
    with conn.cursor() as cursor, cursor.copy(Q.copy_import_rows) as copy:
        copy.set_types(list(COPY_TYPES))
        for row in zip(*values, strict=True):
            copy.write_row(row)
    first_id = values[0][0]
    return {row[0] for row in conn.execute(Q.insert_import_rows, {"first_id": first_id})}


MAX_PAUSE_NOTE = 500     # characters; the jobs table's CHECK says the same (migration 0023)


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """Why and since when a job is paused, and by whom (the session's actor; ``crondepot:
    pause_after_failures`` when it paused itself)."""

    note: str | None
    at: datetime | None      # null for a pause made before migration 0023
    by: str | None


def check_note(note: object) -> str | None:
    """A pause note: free text for people, 1 to 500 characters; None for none."""
    if note is None:
        return None
    wrong = jsontext.people_text(note, MAX_PAUSE_NOTE)
    if wrong is not None:
        raise InvalidJob(f"note: {wrong}", field="note")
    assert isinstance(note, str)
    return note


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredJob:
    """A job as stored: its document (``spec``) and the state around it."""

    id: int
    spec: JobSpec
    paused: bool
    next_run_at: datetime | None
    next_nominal_at: datetime | None
    created_at: datetime
    updated_at: datetime
    cancelled_at: datetime | None
    version: int
    timetable_since: datetime     # the current cron, tz and window are in force after it
    fire_count: int = 0           # fires written so far (max_runs counts them)
    ended_at: datetime | None = None       # ended by its schedule: its last fire's time
    ended_reason: str | None = None        # completed | end_at | max_runs
    pause: Pause | None = None             # while paused

    @property
    def active(self) -> bool:
        return self.spec.active

    @property
    def remaining(self) -> int | None:
        """Fires left before max_runs ends the job (None: no bound)."""
        if self.spec.max_runs is None:
            return None
        return max(self.spec.max_runs - self.fire_count, 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFilter:
    priority: str | None = None
    paused: bool | None = None
    active: bool | None = None
    key_prefix: str | None = None
    labels: dict[str, str] | None = None      # every one must match (containment)

    def params(self) -> dict[str, Any]:
        """The named parameters every listing query with these filters takes."""
        return {"priority": self.priority, "paused": self.paused, "active": self.active,
                "key_prefix": self.key_prefix,
                "labels": Jsonb(self.labels) if self.labels else None}


@dataclass(frozen=True, slots=True, kw_only=True)
class Triggered:
    run_id: str
    created: bool          # False: a run with this id existed (same second): nothing written


# Document fields a spec holds in another shape, written below: exactly one of cron, every
# (with its anchor) and at names the timetable (the others are left out, not null); spread
# is two attributes, written only when set; retry is three (max_attempts among them, never
# written at the top level, its deprecated spelling). Every other field is the spec's
# attribute of its name.
_SHAPED = frozenset({"cron", "at", "every", "anchor", "spread", "max_attempts", "retry"})
_PLAIN = tuple(f for f in F.DOCUMENT if f.name not in _SHAPED)


def job_document(spec: JobSpec) -> dict[str, Any]:
    """The canonical document of ``spec``: what ``JobSpec.from_document`` turns back into it.
    Its fields in the field table's order (job/fields.py DOCUMENT), the shaped ones last."""
    doc = {f.name: _document_value(getattr(spec, f.name), f) for f in _PLAIN}
    if spec.every_s is not None:
        doc["every"] = every_text(spec.every_s)
        if spec.anchor_at is not None:
            doc["anchor"] = _instant(spec.anchor_at)
    elif spec.crons is not None:
        doc["cron"] = list(spec.crons)      # a list given is echoed as a list
    elif spec.cron is not None:
        doc["cron"] = spec.cron
    else:
        doc["at"] = _instant(spec.at)
    if spec.spread_seconds or spec.spread_key is not None:
        doc["spread"] = {"seconds": spec.spread_seconds}
        if spec.spread_key is not None:
            doc["spread"]["key"] = spec.spread_key
    doc["retry"] = retry_document(spec)
    return doc


def retry_document(spec: JobSpec) -> dict[str, Any]:
    """The job's retry object, every member given (the API, the CLI and the console show it)."""
    return {"max_attempts": spec.max_attempts, "base_s": _number(spec.retry_base_s),
            "cap_s": _number(spec.retry_cap_s)}


def _number(value: float) -> int | float:
    """30.0 written as 30: the document a client sent, not the column's float."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


def merged_document(stored: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A stored document with a patch applied: each field the patch names replaces the stored
    one whole, null resets it (dropped here, so the default applies). The attempts are one
    number with two names: a patch naming max_attempts (its deprecated spelling) replaces
    the stored retry.max_attempts, and a patch naming retry replaces the whole curve."""
    if "max_attempts" in patch and "retry" in patch and not (
            isinstance(patch["retry"], dict) and "max_attempts" not in patch["retry"]):
        raise InvalidJob("give retry.max_attempts or max_attempts (its deprecated spelling), "
                         "not both", field="max_attempts")
    merged = {**stored, **patch}
    if "every" in patch and patch["every"] is None and "anchor" not in patch:
        merged.pop("anchor", None)      # the anchor was the interval's: it goes with it
    if "max_attempts" in patch and "retry" not in patch and isinstance(
            merged.get("retry"), dict):
        merged["retry"] = {k: v for k, v in merged["retry"].items() if k != "max_attempts"}
    return {k: v for k, v in merged.items() if v is not None}


def _document_value(value: Any, field: F.Field) -> Any:
    if isinstance(value, Misfire):
        return value.document()
    if field.format == "date-time":
        return _instant(value)
    return value


def _instant(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def create_job(conn: psycopg.Connection[Any], tenant_id: int,
               spec: JobSpec) -> tuple[StoredJob, bool]:
    """Create one job, idempotently on its key; returns the job and whether this call wrote it.

    The same key with the same document returns the stored job; with another document,
    KeyConflict. Safe under concurrent retries: the unique (tenant_id, key) constraint lets
    one insert win and the others (ON CONFLICT DO NOTHING) find its row and compare.

    The tenant must be allowed the job (``admission``: grants, quotas); else the reason is
    raised (an InvalidJob naming the field) and nothing is written.
    """
    with conn.transaction():
        (refused,) = admit(conn, tenant_id, [spec])
        if refused is not None:
            raise refused
        try:
            (created,) = create_jobs(conn, tenant_id, [spec])
        except REFUSED as exc:
            raise refusal(exc) from exc
    if created.created:
        return get_job(conn, tenant_id, created.id), True
    assert spec.key is not None   # only a key can clash
    row = conn.cursor(row_factory=dict_row).execute(
        Q.get_job_by_key, {"tenant_id": tenant_id, "key": spec.key}).fetchone()
    if row is None:
        raise JobNotFound(f"job with key {spec.key!r} vanished")   # jobs are never deleted
    existing = stored_job(row)
    # An interval given without an anchor took its creation instant: the same document
    # again names the same job.
    if existing.spec.anchor_at is not None:
        spec = spec.anchored(existing.spec.anchor_at)
    if existing.spec != spec:
        assert spec.key is not None
        state = "a cancelled job" if not existing.active else "a job with a different document"
        raise KeyConflict(f"key {spec.key!r} already names {state} (id {existing.id}); use "
                          "PATCH to change it, or another key", key=spec.key)
    return existing, False


def get_job(conn: psycopg.Connection[Any], tenant_id: int, job_id: int) -> StoredJob:
    row = conn.cursor(row_factory=dict_row).execute(
        Q.get_tenant_job, {"id": job_id, "tenant_id": tenant_id}).fetchone()
    if row is None:
        raise JobNotFound(f"no job {job_id}")
    return stored_job(row)


def list_jobs(conn: psycopg.Connection[Any], tenant_id: int, where: JobFilter, *,
              after: int = 0, limit: int = 100) -> list[StoredJob]:
    """A page of jobs in id order, strictly after id ``after``."""
    rows = conn.cursor(row_factory=dict_row).execute(Q.list_tenant_jobs, {
        "tenant_id": tenant_id, "after": after, "limit": limit, **where.params()}).fetchall()
    return [stored_job(row) for row in rows]


def update_job(conn: psycopg.Connection[Any], tenant_id: int, job_id: int,
               patch: dict[str, Any], *, version: int, now: datetime | None = None) -> StoredJob:
    """Merge ``patch`` into the stored document (each top-level field given replaces the
    stored one; null resets it to its default), validate the result as a whole, settle the
    fires owed under the old document, and go on from the database's now under the new one.
    ``version`` is the one the caller read."""
    settled: list[PlannedRun] = []
    with conn.transaction():
        job = lock_job(conn, tenant_id, job_id)
        if job.version != version:
            raise VersionMismatch(f"job {job_id} is at version {job.version}, not {version}",
                                  current=job.version)
        spec = _patched(job, patch)
        admit_change(conn, tenant_id, job.spec, spec)
        db_now = database_clock(conn, now)
        spec = spec.anchored(db_now)     # an interval patched in without an anchor
        settled = _settle(conn, tenant_id, job, db_now)
        since = job.timetable_since
        if (spec.cron, spec.tz, spec.at) != (job.spec.cron, job.spec.tz, job.spec.at):
            since = db_now
        # A window edit changes which fires the job owes as much as a cron edit: the fires
        # before it are judged by the old window, those after by the new one. (max_runs needs
        # no segment: the ledger reads it only as ended_at, and an ended job is not edited.)
        if job.spec.cron is not None and (
                (spec.cron, spec.tz, spec.start_at, spec.end_at)
                != (job.spec.cron, job.spec.tz, job.spec.start_at, job.spec.end_at)):
            # The old timetable's fires up to now are settled above; keep when it was in
            # force and the window that bounded it, so verify and backfill know which fires
            # were the job's (an at job's one fire is checked from its row).
            conn.execute(Q.insert_job_timetable, {
                "job_id": job_id, "tenant_id": tenant_id, "cron": job.spec.cron,
                "tz": job.spec.tz, "since": job.timetable_since, "until": db_now,
                "start_at": job.spec.start_at, "end_at": job.spec.end_at})
            since = db_now
        nominal, due = first_run(spec, job_id, db_now)
        _refuse_no_fire(spec, nominal, job.fire_count + len(settled))
        try:
            changed = conn.execute(Q.update_job_document, {
                **patch_params(spec), "id": job_id, "tenant_id": tenant_id,
                "version": version, "next_run_at": due, "next_nominal_at": nominal,
                "timetable_since": since,
            }).rowcount
        except REFUSED as exc:
            raise refusal(exc) from exc
        assert changed == 1   # the row is locked and was checked above
        if spec.overlap != job.spec.overlap:
            conn.execute(Q.set_queued_runs_overlap, {"job_id": job_id, "overlap": spec.overlap})
        if spec.rate_limit != job.spec.rate_limit:
            conn.execute(Q.set_queued_runs_rate_limit,
                         {"job_id": job_id, "rate_limit": spec.rate_limit})
        conn.execute(Q.notify_jobs_changed)
        stored = get_job(conn, tenant_id, job_id)
    count_skipped(settled)
    return stored


def pause_job(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
              now: datetime | None = None, note: object = None) -> StoredJob:
    """Pause an active job, with an optional ``note`` saying why; pausing a paused job
    changes nothing (its note included). The fires whose nominal time has passed are
    settled first (written as the scheduler would): the pause applies to the fires after it.
    Who paused is the session's actor (``audit.act_as``)."""
    checked = check_note(note)
    settled: list[PlannedRun] = []
    with conn.transaction():
        job = lock_job(conn, tenant_id, job_id)
        if not job.paused:
            db_now = database_clock(conn, now)
            settled = _settle(conn, tenant_id, job, db_now)
            nominal, due = first_run(job.spec, job_id, db_now)
            conn.execute(Q.pause_job, {"id": job_id, "tenant_id": tenant_id,
                                       "next_run_at": due, "next_nominal_at": nominal,
                                       "note": checked})
            end_if_done(conn, job, settled, db_now, nominal)
        stored = get_job(conn, tenant_id, job_id)
    count_skipped(settled)
    return stored


def resume_job(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
               now: datetime | None = None) -> StoredJob:
    """Resume a paused job from now; else change nothing.

    The fires it missed while paused are not caught up: each is written ``skipped`` with
    reason ``paused``, so every fire keeps its row (the ledger rule).
    """
    settled: list[PlannedRun] = []
    with conn.transaction():
        job = lock_job(conn, tenant_id, job_id)
        if job.paused:
            db_now = database_clock(conn, now)
            settled = _settle(conn, tenant_id, job, db_now)
            nominal, due = first_run(job.spec, job_id, db_now)
            conn.execute(Q.resume_job, {"id": job_id, "tenant_id": tenant_id,
                                        "next_run_at": due, "next_nominal_at": nominal})
            end_if_done(conn, job, settled, db_now, nominal)
            conn.execute(Q.notify_jobs_changed)
        stored = get_job(conn, tenant_id, job_id)
    count_skipped(settled)
    return stored


def _settle(conn: psycopg.Connection[Any], tenant_id: int, job: StoredJob,
            now: datetime) -> list[PlannedRun]:
    """Write every fire of ``job`` whose nominal time is at or before ``now`` and that has
    no row yet (the fires from ``next_nominal_at`` on): as the scheduler would, by the
    job's catch-up and misfire rules, with its due time as it was (spread included, even if
    still ahead); or ``skipped``/``paused`` for a paused job. The caller then moves the job
    on from ``now``. Returns the runs written (a repeated run id is left as it was)."""
    runs = owed_runs(job, now, calendar_rules(conn, tenant_id, [job]).get(job.id),
                     tenant_window(conn, tenant_id) if job.spec.delivery_window is None
                     else None)
    if runs:
        insert_runs(conn, [(job.id, tenant_id, job.spec.priority, runs)], now)
        conn.execute(Q.count_fires, {"id": job.id, "fires": len(runs)})
    return runs


def owed_runs(job: StoredJob, now: datetime, calendar: Rule | None = None,
              tenant_window: Any = None) -> list[PlannedRun]:
    """The runs ``_settle`` writes for ``job`` (bulk actions write many jobs' at once), by
    its calendar rule (``calendar_rules``) if it names a calendar; ``tenant_window``: the
    tenant's default delivery window as stored (``tenant_window``)."""
    if job.next_nominal_at is None or job.next_run_at is None or job.next_nominal_at > now:
        return []
    due_job = _due_job(job, calendar, tenant_window)
    try:
        timetable = job.spec.timetable(job.id)
    except InvalidSchedule as exc:
        # A stored cron or tz that no longer parses (the scheduler puts such a job off): its
        # owed fires cannot be computed, so none is written; the change (an edit that fixes
        # the cron, a cancel) still goes through, and verify lists the old timetable.
        log.warning("job %s: its stored timetable cannot be read, its owed fires are not "
                    "written: %s", job.id, exc)
        return []

    def next_fire(after: datetime) -> datetime | None:
        fires = timetable.next_fires(after, 1)
        return fires[0] if fires else None

    if job.paused:
        runs = skipped_fires(job, timetable, due_job.spread_offset, now, "paused")
    else:
        runs = plan(due_job, now, next_fire, owed=True, remaining=job.remaining).runs
    return runs


def skipped_fires(job: StoredJob, timetable: Any, spread: timedelta, now: datetime,
                  reason: SkipReason) -> list[PlannedRun]:
    """Every fire of ``job`` from its next one through ``now``, as runs skipped for
    ``reason`` (no more than its ``max_runs`` leaves)."""
    assert job.next_nominal_at is not None
    runs = [PlannedRun(run_id=run_id(job.id, fire.at), nominal_at=fire.at,
                       due_at=fire.at + spread, skip_reason=reason)
            for fire in _fires_through(timetable, job.next_nominal_at, now)]
    return runs[:job.remaining] if job.remaining is not None else runs


def skip_owed_fires(conn: psycopg.Connection[Any], tenant_id: int, job_id: int,
                    reason: SkipReason, *, now: datetime | None = None) -> list[PlannedRun]:
    """Write every fire of an active, unpaused job up to now ``skipped`` for ``reason`` and
    move the job on from now, as a resume does for a pause's fires (the ledger rule: every
    fire keeps its row). A paused, ended or cancelled job is left as it is."""
    with conn.transaction():
        job = lock_job(conn, tenant_id, job_id, allow_cancelled=True)
        if not job.active or job.paused or job.next_nominal_at is None:
            return []
        db_now = database_clock(conn, now)
        try:
            timetable = job.spec.timetable(job.id)
        except InvalidSchedule:
            return []       # a stored timetable that no longer parses: as owed_runs says
        owed = skipped_fires(job, timetable, spread_of(job.spec, job.id), db_now, reason)
        # A fire whose spread puts it after now cannot have been sent: it stays the next.
        runs = [run for run in owed if run.due_at <= db_now]
        if runs:
            insert_runs(conn, [(job.id, tenant_id, job.spec.priority, runs)], db_now)
            conn.execute(Q.count_fires, {"id": job.id, "fires": len(runs)})
        nominal: datetime | None
        due: datetime | None
        if len(runs) < len(owed):
            nominal, due = owed[len(runs)].nominal_at, owed[len(runs)].due_at
        else:
            nominal, due = first_run(job.spec, job_id, db_now)
        conn.execute(Q.restart_job_from, {"id": job_id, "tenant_id": tenant_id,
                                          "next_run_at": due, "next_nominal_at": nominal})
        end_if_done(conn, job, runs, db_now, nominal)
    count_skipped(runs)
    return runs


def tenant_window(conn: psycopg.Connection[Any], tenant_id: int) -> Any:
    """The tenant's default delivery window as stored (jsonb), None without one."""
    row = conn.execute(Q.tenant_delivery_window, {"tenant_id": tenant_id}).fetchone()
    return None if row is None else row[0]


def _refuse_no_fire(spec: JobSpec, nominal: datetime | None, fires: int) -> None:
    """A change must leave the job a fire to come: an ``at`` or ``end_at`` already passed,
    or a ``max_runs`` already reached, is refused (cancel the job instead)."""
    if spec.max_runs is not None and fires >= spec.max_runs:
        raise InvalidJob(f"the job has had {fires} fires already; give max_runs more than "
                         f"{fires}, or cancel it", field="max_runs")
    if nominal is None:
        field = "at" if spec.at is not None else "end_at"
        raise InvalidJob(f"no fire of the schedule is left after now (see {field}); the job "
                         "would never fire again (cancel it instead)", field=field)


def end_if_done(conn: psycopg.Connection[Any], job: StoredJob, settled: list[PlannedRun],
                now: datetime, nominal: datetime | None = None) -> None:
    """End ``job`` if the fires just settled were its last (max_runs), or its schedule has
    no fire after ``now`` (a pause or resume past its at or end_at)."""
    remaining = job.remaining
    if remaining is not None and len(settled) >= remaining:
        _end(conn, job.id, "max_runs", settled[-1].nominal_at if settled else now)
    elif nominal is None and job.next_nominal_at is not None:
        _end(conn, job.id, job.spec.timetable(job.id).end_reason, now)


def _end(conn: psycopg.Connection[Any], job_id: int, reason: str, ended_at: datetime) -> None:
    conn.execute(Q.end_job, {"id": job_id, "reason": reason, "ended_at": ended_at})


def count_skipped(settled: list[PlannedRun]) -> None:
    """Count the skipped runs a change settled, once it has committed."""
    for run in settled:
        if run.skip_reason:
            metrics.labelled(metrics.runs_skipped, run.skip_reason).inc()


def _fires_through(timetable: Any, first: datetime, until: datetime) -> list[Any]:
    """The fires from ``first`` (itself a fire) up to and including ``until``."""
    return [*timetable.fires_between(first - timedelta(microseconds=1), until, 10**9)]


def _due_job(job: StoredJob, calendar: Rule | None = None,
             tenant_window: Any = None) -> DueJob:
    # The spread is the spec's: next_run_at may be earlier than nominal + spread (a fire a
    # calendar moved to the business day before).
    assert job.next_nominal_at is not None and job.next_run_at is not None
    spec = job.spec
    return DueJob(id=job.id, next_nominal_at=job.next_nominal_at,
                  spread_offset=spread_of(spec, job.id), catchup=spec.catchup,
                  max_catchup=spec.max_catchup, misfire_policy=spec.misfire.policy,
                  misfire_seconds=spec.misfire.seconds, misfire_until=spec.misfire.until,
                  tz=spec.tz, calendar=calendar,
                  window=resolve(spec.delivery_window, tenant_window))


_CALENDARS = TickCalendars()


def calendar_rules(conn: psycopg.Connection[Any], tenant_id: int,
                   jobs: Sequence[StoredJob]) -> dict[int, Rule]:
    """The calendar rule of each of ``jobs`` that names a calendar (one query for all)."""
    named = [job for job in jobs if job.spec.calendar is not None]
    if not named:
        return {}
    dates = _CALENDARS.load(conn, ((tenant_id, j.spec.calendar["exclude"])  # type: ignore[index]
                                   for j in named))
    rules: dict[int, Rule] = {}
    for job in named:
        field = job.spec.calendar
        assert field is not None
        rules[job.id] = Rule(dates=dates.get((tenant_id, field["exclude"]), frozenset()),
                             on_excluded=field["on_excluded"],  # type: ignore[arg-type]
                             business_days=business_days(field["business_days"]),
                             tz=job.spec.tz)
    return rules


def cancel_job(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
               now: datetime | None = None) -> StoredJob:
    """Cancel a job for good: it stays readable with its runs. The fires whose nominal time
    has passed are settled first, then its queued runs are cancelled (a row each, so the
    ledger still accounts for them). Cancelling a cancelled job changes nothing."""
    settled: list[PlannedRun] = []
    with conn.transaction():
        job = lock_job(conn, tenant_id, job_id, allow_cancelled=True)
        if job.active:
            db_now = database_clock(conn, now)
            settled = _settle(conn, tenant_id, job, db_now)
            conn.execute(Q.cancel_job, {"id": job_id, "tenant_id": tenant_id, "now": db_now})
            conn.execute(Q.cancel_queued_runs, {"job_id": job_id})
        stored = get_job(conn, tenant_id, job_id)
    count_skipped(settled)
    return stored


def trigger_job(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
                now: datetime | None = None) -> Triggered:
    """Queue one run due now, named after the current second (paused jobs may be triggered)."""
    with conn.transaction():
        job = lock_job(conn, tenant_id, job_id)
        at = database_now(conn, now).replace(microsecond=0)
        rid = run_id(job_id, at)
        row = conn.execute(Q.insert_manual_run, {
            "run_id": rid, "job_id": job_id, "tenant_id": tenant_id,
            "priority": job.spec.priority, "now": at}).fetchone()
        if row is not None:
            conn.execute(Q.notify_runs_queued, {"priorities": job.spec.priority})
    return Triggered(run_id=rid, created=row is not None)


def lock_job(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
             allow_cancelled: bool = False) -> StoredJob:
    row = conn.cursor(row_factory=dict_row).execute(
        Q.lock_tenant_job, {"id": job_id, "tenant_id": tenant_id}).fetchone()
    if row is None:
        raise JobNotFound(f"no job {job_id}")
    job = stored_job(row)
    if not job.active and not allow_cancelled:
        how = (f"ended ({job.ended_reason}) at {job.ended_at}" if job.ended_reason
               else f"was cancelled at {job.cancelled_at}")
        raise JobCancelled(f"job {job_id} {how}; it cannot be changed or triggered")
    return job


def _patched(job: StoredJob, patch: dict[str, Any]) -> JobSpec:
    if "active" in patch:
        raise InvalidJob("active cannot be patched: cancel with DELETE, or pause/resume",
                         field="active")
    if "key" in patch and patch["key"] != job.spec.key:
        raise InvalidJob(f"key cannot be changed (it is {job.spec.key!r}); create a new job",
                         field="key")
    return JobSpec.from_document(merged_document(job_document(job.spec), patch))


def stored_job(row: dict[str, Any]) -> StoredJob:
    """A row of ``stored_jobs``: its document through the column table, its state here."""
    return StoredJob(id=row["id"], spec=spec_from_row(row), paused=row["paused"],
                     next_run_at=row["next_run_at"], next_nominal_at=row["next_nominal_at"],
                     created_at=row["created_at"], updated_at=row["updated_at"],
                     cancelled_at=row["cancelled_at"], version=row["version"],
                     timetable_since=row["timetable_since"] or row["created_at"],
                     fire_count=row["fire_count"], ended_at=row["ended_at"],
                     ended_reason=row["ended_reason"],
                     pause=Pause(note=row["pause_note"], at=row["paused_at"],
                                 by=row["paused_by"]) if row["paused"] else None)


def import_batch(conn: psycopg.Connection[Any], tenant_id: int, specs: Sequence[JobSpec], *,
                 now: datetime | None = None) -> list[CreatedJob | InvalidJob]:
    """``create_jobs`` for bulk imports: one entry per spec, in order: the job, or why the
    database refused it. The batch's insert is one ``job.bulk_create`` audit entry (the
    jobs trigger's, functions/audit_jobs.sql), not one per job.

    A spec the tenant may not have (``admission``: a handler or limit not granted, over a
    quota) is reported as its InvalidJob and the others are stored, in order: those that
    fit a quota take its room first.

    Every document was validated before it came here, and validation measures what the
    table's constraints check; but a line the database still refuses must not take the
    batch with it. Then the batch is stored again one job at a time, each in a savepoint,
    and the refused ones are reported, naming the field where the constraint says which.
    """
    with conn.transaction():
        admitted = admit(conn, tenant_id, specs)
        allowed = [spec for spec, refused in zip(specs, admitted, strict=True)
                   if refused is None]
        stored: list[CreatedJob | InvalidJob]
        try:
            with conn.transaction():
                stored = list(create_jobs(conn, tenant_id, allowed, now=now))
        except REFUSED:
            stored = []
            for spec in allowed:
                try:
                    with conn.transaction():
                        stored.extend(create_jobs(conn, tenant_id, [spec], now=now))
                except REFUSED as exc:
                    stored.append(refusal(exc))
        written = iter(stored)
        results = [next(written) if refused is None else refused for refused in admitted]
    return results


# What the database says when a constraint refuses a row: a CHECK, a NOT NULL, a value out of
# its type's range. Never expected after validation; reported as the job's error, not a 500.
REFUSED = (psycopg.errors.IntegrityError, psycopg.errors.DataError)
# PostgreSQL names a column's CHECK jobs_<column>_check (jobs_<column>_check1, … for more).
_CHECK_NAME = re.compile(r"jobs_([a-z_]+?)_check\d*")


def refusal(exc: psycopg.Error) -> InvalidJob:
    """The job-level error for a row the database refused: the field is the column a
    constraint named ``jobs_<column>_check`` (or the NOT NULL column) guards, if any."""
    column = exc.diag.column_name
    named = _CHECK_NAME.fullmatch(exc.diag.constraint_name or "")
    if column is None and named:
        column = named[1]
    field = column if column in DOCUMENT_FIELDS else "job"
    return InvalidJob(f"the database refused the job: {exc.diag.message_primary or exc}",
                      field=field)

