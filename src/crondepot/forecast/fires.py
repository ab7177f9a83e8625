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
from datetime import datetime, timedelta

from crondepot.base.vocab import SkipReason
from crondepot.scheduler.plan import DueJob, OnTime, plan
from crondepot.timetable import Schedule

__all__ = ["Group", "GroupRuns", "group_runs"]

_TINY = timedelta(microseconds=1)


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


def _count(out: GroupRuns, due: datetime, deadline: datetime | None,
           reason: SkipReason | None, until: datetime) -> None:
    if reason is not None:
        out.skipped[reason] = out.skipped.get(reason, 0) + 1
    elif due <= until:
        out.queued.append((due, deadline))


def group_runs(group: Group, *, now: datetime, until: datetime,
               plan_per_tick: bool = False) -> GroupRuns:
    """The runs a job of ``group`` writes from ``now`` to ``until`` whose ready time is at
    or before ``until``: what ticks at each ``next_run_at`` (an overdue one at ``now``)
    write. ``plan_per_tick`` calls ``plan`` at every tick even where the fires are written
    one at a time (the reference the faster reading is tested against)."""
    out = GroupRuns(queued=[], skipped={})
    next_fire = _memo(group.schedule)
    nominal: datetime | None = group.job.next_nominal_at
    due: datetime | None = group.next_run_at
    remaining = group.remaining
    on_time = OnTime(group.job)
    fast = not plan_per_tick and not on_time.ahead
    while nominal is not None and due is not None and due <= until:
        if remaining is not None and remaining <= 0:
            return out
        if fast and due > now:
            _on_time(group, on_time, nominal, remaining, until, out)
            return out
        step = plan(replace(group.job, next_nominal_at=nominal), max(now, due), next_fire,
                    remaining=remaining, end_reason=group.schedule.end_reason)
        for run in step.runs:
            _count(out, run.due_at, run.deadline_at, run.skip_reason, until)
        if remaining is not None:
            remaining -= len(step.runs)
        if step.ended is not None or (not step.runs and step.next_run_at == due):
            break       # the job ends, or (never expected) a plan that would not move on
        nominal, due = step.next_nominal_at, step.next_run_at
    return out


def _on_time(group: Group, on_time: OnTime, nominal: datetime, remaining: int | None,
             until: datetime, out: GroupRuns) -> None:
    """The fires from ``nominal`` on, each written on time by its own tick: the same runs
    as ``plan`` called at each write time, one fire at a time (no rule of the job writes
    a fire ahead of its own write time), without a plan per fire."""
    offset = group.job.spread_offset
    fires = group.schedule.fires_after(nominal - _TINY)
    for count, fire in enumerate(fires):
        # a fire's write time is its nominal time plus spread (a rule that moves it later
        # moves its due time only)
        if (remaining is not None and count >= remaining) or fire.at + offset > until:
            return
        due, deadline, reason, _ = on_time.verdict(fire.at)
        _count(out, due, deadline, reason, until)
