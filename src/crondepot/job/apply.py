"""Schedules as code: make a tenant's jobs what a set of job documents says, in one go.

``apply_set`` takes the documents of a schedules file (or of ``@crondepot.periodic``
declarations, or of ``POST /v1/apply``), each with its ``key``, and in ONE transaction:

- creates the jobs whose key is new (through admission: grants and quotas, as a create);
- updates the jobs whose stored document differs from the file's, read with the defaults
  (``JobSpec`` equality, what an idempotent create compares), through ``update_job``, so
  the ledger rule holds: the fires before the change are settled first;
- leaves every other job untouched (an unchanged job is not written at all);
- with ``prune``, cancels the scope's active jobs the set no longer names (``cancel_job``:
  owed fires settled, queued runs cancelled), and only those.

The *scope* is a label (``deploy=reminders``) the apply stamps on every job it writes: it
marks what the apply owns. A key that names a job without the label is refused (that job is
someone else's), and a prune looks only at jobs carrying it. A prune needs a scope.

Applies of one (tenant, scope) take turns on a transaction-level advisory lock (queries
``apply_lock``), taken before anything is read. Why that rather than row locks: what two
deploys race on is the *set* of the scope's jobs, including jobs that do not exist yet (two
creates of one key) and jobs one of them is about to prune; rows that do not exist cannot be
locked, and locking every row of a large scope dirties every page for a no-op. With the
lock, the second apply reads the jobs after the first committed and plans against that: it
reports no change when both carry the same set, or applies its own on top, never a mix. A
job the apply changes is also row-locked by ``update_job`` / ``cancel_job`` (against the
API and the scheduler), and its version checked.

The plan says, for every job created, updated or cancelled, which fires the change adds and
removes over the next ``days`` days (the old and the new ``Schedule``, what the scheduler
reads), with the notes DST gives them, and for a cancel how many queued runs it cancels. A
dry run does everything in the transaction and rolls it back: it reports exactly what the
apply would do, refusals included, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from crondepot.base.errors import CrondepotError, InvalidJob
from crondepot.db import Q
from crondepot.db.clock import database_now
from crondepot.job.admission import admit
from crondepot.job.spec import JobSpec
from crondepot.job.spec import labels as checked_labels
from crondepot.job.store import (
    REFUSED,
    KeyConflict,
    StoredJob,
    VersionMismatch,
    cancel_job,
    create_jobs,
    get_job,
    job_document,
    refusal,
    stored_job,
    update_job,
)
from crondepot.tenancy.audit import record_summary
from crondepot.timetable import FIRE_NOTES, Fire, Schedule

DEFAULT_DAYS = 7
MAX_DAYS = 366
FIRES_LISTED = 20          # fires listed per job and direction; all are counted
FIRES_SCANNED = 50_000     # per job and timetable: an every-minute job over 30 days is 43,200
KEYS_PER_QUERY = 10_000
MAX_PROBLEMS = 100         # documents' problems reported at once


@dataclass(frozen=True, slots=True)
class Scope:
    """The label an apply stamps on what it writes and prunes within."""

    label: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Scope:
        """``deploy=reminders`` as a scope; InvalidJob naming ``scope`` otherwise."""
        label, sep, value = text.partition("=")
        if not sep or not label:
            raise InvalidJob(f"expected a scope like deploy=reminders (a label and its "
                             f"value), got {text!r}", field="scope")
        return cls.checked(label, value)

    @classmethod
    def checked(cls, label: object, value: object) -> Scope:
        if not isinstance(label, str) or not isinstance(value, str):
            raise InvalidJob("expected a scope of one label with a text value, like "
                             "{\"deploy\": \"reminders\"}", field="scope")
        try:
            checked_labels({label: value})
        except InvalidJob as exc:
            raise InvalidJob(f"scope: {exc}", field="scope") from None
        return cls(label, value)

    @property
    def text(self) -> str:
        return f"{self.label}={self.value}"

    def document(self) -> dict[str, str]:
        return {self.label: self.value}


class Place(str):
    """Where a document is (``reminders.yaml:8``, the line its item starts on), and where
    each of its top-level fields is (``reminders.yaml:9`` for its cron), so an error names
    the line of the field at fault."""

    fields: dict[str, str]

    def __new__(cls, text: str, fields: dict[str, str]) -> Place:
        place = super().__new__(cls, text)
        place.fields = fields
        return place

    def of(self, field: str) -> str:
        top = field.split(".", 1)[0].split("[", 1)[0]
        return self.fields.get(top, str(self))


@dataclass(frozen=True, slots=True)
class Declared:
    """One document of the set, read: ``where`` says where it came from, for errors
    ("reminders.yaml:12", "jobs[3]"); ``path`` is the prefix of its fields' names in an API
    problem ("jobs[3]")."""

    where: str
    spec: JobSpec
    path: str = ""


class ApplyRefused(InvalidJob):
    """The set cannot be applied as it is; nothing was changed. The message names where
    (file and line, or index) and the field; ``problems`` lists every one found."""


def located(exc: InvalidJob, where: str, path: str = "", key: str | None = None) -> InvalidJob:
    """``exc`` of one document, said with where the document is. A refusal of its own
    kind (not granted, over a quota) keeps its kind, so the API answers its problem type;
    a plain one becomes ApplyRefused."""
    def said(field: str) -> str:
        place = where.of(field) if isinstance(where, Place) else where
        return place + (f" (key {key!r})" if key else "")

    problems = [(_joined(path, f), f"{said(f)}: {_naming(f, m)}") for f, m in exc.problems]
    if type(exc) is not InvalidJob and not isinstance(exc, ApplyRefused):
        exc.args = (problems[0][1],)
        exc.field, exc.problems = problems[0][0], problems
        return exc
    return ApplyRefused(problems[0][1], field=problems[0][0], problems=problems)


def _joined(path: str, name: str) -> str:
    if not path:
        return name
    return f"{path}.{name}" if name else path


def _naming(name: str, message: str) -> str:
    return message if not name or message.startswith(f"{name}:") else f"{name}: {message}"


def read_documents(docs: Iterable[tuple[str, str, Any]], scope: Scope | None) -> list[Declared]:
    """Each ``(where, path, document)`` checked and read (``JobSpec.from_document``) with
    the scope's label stamped on it; ApplyRefused with every problem (up to MAX_PROBLEMS)
    if any is wrong: a key missing or given twice, ``active: false``, a label of the scope's
    name with another value, or anything a create would refuse."""
    found: list[Declared] = []
    problems: list[tuple[str, str]] = []
    seen: dict[str, str] = {}
    for where, path, doc in docs:
        if len(problems) >= MAX_PROBLEMS:
            break
        key = doc.get("key") if isinstance(doc, dict) else None
        try:
            spec = JobSpec.from_document(_stamped(doc, scope))
        except InvalidJob as exc:
            problems.extend(located(exc, where, path, key if isinstance(key, str) else None)
                            .problems)
            continue
        wrong = _set_rule(spec, scope)
        if wrong is None and spec.key in seen:
            wrong = InvalidJob(f"key {spec.key!r} is given twice (first at {seen[spec.key]})",
                               field="key")
        if wrong is not None:
            problems.extend(located(wrong, where, path, None).problems)
            continue
        assert spec.key is not None
        seen[spec.key] = where
        found.append(Declared(where, spec, path))
    if problems:
        raise ApplyRefused(problems[0][1], field=problems[0][0], problems=problems)
    return found


def _stamped(doc: Any, scope: Scope | None) -> Any:
    """The document with the scope's label added to its labels (a label of that name with
    another value is left for ``_set_rule`` to name)."""
    if scope is None or not isinstance(doc, dict):
        return doc
    labels = doc.get("labels")
    if labels is None:
        labels = {}
    if not isinstance(labels, dict):
        return doc                  # from_document names it
    return {**doc, "labels": {scope.label: scope.value, **labels}}


def _set_rule(spec: JobSpec, scope: Scope | None) -> InvalidJob | None:
    if spec.key is None:
        return InvalidJob("every job of an applied set needs a key: it is how the next apply "
                          "finds the job again", field="key")
    if not spec.active:
        return InvalidJob("active: false has no meaning in an applied set: remove the job "
                          "from the set and apply with prune to cancel it", field="active")
    if scope is not None and spec.labels.get(scope.label) != scope.value:
        return InvalidJob(f"labels.{scope.label} is {spec.labels.get(scope.label)!r} but the "
                          f"scope is {scope.text}: the apply stamps its scope on every job "
                          "it writes", field=f"labels.{scope.label}")
    return None


# -- the plan ------------------------------------------------------------------------------

@dataclass(slots=True, kw_only=True)
class Change:
    key: str
    action: str                       # create | update | cancel
    id: int | None                    # the job's id (a create's only after it is written)
    where: str | None                 # the document's place (None: a pruned job)
    fields: list[str] = field(default_factory=list)     # the top-level fields an update changes
    paused: bool = False
    added: list[Fire] = field(default_factory=list)
    removed: list[Fire] = field(default_factory=list)
    truncated: bool = False           # more than FIRES_SCANNED fires in the window
    runs_cancelled: int = 0

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "key": self.key, "action": self.action, "id": self.id,
            "fires_added": len(self.added), "fires_removed": len(self.removed),
            "added": [_fire(f) for f in self.added[:FIRES_LISTED]],
            "removed": [_fire(f) for f in self.removed[:FIRES_LISTED]],
        }
        if self.action == "update":
            doc["fields"] = sorted(self.fields)
        if self.action == "cancel":
            doc["runs_cancelled"] = self.runs_cancelled
        if self.paused:
            doc["paused"] = True
        if self.truncated:
            doc["truncated"] = True
        return doc


@dataclass(slots=True, kw_only=True)
class Plan:
    tenant_id: int
    scope: Scope | None
    prune: bool
    dry_run: bool
    days: int
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0

    def count(self, action: str) -> int:
        return sum(1 for c in self.changes if c.action == action)

    @property
    def counts(self) -> dict[str, int]:
        return {"created": self.count("create"), "updated": self.count("update"),
                "cancelled": self.count("cancel"), "unchanged": self.unchanged,
                "changes": len(self.changes),
                "runs_cancelled": sum(c.runs_cancelled for c in self.changes),
                "fires_added": sum(len(c.added) for c in self.changes),
                "fires_removed": sum(len(c.removed) for c in self.changes)}

    def document(self) -> dict[str, Any]:
        """The plan as JSON for CI review: stable (changes by key, fires by instant, no
        instant of when it ran), so two runs on the same state print the same plan. A
        create's ``id`` is null in a dry run (the id it was given was rolled back)."""
        changes = sorted(self.changes, key=lambda c: (c.key, c.action))
        return {"scope": None if self.scope is None else self.scope.document(),
                "prune": self.prune, "dry_run": self.dry_run, "days": self.days,
                "counts": self.counts,
                "changes": [c.document() for c in changes]}


