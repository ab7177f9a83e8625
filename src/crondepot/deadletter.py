"""The dead letter: runs that will not be retried automatically, and replaying them.

A run lands here after its last attempt, or at once when a call's outcome is unknown (a
timeout against a target that does not drop repeated keys). Replaying keeps the run id — the
target sees the same idempotency key — and gives the run a fresh attempt budget. A run past
its misfire deadline ("never after noon") stays in the dead letter unless the replay says to
ignore deadlines: then it goes, and no longer has one.
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
    deadline_at: datetime | None = None
    past_deadline: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    replayed: list[DeadRun]         # queued again (or, in a dry run, that would be)
    past_deadline: list[DeadRun]    # held back: past their misfire deadline


def list_dead(conn: psycopg.Connection[Any], where: DeadFilter) -> list[DeadRun]:
    with conn.cursor(row_factory=class_row(DeadRun)) as cur:
        return cur.execute(Q.list_dead_runs, where.params()).fetchall()


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
        rows = conn.execute(Q.replay_dead_runs, {"run_ids": [r.run_id for r in going],
                                                 "ignore_deadline": ignore_deadline}
                            ).fetchall()
        if rows:
            conn.execute(Q.notify_runs_queued_now,
                         {"priorities": ",".join(sorted({p for _, p in rows}))})
    replayed = {run_id for run_id, _ in rows}
    return Replay(replayed=[r for r in going if r.run_id in replayed], past_deadline=held)
