"""The dead letter: runs that will not be retried automatically, and replaying them.

A run lands here after its last attempt, or at once when a call's outcome is unknown (a
timeout against a target that does not drop repeated keys). Replaying keeps the run id — the
target sees the same idempotency key — and gives the run a fresh attempt budget. A run past
its misfire deadline ("never after noon") stays in the dead letter unless the replay says to
ignore deadlines: then it goes, and no longer has one.

``retry`` applies the same rule to one run that *failed* (a permanent error: no automatic
retry) or is dead: ``crondepot runs retry`` and ``POST /v1/runs/{run_id}/retry``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row, dict_row

from crondepot.base.errors import CrondepotError
from crondepot.db import Q
from crondepot.job.store import JobNotFound

log = logging.getLogger("crondepot.runs")

RETRYABLE = ("failed", "dead")


class RunNotFound(JobNotFound):
    """No run with this id for this tenant (another tenant's is not found either)."""


class RunNotRetryable(CrondepotError):
    """The run is not failed or dead: nothing to retry (HTTP 409)."""

    def __init__(self, message: str, *, status: str) -> None:
        super().__init__(message)
        self.status = status


class RunPastDeadline(CrondepotError):
    """The run is past its misfire deadline and the retry did not say to ignore it (409)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadFilter:
    tenant: str | None = None
    job_id: int | None = None
    run_ids: list[str] | None = None
    error: str | None = None          # error class, or a part of the error message
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 1000
    # a page's cursor: (finished_at, run_id) of the last run of the page before
    after: tuple[datetime, str] | None = None

    def params(self) -> dict[str, Any]:
        after_at, after_run = self.after if self.after is not None else (None, None)
        return {"tenant": self.tenant, "job_id": self.job_id, "run_ids": self.run_ids,
                "error": self.error, "since": self.since, "until": self.until,
                "limit": self.limit, "after_at": after_at, "after_run": after_run}

    def is_empty(self) -> bool:
        return not any((self.tenant, self.job_id, self.run_ids, self.error, self.since,
                        self.until))


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadRun:
    run_id: str
    job_id: int
    job_key: str | None
    tenant: str
    priority: str
    nominal_at: datetime
    due_at: datetime
    attempt: int
    finished_at: datetime
    error_class: str | None
    last_error: str | None
    deadline_at: datetime | None = None
    past_deadline: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    replayed: list[DeadRun]         # queued again (or, in a dry run, that would be)
    past_deadline: list[DeadRun]    # held back: past their misfire deadline


@dataclass(frozen=True, slots=True, kw_only=True)
class Retried:
    run: DeadRun                    # as it was before the retry
    previous_status: str            # 'failed' or 'dead'


def list_dead(conn: psycopg.Connection[Any], where: DeadFilter) -> list[DeadRun]:
    with conn.cursor(row_factory=class_row(DeadRun)) as cur:
        return cur.execute(Q.list_dead_runs, where.params()).fetchall()


def dead_page(conn: psycopg.Connection[Any],
              where: DeadFilter) -> tuple[list[DeadRun], tuple[datetime, str] | None]:
    """A page of at most ``where.limit`` dead runs and the (finished_at, run_id) the next
    page starts after (None on the last page): one style of paging for every list."""
    rows = list_dead(conn, replace(where, limit=where.limit + 1))
    page = rows[:where.limit]
    more = len(rows) > where.limit
    return page, (page[-1].finished_at, page[-1].run_id) if more else None


def replay(conn: psycopg.Connection[Any], where: DeadFilter, *, dry_run: bool = False,
           ignore_deadline: bool = False) -> Replay:
    """Queue again every dead run matching ``where``, except those past their misfire
    deadline unless ``ignore_deadline``; says which went (or would, with ``dry_run``) and
    which were held back. Runs replayed by someone else meanwhile are left out."""
    with conn.transaction():
        matching = list_dead(conn, where)
        held = [] if ignore_deadline else [r for r in matching if r.past_deadline]
        going = [r for r in matching if ignore_deadline or not r.past_deadline]
        if dry_run or not going:
            return Replay(replayed=going, past_deadline=held)
        replayed = _requeue(conn, [r.run_id for r in going], from_statuses=("dead",),
                            ignore_deadline=ignore_deadline)
    return Replay(replayed=[r for r in going if r.run_id in replayed], past_deadline=held)


def retry(conn: psycopg.Connection[Any], tenant_id: int, run_id: str, *,
          ignore_deadline: bool = False) -> Retried:
    """Queue one failed or dead run of the tenant again, as a replay does: same run id, a
    fresh attempt budget, and the replay's deadline rule (a run past its misfire deadline
    goes only with ``ignore_deadline``, and then without its deadline). RunNotFound for an
    unknown run or another tenant's; RunNotRetryable for a run in another state;
    RunPastDeadline for one held back by its deadline. Returns the run as it was."""
    with conn.transaction():
        row = conn.cursor(row_factory=dict_row).execute(
            Q.run_for_retry, {"run_id": run_id, "tenant_id": tenant_id}).fetchone()
        if row is None:
            raise RunNotFound(f"no run {run_id!r}")
        status = row.pop("status")
        run = DeadRun(**row)
        if status not in RETRYABLE:
            raise RunNotRetryable(f"run {run_id} is {status}: only a failed or dead run can "
                                  "be retried", status=status)
        if run.past_deadline and not ignore_deadline:
            raise RunPastDeadline(f"run {run_id} is past its misfire deadline "
                                  f"({run.deadline_at}); retry it with ignore_deadline "
                                  "(--ignore-deadline) to send it anyway")
        # the row is locked and its status read: the conditional update cannot miss it
        _requeue(conn, [run_id], from_statuses=RETRYABLE, ignore_deadline=ignore_deadline)
    log.warning("run %s retried (was %s): job %s: %s", run_id, status,
                run.job_key or run.job_id, run.last_error or run.error_class or "no error",
                extra={"run_id": run_id, "job_id": run.job_id, "outcome": "retried"})
    return Retried(run=run, previous_status=status)


def _requeue(conn: psycopg.Connection[Any], run_ids: list[str], *,
             from_statuses: tuple[str, ...], ignore_deadline: bool) -> set[str]:
    """Queue these runs again if they are still in one of ``from_statuses`` (the replay's
    update, shared by ``replay`` and ``retry``); wakes the workers; the run ids queued."""
    rows = conn.execute(Q.replay_dead_runs, {"run_ids": run_ids,
                                             "from_statuses": list(from_statuses),
                                             "ignore_deadline": ignore_deadline}).fetchall()
    if rows:
        conn.execute(Q.notify_runs_queued_now,
                     {"priorities": ",".join(sorted({p for _, p in rows}))})
    return {run_id for run_id, _ in rows}