def _fire(fire: Fire) -> dict[str, Any]:
    note = None if fire.note is None else FIRE_NOTES[fire.note].format(
        scheduled=fire.scheduled_local.isoformat())
    return {"at": fire.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "local": fire.local.isoformat(), "note": note}


def _fires(schedule: Schedule | None, after: datetime, until: datetime,
           remaining: int | None) -> tuple[list[Fire], bool]:
    if schedule is None:
        return [], False
    fires = schedule.fires_between(after, until, FIRES_SCANNED + 1)
    truncated = len(fires) > FIRES_SCANNED
    fires = fires[:FIRES_SCANNED]
    if remaining is not None:
        fires = fires[:remaining]
    return fires, truncated


def fire_diff(old: Schedule | None, new: Schedule | None, after: datetime, until: datetime,
              *, old_remaining: int | None = None,
              new_remaining: int | None = None) -> tuple[list[Fire], list[Fire], bool]:
    """(added, removed, truncated): the fires of ``new`` that ``old`` has not, and the other
    way round, with ``after < at <= until``, compared by instant. ``*_remaining`` bound each
    side by what ``max_runs`` leaves."""
    before, cut_old = _fires(old, after, until, old_remaining)
    later, cut_new = _fires(new, after, until, new_remaining)
    old_at = {f.at for f in before}
    new_at = {f.at for f in later}
    return ([f for f in later if f.at not in old_at], [f for f in before if f.at not in new_at],
            cut_old or cut_new)


