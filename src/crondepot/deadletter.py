"""The dead letter: runs that will not be retried automatically, and replaying them.

A run lands here after its last attempt, or at once when a call's outcome is unknown (a
timeout against a target that does not drop repeated keys). Replaying keeps the run id — the
target sees the same idempotency key — and gives the run a fresh attempt budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row

from crondepot.db import Q


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadFilter:
    tenant: str | None = None
    job_id: int | None = None
    run_ids: list[str] | None = None
    error: str | None = None          # error class, or a part of the error message
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 1000

    def params(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "job_id": self.job_id, "run_ids": self.run_ids,
                "error": self.error, "since": self.since, "until": self.until,
                "limit": self.limit}

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


def list_dead(conn: psycopg.Connection[Any], where: DeadFilter) -> list[DeadRun]:
    with conn.cursor(row_factory=class_row(DeadRun)) as cur:
        return cur.execute(Q.list_dead_runs, where.params()).fetchall()


def replay(conn: psycopg.Connection[Any], where: DeadFilter, *,
           dry_run: bool = False) -> list[DeadRun]:
    """Queue again every dead run matching ``where``; returns those replayed (or that would
    be, with ``dry_run``). Runs replayed by someone else meanwhile are left out."""
    with conn.transaction():
        matching = list_dead(conn, where)
        if dry_run or not matching:
            return matching
        rows = conn.execute(Q.replay_dead_runs,
                            {"run_ids": [r.run_id for r in matching]}).fetchall()
        if rows:
            conn.execute(Q.notify_runs_queued_now,
                         {"priorities": ",".join(sorted({p for _, p in rows}))})
    replayed = {run_id for run_id, _ in rows}
    return [r for r in matching if r.run_id in replayed]
