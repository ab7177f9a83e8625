"""A tick's writes in the shape a burst has: a few kinds of run, shared by many jobs.

Half a million reminders due at 9:00 are, within one tick, a handful of distinct runs (the
same nominal and due times, tenant, priority, overlap and rate limit) repeated for
thousands of job ids. The tick sends them that way: each kind once, and per run only its
id, its job and its kind's number; each plan once, and per job only its id and its plan's
number. The per-run and per-job columns are integers and plain run ids, sent as array
literals joined in one C call, never as binary arrays, which psycopg builds element by
element in Python (the measurement: docs/records/performance-runs.md, "The tick's writes
as kinds").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from crondepot.db import Q
from crondepot.scheduler.plan import Plan, PlannedRun

# Elements that need no quoting in an array literal: run ids are "{job id}:{unix seconds}"
# (timetable/runid.py); anything else is quoted, so a caller's odd id cannot break the list.
_PLAIN = re.compile(r"[-0-9:,]*")


def int_array(values: Iterable[int]) -> str:
    """An integer array literal (``{1,2,3}``) for a ``%s::bigint[]`` parameter."""
    return "{" + ",".join(map(str, values)) + "}"


def text_array(values: Sequence[str]) -> str:
    """A text array literal of non-null strings for a ``%s::text[]`` parameter."""
    body = ",".join(values)
    # every element plain and non-empty, and no comma inside one
    if _PLAIN.fullmatch(body) and all(values) and body.count(",") == len(values) - 1:
        return "{" + body + "}"
    return "{" + ",".join('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
                          for v in values) + "}"


@dataclass(slots=True)
class RunBatch:
    """Runs to insert and jobs to advance, as kinds and plans with their members."""

    # per run
    run_ids: list[str] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)
    kinds: list[int] = field(default_factory=list)
    # per kind (1-based numbers, as WITH ORDINALITY counts)
    kind_columns: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name in (
        "tenant_ids", "priorities", "nominal_ats", "due_ats", "skip_reasons",
        "deadline_ats", "overlaps", "rate_limits")})
    _kind_of: dict[tuple[Any, ...], int] = field(default_factory=dict)
    # per advanced job, and per plan
    advanced: list[int] = field(default_factory=list)
    plans: list[int] = field(default_factory=list)
    plan_columns: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name in (
        "next_run_ats", "next_nominal_ats", "fires", "ended_reasons", "ended_ats")})

    def kind(self, tenant_id: int, priority: str, run: PlannedRun, overlap: str | None,
             rate_limit: str | None) -> int:
        """The number of this kind of run, added if new. ``overlap`` None: the insert
        reads the job's; ``rate_limit`` likewise when ``insert`` is told limits are
        unknown."""
        key = (tenant_id, priority, run.nominal_at, run.due_at, run.skip_reason,
               run.deadline_at, overlap, rate_limit)
        number = self._kind_of.get(key)
        if number is None:
            for name, value in zip(self.kind_columns, key, strict=True):
                self.kind_columns[name].append(value)
            number = self._kind_of[key] = len(self._kind_of) + 1
        return number

    def add_runs(self, job_id: int, run_ids: Iterable[str], kinds: Iterable[int]) -> None:
        for run_id, kind in zip(run_ids, kinds, strict=True):
            self.run_ids.append(run_id)
            self.job_ids.append(job_id)
            self.kinds.append(kind)

    def plan(self, job_plan: Plan, ended_at: datetime | None) -> int:
        """The number of a plan shared by the jobs to be advanced by it."""
        for name, value in zip(self.plan_columns, (
                job_plan.next_run_at, job_plan.next_nominal_at, len(job_plan.runs),
                job_plan.ended, ended_at), strict=True):
            self.plan_columns[name].append(value)
        return len(self.plan_columns["fires"])

    def advance(self, job_id: int, plan: int) -> None:
        self.advanced.append(job_id)
        self.plans.append(plan)

    def insert(self, conn: psycopg.Connection[Any], now: datetime | None, *,
               limits_known: bool = True) -> int:
        """Write the runs in one statement; wake the workers if any was queued. Returns
        the rows the insert added (fewer than the runs when a run id was there)."""
        if not self.run_ids:
            return 0
        # Not prepared: planned with the arrays' real lengths, so a tick of 2,000 runs of
        # 2,000 kinds (a catch-up of distinct timetables) hashes the kinds rather than
        # scanning them once a run, as a generic plan costed for ten rows each might.
        inserted = conn.execute(Q.insert_runs, {
            "run_ids": text_array(self.run_ids), "job_ids": int_array(self.job_ids),
            "kinds": int_array(self.kinds), **self.kind_columns, "now": now,
            "limits_known": limits_known}, prepare=False).rowcount
        queued = {priority for priority, reason in zip(
            self.kind_columns["priorities"], self.kind_columns["skip_reasons"], strict=True)
            if reason is None}
        if queued:
            conn.execute(Q.notify_runs_queued, {"priorities": ",".join(sorted(queued))})
        return inserted

    def advance_jobs(self, conn: psycopg.Connection[Any]) -> None:
        if self.advanced:
            conn.execute(Q.advance_jobs, {"ids": int_array(self.advanced),
                                          "plans": int_array(self.plans),
                                          **self.plan_columns}, prepare=False)