def _remaining(spec: JobSpec, fire_count: int) -> int | None:
    return None if spec.max_runs is None else max(spec.max_runs - fire_count, 0)


# -- applying ------------------------------------------------------------------------------

class _DryRun(Exception):
    """Raised inside the apply's transaction to roll a dry run back."""


def apply_set(conn: psycopg.Connection[Any], tenant_id: int, declared: Sequence[Declared], *,
              scope: Scope | None, prune: bool = False, dry_run: bool = False,
              days: int = DEFAULT_DAYS, now: datetime | None = None,
              expect: dict[str, int] | None = None, audit: bool = True) -> Plan:
    """Make the tenant's jobs what ``declared`` says (see the module's docstring); return
    the plan. All or nothing: any refusal raises ApplyRefused (naming the document) and
    nothing is changed. ``expect`` maps keys to the versions the caller read (If-Match):
    VersionMismatch if a job is at another (or does not exist). ``audit``: write the one
    ``job.apply`` summary entry (a single upsert leaves it to the row's own entry)."""
    if prune and scope is None:
        raise InvalidJob("prune needs a scope: without one it would cancel every job of the "
                         "tenant the set does not name", field="prune")
    if not 1 <= days <= MAX_DAYS:
        raise InvalidJob(f"expected days from 1 to {MAX_DAYS}, got {days}", field="days")
    plan = Plan(tenant_id=tenant_id, scope=scope, prune=prune, dry_run=dry_run, days=days)
    try:
        with conn.transaction():
            _apply(conn, plan, declared, now, expect or {}, audit)
            if dry_run:
                raise _DryRun
    except _DryRun:
        for change in plan.changes:
            if change.action == "create":
                change.id = None
    return plan


