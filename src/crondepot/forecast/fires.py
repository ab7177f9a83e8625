"""The runs one group of identical jobs will write over a horizon (pure).

A group is every job of a tenant that shares what decides its runs: the timetable text and
zone (and the job key, for ``H`` fields), ``at``/``start_at``/``end_at``, where it stands
(next fire, next due time, fires left under ``max_runs``), its spread offset, its misfire,
catch-up, calendar and delivery-window rules, and its rate limit. Its runs are computed
once, by the scheduler's own plan (scheduler/plan.py) called at each instant a tick would
call it, so calendars that skip or move a fire, windows that defer or skip it, catch-up of
overdue fires and misfire deadlines come out exactly as the scheduler will write them; the
count of jobs multiplies the result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from crondepot.base.vocab import SkipReason
from crondepot.scheduler.plan import DueJob, plan
from crondepot.timetable import Schedule

__all__ = ["Group", "GroupRuns", "group_runs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Group:
    schedule: Schedule
    job: DueJob               # next_nominal_at: the group's next fire not yet written
    next_run_at: datetime     # when a tick writes it
    remaining: int | None     # fires max_runs still allows (None: no bound)
    rate_limit: str | None
    host_held: bool           # a hold names the target host of these jobs
    jobs: int


@dataclass(slots=True, kw_only=True)
class GroupRuns:
    """What one job of the group writes: runs queued (ready time, misfire deadline) and
    fires written skipped, by reason."""

    queued: list[tuple[datetime, datetime | None]]
    skipped: dict[SkipReason, int]


def _memo(schedule: Schedule) -> Callable[[datetime], datetime | None]:
    seen: dict[datetime, datetime | None] = {}

    def next_fire(after: datetime) -> datetime | None:
        if after not in seen:
            fires = schedule.next_fires(after, 1)
            seen[after] = fires[0] if fires else None
        return seen[after]
    return next_fire


def group_runs(group: Group, *, now: datetime, until: datetime) -> GroupRuns:
    """The runs a job of ``group`` writes from ``now`` to ``until`` whose ready time is at
    or before ``until``: ticks at each ``next_run_at`` (an overdue one at ``now``)."""
    out = GroupRuns(queued=[], skipped={})
    next_fire = _memo(group.schedule)
    nominal: datetime | None = group.job.next_nominal_at
    due: datetime | None = group.next_run_at
    remaining = group.remaining
    while nominal is not None and due is not None and due <= until:
        if remaining is not None and remaining <= 0:
            break
        tick_at = max(now, due)
        step = plan(replace(group.job, next_nominal_at=nominal), tick_at, next_fire,
                    remaining=remaining, end_reason=group.schedule.end_reason)
        for run in step.runs:
            if run.skip_reason is not None:
                out.skipped[run.skip_reason] = out.skipped.get(run.skip_reason, 0) + 1
            elif run.due_at <= until:
                out.queued.append((run.due_at, run.deadline_at))
        if remaining is not None:
            remaining -= len(step.runs)
        if step.ended is not None or (not step.runs and step.next_run_at == due):
            break       # the job ends, or (never expected) a plan that would not move on
        nominal, due = step.next_nominal_at, step.next_run_at
    return out
