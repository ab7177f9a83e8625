"""Bulk actions: pause, resume or cancel every job of one tenant that a filter matches
(when the SMS gateway is down, pausing millions of jobs one by one is no lever).

Set-based: the matching jobs are taken in batches in id order, each batch in one
transaction of a few statements (lock the batch, write every job's owed fires with one
insert, change every job with one update), never a statement per job. Each job goes through
the rule its single-job action keeps (job/store.py, the ledger rule of docs/ledger.md): the
fires whose nominal time has passed are settled first, computed by the same ``owed_runs``,
then the job moves on from the batch's instant. The audit log gets each job's row entry
(the triggers of migration 0003, as for a single pause) and one summary of the action.

A filter with no criterion is refused: "every job" is not something to ask for by accident.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from crondepot.base.errors import InvalidJob
from crondepot.base.jsontext import unstorable
from crondepot.base.vocab import LIMIT_NAME, PRIORITIES
from crondepot.db import Q
from crondepot.db.clock import database_clock
from crondepot.job.spec import labels as checked_labels
from crondepot.job.store import (
    FirstFires,
    StoredJob,
    calendar_rules,
    count_skipped,
    end_if_done,
    first_run,
    owed_runs,
    stored_job,
    tenant_window,
)
from crondepot.limits.holds import checked_host
from crondepot.scheduler.plan import PlannedRun
from crondepot.scheduler.tick import insert_runs
from crondepot.tenancy import scope
from crondepot.tenancy.audit import record_summary

Action = Literal["pause", "resume", "cancel"]
ACTIONS: tuple[Action, ...] = ("pause", "resume", "cancel")
# Jobs a bulk action changes per transaction: large enough that the statements' fixed cost
# is small per job, small enough that the row locks are held briefly (a tick waits on them).
BATCH = 1000
SAMPLE = 10
# The jobs each action changes: pause the unpaused, resume the paused, cancel any active one.
_PAUSED: dict[Action, bool | None] = {"pause": False, "resume": True, "cancel": None}


@dataclass(frozen=True, slots=True, kw_only=True)
class BulkFilter:
    """Which of a tenant's jobs: every criterion given must hold (AND)."""

    key_prefix: str | None = None
    labels: dict[str, str] | None = None
    host: str | None = None
    rate_limit: str | None = None
    priority: str | None = None

    @classmethod
    def checked(cls, *, key_prefix: str | None = None, labels: dict[str, str] | None = None,
                host: str | None = None, rate_limit: str | None = None,
                priority: str | None = None) -> BulkFilter:
        """A filter from what a caller gave, or InvalidJob naming the bad criterion."""
        if key_prefix is not None and not key_prefix:
            raise InvalidJob("expected key_prefix to be at least one character, got \"\"",
                             field="key_prefix")
        if key_prefix is not None and (why := unstorable(key_prefix)) is not None:
            raise InvalidJob(f"key_prefix {why}", field="key_prefix")
        if labels is not None:
            labels = checked_labels(labels) or None
        if host is not None:
            host = checked_host(host)
        if rate_limit is not None and not LIMIT_NAME.fullmatch(rate_limit):
            raise InvalidJob(f"expected rate_limit to be a limit name, got {rate_limit!r}",
                             field="rate_limit")
        if priority is not None and priority not in PRIORITIES:
            raise InvalidJob(f"expected priority to be one of {', '.join(PRIORITIES)}, got "
                             f"{priority!r}", field="priority")
        found = cls(key_prefix=key_prefix, labels=labels, host=host, rate_limit=rate_limit,
                    priority=priority)
        if found.empty:
            raise InvalidJob("a bulk action needs at least one criterion (key_prefix, "
                             "labels, host, rate_limit or priority)", field="filter")
        return found

    @property
    def empty(self) -> bool:
        return not (self.key_prefix or self.labels or self.host or self.rate_limit
                    or self.priority)

    def document(self) -> dict[str, Any]:
        return {name: value for name, value in (
            ("key_prefix", self.key_prefix), ("labels", self.labels), ("host", self.host),
            ("rate_limit", self.rate_limit), ("priority", self.priority)) if value}

    def params(self, action: Action) -> dict[str, Any]:
        return {"key_prefix": self.key_prefix, "host": self.host,
                "labels": Jsonb(self.labels) if self.labels else None,
                "rate_limit": self.rate_limit, "priority": self.priority,
                "paused": _PAUSED[action]}