def _apply(conn: psycopg.Connection[Any], plan: Plan, declared: Sequence[Declared],
           now: datetime | None, expect: dict[str, int], audit: bool) -> None:
    tenant_id, scope = plan.tenant_id, plan.scope
    lock = f"{tenant_id}:{scope.text if scope else ''}"
    conn.execute(Q.apply_lock, {"name": f"crondepot.apply:{lock}"})
    start = database_now(conn, now)
    until = start + timedelta(days=plan.days)
    for expected, version in expect.items():
        found = _by_keys(conn, tenant_id, [expected])
        current = found[expected].version if expected in found else 0
        if current != version:
            raise VersionMismatch(f"the job with key {expected!r} is at version {current}, "
                                  f"not {version}" + ("" if current else " (it does not exist)"),
                                  current=current)
    creates: list[Declared] = []
    updates: list[tuple[Declared, StoredJob]] = []
    # A chunk of keys at a time: only the jobs that change are kept, so a no-op apply of a
    # large set holds its documents but not every stored job besides.
    for first in range(0, len(declared), KEYS_PER_QUERY):
        chunk = declared[first:first + KEYS_PER_QUERY]
        stored = _by_keys(conn, tenant_id, [d.spec.key for d in chunk if d.spec.key])
        for item in chunk:
            _classify(plan, item, stored.get(item.spec.key or ""), creates, updates)
    # Row locks before the tenant's lock (creates' admission), as a PATCH takes them, so
    # an apply and a PATCH never wait on each other in opposite orders.
    for item, job in updates:
        _update(conn, plan, item, job, start, until, now)
    if plan.prune and scope is not None:
        named = {d.spec.key for d in declared}
        gone = [get_job(conn, tenant_id, job_id)
                for job_id, key in conn.execute(Q.scope_jobs, {
                    "tenant_id": tenant_id, "labels": Jsonb(scope.document())})
                if key not in named]
        _cancel(conn, plan, gone, start, until, now)
    if creates:
        _create(conn, plan, creates, start, until, now)
    if plan.changes and audit:
        record_summary(conn, tenant_id, "job.apply",
                       f"scope:{scope.text}" if scope else "scope:", {
                           "scope": scope.document() if scope else None, "prune": plan.prune,
                           **{k: v for k, v in plan.counts.items()
                              if k not in ("fires_added", "fires_removed")}})


def _classify(plan: Plan, item: Declared, job: StoredJob | None, creates: list[Declared],
              updates: list[tuple[Declared, StoredJob]]) -> None:
    """Whether ``item`` creates, updates or leaves its job, or why it may not."""
    scope, key = plan.scope, item.spec.key
    assert key is not None
    if job is None:
        creates.append(item)
    elif scope is not None and job.spec.labels.get(scope.label) != scope.value:
        raise located(InvalidJob(
            f"key {key!r} names job {job.id}, which is not in the scope {scope.text} "
            "(it lacks the label): an apply never touches jobs outside its scope; "
            f"give it the label to adopt it, or use another key", field="key"),
            item.where, item.path)
    elif job.spec == item.spec and job.cancelled_at is None:
        plan.unchanged += 1      # the same document (an ended job: it is done)
    elif not job.active:
        how = (f"was cancelled at {job.cancelled_at}" if job.cancelled_at is not None
               else f"ended ({job.ended_reason})")
        raise located(InvalidJob(
            f"key {key!r} names job {job.id}, which {how}; a key names one job for "
            "good: give the job another key", field="key"), item.where, item.path)
    else:
        updates.append((item, job))


def _by_keys(conn: psycopg.Connection[Any], tenant_id: int,
             keys: list[str]) -> dict[str, StoredJob]:
    found: dict[str, StoredJob] = {}
    cursor = conn.cursor(row_factory=dict_row)
    for start in range(0, len(keys), KEYS_PER_QUERY):
        for row in cursor.execute(Q.jobs_by_keys, {"tenant_id": tenant_id,
                                                   "keys": keys[start:start + KEYS_PER_QUERY]}):
            job = stored_job(row)
            assert job.spec.key is not None
            found[job.spec.key] = job
    return found


def _update(conn: psycopg.Connection[Any], plan: Plan, item: Declared, job: StoredJob,
            start: datetime, until: datetime, now: datetime | None) -> None:
    old, new = job_document(job.spec), job_document(item.spec)
    # The whole document replaces the stored one: a field the file leaves out goes back to
    # its default (null resets it in the patch), as the file read with defaults says.
    patch: dict[str, Any] = {name: None for name in old} | new
    patch.pop("active")
    try:
        updated = update_job(conn, plan.tenant_id, job.id, patch, version=job.version,
                             now=now)
    except InvalidJob as exc:
        raise located(exc, item.where, item.path, item.spec.key) from None
    except VersionMismatch as exc:          # a PATCH between the read and the row lock
        raise VersionMismatch(f"{item.where}: {exc}; apply again", current=exc.current) \
            from None
    except CrondepotError as exc:           # a cancel meanwhile
        raise located(InvalidJob(str(exc), field="key"), item.where, item.path,
                      item.spec.key) from None
    added, removed, cut = fire_diff(
        job.spec.timetable(job.id), item.spec.timetable(job.id), start, until,
        old_remaining=job.remaining, new_remaining=_remaining(item.spec, updated.fire_count))
    assert item.spec.key is not None
    plan.changes.append(Change(
        key=item.spec.key, action="update", id=job.id, where=item.where, paused=job.paused,
        fields=[n for n in sorted(set(old) | set(new)) if old.get(n) != new.get(n)],
        added=added, removed=removed, truncated=cut))