@dataclass(frozen=True, slots=True, kw_only=True)
class Preview:
    count: int              # jobs the action would change
    sample: list[str]       # the first few, by key (id when keyless), in id order


def parse_label(text: str) -> tuple[str, str]:
    """``bank=42`` -> ("bank", "42"); InvalidJob naming ``label`` otherwise."""
    key, sep, value = text.partition("=")
    if not sep:
        raise InvalidJob(f"expected a label filter like bank=42, got {text!r}", field="label")
    checked_labels({key: value})
    return key, value


def parse_labels(text: str) -> dict[str, str] | None:
    """``bank=42, kind=emi`` (the console's label box) as labels; None for none."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    return dict(parse_label(part) for part in parts) or None


def preview(conn: psycopg.Connection[Any], tenant_id: int, action: Action,
            where: BulkFilter, *, sample: int = SAMPLE) -> Preview:
    """What ``apply`` would change now (a dry run): a count and the first keys."""
    row = conn.execute(Q.bulk_preview, {"tenant_id": tenant_id, "sample": sample,
                                        **where.params(action)}).fetchone()
    assert row is not None
    return Preview(count=row[0], sample=list(row[1]))


def apply(conn: psycopg.Connection[Any], tenant_id: int, action: Action, where: BulkFilter,
          *, now: datetime | None = None, batch: int = BATCH) -> int:
    """Do ``action`` to every matching job, a batch per transaction; the jobs changed."""
    assert not where.empty, "checked by BulkFilter.checked"
    changed, after = 0, 0
    while True:
        with conn.transaction():
            rows = conn.cursor(row_factory=dict_row).execute(Q.bulk_lock_batch, {
                "tenant_id": tenant_id, "after": after, "limit": batch,
                **where.params(action)}).fetchall()
            if not rows:
                break
            jobs = [stored_job(row) for row in rows]
            settled = _change(conn, tenant_id, action, jobs, database_clock(conn, now))
            changed += len(jobs)
            after = jobs[-1].id
            record_summary(conn, tenant_id, f"job.bulk_{action}", f"jobs {jobs[0].id}..{after}",
                           {"filter": where.document(), "changed": len(jobs)})
        # An API request that is one transaction (behind a pooler) commits here too: row
        # locks held for one batch, as on a direct connection.
        scope.checkpoint(conn)
        count_skipped(settled)
        if len(rows) < batch:
            break
    return changed


def _change(conn: psycopg.Connection[Any], tenant_id: int, action: Action,
            jobs: list[StoredJob], now: datetime) -> list[PlannedRun]:
    """One batch: the owed fires of every job in one insert, then one update."""
    memo: FirstFires = {}       # first fires after this batch's instant, per timetable
    rules = calendar_rules(conn, tenant_id, jobs)
    default = tenant_window(conn, tenant_id)     # the tenant's delivery window, if any
    owed = [(job, owed_runs(job, now, rules.get(job.id), default)) for job in jobs]
    insert_runs(conn, [(job.id, tenant_id, job.spec.priority, runs)
                       for job, runs in owed if runs], now)
    for job, runs in owed:      # max_runs counts settled fires as the tick's (few jobs)
        if runs:
            conn.execute(Q.count_fires, {"id": job.id, "fires": len(runs)})
    ids = [job.id for job in jobs]
    if action == "cancel":
        conn.execute(Q.bulk_cancel_jobs, {"ids": ids, "tenant_id": tenant_id, "now": now})
        conn.execute(Q.bulk_cancel_queued_runs, {"ids": ids})
    else:
        firsts = [first_run(job.spec, job.id, now, memo) for job in jobs]
        conn.execute(Q.bulk_set_paused, {
            "ids": ids, "tenant_id": tenant_id, "paused": action == "pause", "note": None,
            "next_nominal_ats": [first[0] for first in firsts],
            "next_run_ats": [first[1] for first in firsts]})
        # A job whose settled fires were its last (max_runs), or with no fire left after now
        # (at, end_at), ends here as a single pause or resume would end it.
        for (job, runs), (nominal, _) in zip(owed, firsts, strict=True):
            end_if_done(conn, job, runs, now, nominal)
        if action == "resume":
            conn.execute(Q.notify_jobs_changed)
    return [run for _, runs in owed for run in runs]