def _cancel(conn: psycopg.Connection[Any], plan: Plan, jobs: list[StoredJob],
            start: datetime, until: datetime, now: datetime | None) -> None:
    if not jobs:
        return
    queued = dict(conn.execute(Q.queued_run_counts, {"ids": [j.id for j in jobs]}).fetchall())
    for job in jobs:
        cancel_job(conn, plan.tenant_id, job.id, now=now)
        _, removed, cut = fire_diff(job.spec.timetable(job.id), None, start, until,
                                    old_remaining=job.remaining)
        plan.changes.append(Change(
            key=job.spec.key or f"id:{job.id}", action="cancel", id=job.id, where=None,
            paused=job.paused, removed=removed, truncated=cut,
            runs_cancelled=int(queued.get(job.id, 0))))


def _create(conn: psycopg.Connection[Any], plan: Plan, creates: list[Declared],
            start: datetime, until: datetime, now: datetime | None) -> None:
    specs = [d.spec for d in creates]
    for item, refused in zip(creates, admit(conn, plan.tenant_id, specs), strict=True):
        if refused is not None:
            raise located(refused, item.where, item.path, item.spec.key)
    try:
        with conn.transaction():
            made = create_jobs(conn, plan.tenant_id, specs, now=now)
    except REFUSED as exc:
        raise ApplyRefused(f"the database refused a job: {refusal(exc)}",
                           field="jobs") from exc
    for item, job in zip(creates, made, strict=True):
        assert item.spec.key is not None
        if not job.created:
            # Another writer (outside this scope's lock: an API create) took the key meanwhile.
            raise KeyConflict(f"{item.where}: key {item.spec.key!r} was created by another "
                              "writer during the apply; apply again", key=item.spec.key)
        added, _, cut = fire_diff(None, item.spec.timetable(job.id), start, until,
                                  new_remaining=item.spec.max_runs)
        plan.changes.append(Change(key=item.spec.key, action="create", id=job.id,
                                   where=item.where, added=added, truncated=cut))


# -- export --------------------------------------------------------------------------------

def export_document(job: StoredJob) -> dict[str, Any]:
    """The document of ``job`` as a schedules file holds it: what ``apply`` reads back into
    the same JobSpec (so export -> apply changes nothing). ``active`` and null fields are
    left out (their defaults); the paused state is not part of a document."""
    doc = job_document(job.spec)
    return {name: value for name, value in doc.items()
            if value is not None and name != "active"}


def export_jobs(conn: psycopg.Connection[Any], tenant_id: int, scope: Scope | None, *,
                batch: int = 1000) -> Iterator[StoredJob]:
    """The tenant's active jobs (paused included; not cancelled, not ended), in id order,
    read through a server-side cursor ``batch`` rows at a time: memory stays bounded."""
    with conn.transaction(), conn.cursor(name="crondepot_export", row_factory=dict_row) as cur:
        cur.itersize = batch
        cur.execute(Q.export_jobs, {"tenant_id": tenant_id,
                                    "labels": Jsonb(scope.document()) if scope else None})
        for row in cur:
            yield stored_job(row)


__all__ = [
    "DEFAULT_DAYS",
    "ApplyRefused",
    "Change",
    "Declared",
    "Place",
    "Plan",
    "Scope",
    "apply_set",
    "export_document",
    "export_jobs",
    "fire_diff",
    "located",
    "read_documents",
]
