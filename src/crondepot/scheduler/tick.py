"""One tick of a scheduler copy: claim due jobs, write their runs, advance them — one commit.

A tick is three statements whatever the batch size (claim, insert runs, advance jobs) plus a
notify, a planner setting and the batch's tenants' default delivery windows, inside one
transaction. If the process dies anywhere before
the commit, the database rolls everything back and the job rows' locks vanish with the
session: another copy claims the same jobs and writes the same run ids. If it dies after,
the runs exist and ``next_run_at`` has moved. There is no state in between, and no per-row
round trip.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row

from crondepot.base.errors import InvalidSchedule
from crondepot.db import Q
from crondepot.scheduler.batch import RunBatch
from crondepot.scheduler.plan import DueJob, Plan, PlannedRun, plan
from crondepot.tenancy.calendars import TickCalendars
from crondepot.timetable import Schedule, is_interval_text, schedule, spread_offset, uses_hash
from crondepot.timetable.calendar import Rule, business_days
from crondepot.timetable.delivery import resolve
from crondepot.timetable.runid import format_run_id, unix_seconds

log = logging.getLogger("crondepot.scheduler")

# A job whose stored cron or tz no longer reads (a parser grown stricter than the rows it
# once accepted) is put off this long, so that it neither kills the tick nor fills every
# batch and every log line; next_nominal_at is kept, so it fires as owed if it becomes
# readable, and `crondepot verify` lists its timetable meanwhile (an edit or a cancel goes
# through, without writing the fires no one can compute: job/store.py _settle).
UNREADABLE_RETRY = timedelta(hours=1)


@dataclass(slots=True)
class WrittenGroup:
    """The claimed jobs of one tick that share a plan: its runs (as planned for the first
    of them) and every member's id. The runs of a member differ only in their run ids."""

    plan: Plan
    seconds: list[int]            # each run's nominal Unix seconds, for the run ids
    priority: str
    kinds: list[int]              # each run's kind in the tick's RunBatch
    plan_number: int              # the plan's number in the tick's RunBatch
    job_ids: list[int] = field(default_factory=list)

    def run_ids(self, job_id: int) -> list[str]:
        """The run ids of member ``job_id``'s runs, in the plan's order."""
        return [format_run_id(job_id, seconds) for seconds in self.seconds]

    def runs(self) -> Iterator[PlannedRun]:
        """Every member's runs, with their own run ids."""
        for job_id in self.job_ids:
            for run, rid in zip(self.plan.runs, self.run_ids(job_id), strict=True):
                yield replace(run, run_id=rid)


@dataclass(slots=True)
class TickResult:
    """What one tick did; ``full`` means the batch came back full and more may be due."""

    claimed: int = 0
    groups: list[WrittenGroup] = field(default_factory=list)
    now: datetime | None = None
    full: bool = False
    inserted: int = 0      # rows the insert really added; less than written on a repeat
    unreadable: list[int] = field(default_factory=list)   # jobs put off: timetable unreadable

    @property
    def written(self) -> int:
        return sum(len(g.plan.runs) * len(g.job_ids) for g in self.groups)

    @property
    def queued(self) -> list[PlannedRun]:
        """The runs queued, each with its run id (built on demand: a burst's counts come
        from ``groups``)."""
        return [run for g in self.groups for run in g.runs() if run.skip_reason is None]

    @property
    def queued_priorities(self) -> list[str]:
        """The priority of each run of ``queued``, in the same order."""
        return [g.priority for g in self.groups for run in g.runs()
                if run.skip_reason is None]

    @property
    def skipped(self) -> list[PlannedRun]:
        return [run for g in self.groups for run in g.runs() if run.skip_reason is not None]


def _build(cron: str | None, tz: str, hash_key: str, at: datetime | None,
           start_at: datetime | None, end_at: datetime | None) -> Schedule:
    return schedule(cron, tz, hash_key=hash_key, at=at, start_at=start_at, end_at=end_at)


# Timetables built once per process, not per tick. Intervals have a cache of their own:
# their text carries the anchor, so jobs created at different seconds never share one, and
# many of them must not evict the few cron timetables that half a million reminders share.
# (Jobs created in one batch share their anchor, and so an entry.)
_timetable = lru_cache(maxsize=20_000)(_build)
_interval_timetable = lru_cache(maxsize=20_000)(_build)


def _schedule(cron: str | None, tz: str, hash_key: str, at: datetime | None,
              start_at: datetime | None, end_at: datetime | None) -> Schedule:
    cached = _interval_timetable if cron is not None and is_interval_text(cron) else _timetable
    return cached(cron, tz, hash_key, at, start_at, end_at)


class FireMemo:
    """Next-fire lookups memoised per (timetable, instant) for one tick.

    Half a million reminders share a handful of timetables ("0 9 5 * *" in Asia/Kolkata),
    so the cron and DST arithmetic runs once per distinct (timetable, instant), not per job.
    """

    def __init__(self) -> None:
        self._next: dict[tuple[Schedule, datetime], datetime | None] = {}
        # The claimed jobs' calendar rules, per (tenant, calendar field, zone): set by the tick.
        self.rules: dict[tuple[Any, ...], Rule] = {}
        # Whole plans, per group of jobs that share timetable, due time, rules and what
        # their runs carry (tenant, priority, overlap, rate limit): only the run ids differ.
        self.plans: dict[tuple[Any, ...], WrittenGroup] = {}

    def next_fire(self, timetable: Schedule) -> Callable[[datetime], datetime | None]:
        def lookup(after: datetime) -> datetime | None:
            key = (timetable, after)
            if key not in self._next:
                fires = timetable.next_fires(after, 1)
                self._next[key] = fires[0] if fires else None
            return self._next[key]
        return lookup


# The calendars' dates, kept across ticks by (tenant, name, version).
_CALENDARS = TickCalendars()


def tick(conn: psycopg.Connection[Any], *, batch: int, now: datetime | None = None) -> TickResult:
    """Run one tick on ``conn`` (autocommit; the tick opens its own transaction)."""
    memo = FireMemo()
    result = TickResult()
    with conn.transaction():
        # The tick's statements have one right plan: the due index and primary-key probes.
        # psycopg prepares them after five runs, and with a few hundred ids in the arrays
        # the planner's costs can prefer a sequential scan of jobs for advance_jobs, which
        # grows with the table. LOCAL: behind a transaction-pooling PgBouncer a session
        # setting would reach other clients.
        conn.execute("SET LOCAL enable_seqscan = off")
        with conn.cursor(row_factory=namedtuple_row) as cur:
            rows: list[Any] = cur.execute(Q.claim_due_jobs, {"now": now, "batch": batch}).fetchall()
        if not rows:
            return result
        result.claimed, result.full, result.now = len(rows), len(rows) >= batch, rows[0].now
        assert result.now is not None
        _load_rules(conn, rows, memo)
        defaults = _tenant_windows(conn, rows)
        writes = RunBatch()
        for row in rows:
            try:
                group = _group(row, result.now, memo, defaults.get(row.tenant_id), writes)
            except InvalidSchedule as exc:
                result.unreadable.append(row.id)
                log.warning("job %s (tenant %s): its stored timetable cannot be read, put off "
                            "for %s: %s", row.id, row.tenant_id, UNREADABLE_RETRY, exc,
                            extra={"job_id": row.id, "cron": row.cron, "tz": row.tz})
                continue
            group.job_ids.append(row.id)
            writes.add_runs(row.id, group.run_ids(row.id), group.kinds)
            writes.advance(row.id, group.plan_number)
        if result.unreadable:
            conn.execute(Q.put_off_jobs, {"ids": result.unreadable, "now": now,
                                          "seconds": UNREADABLE_RETRY.total_seconds()})
        result.inserted = writes.insert(conn, now)
        writes.advance_jobs(conn)
    result.groups = list(memo.plans.values())
    return result


def _load_rules(conn: psycopg.Connection[Any], rows: list[Any], memo: FireMemo) -> None:
    """The calendar rules of the claimed jobs that name a calendar: their dates in one query.
    A calendar gone meanwhile (deleted while no live job named it, then named again by an
    edit that raced the delete) excludes nothing."""
    named = [row for row in rows if row.calendar is not None]
    if not named:
        return
    dates = _CALENDARS.load(conn, ((r.tenant_id, r.calendar["exclude"]) for r in named))
    for row in named:
        key = _rule_key(row)
        if key not in memo.rules:
            field = row.calendar
            memo.rules[key] = Rule(
                dates=dates.get((row.tenant_id, field["exclude"]), frozenset()),
                on_excluded=field.get("on_excluded", "skip"),
                business_days=_business_days(field.get("business_days", "mon-fri")),
                tz=row.tz)


@lru_cache(maxsize=256)
def _business_days(text: str) -> frozenset[int]:
    return business_days(text)


def _rule_key(row: Any) -> tuple[Any, ...]:
    field = row.calendar
    return (row.tenant_id, field["exclude"], field.get("on_excluded"),
            field.get("business_days"), row.tz)


def _tenant_windows(conn: psycopg.Connection[Any], rows: list[Any]) -> dict[int, Any]:
    """The default delivery windows (as stored) of the tenants of the claimed jobs that have
    no window of their own: one statement a tick, none when every job has its own."""
    tenants = sorted({row.tenant_id for row in rows if row.delivery_window is None})
    if not tenants:
        return {}
    return dict(conn.execute(Q.tenant_delivery_windows, {"tenant_ids": tenants}).fetchall())


def _group(row: Any, now: datetime, memo: FireMemo, tenant_window: Any,
           writes: RunBatch) -> WrittenGroup:
    """The group of jobs ``row`` plans with: found by what decides the plan and what the
    runs carry, or planned now (once per group) and its runs' kinds added to ``writes``."""
    hash_key = row.key if row.key is not None else str(row.id)
    offset = (spread_offset(row.spread_key or hash_key, row.spread_seconds)
              if row.spread_seconds else 0)
    # H fields hash on the job key; without H the key changes nothing, so jobs share a
    # timetable (and its memo) whatever their keys.
    timetable = _schedule(row.cron, row.tz,
                          hash_key if row.cron is not None and uses_hash(row.cron) else "",
                          row.at, row.start_at, row.end_at)
    remaining = None if row.max_runs is None else max(row.max_runs - row.fire_count, 0)
    rule = memo.rules[_rule_key(row)] if row.calendar is not None else None
    window = resolve(row.delivery_window, tenant_window)    # the job's, else the tenant's
    key = (timetable, row.next_nominal_at, offset, row.catchup, row.max_catchup,
           row.misfire_policy, row.misfire_seconds, row.misfire_until, remaining, rule,
           window, row.tenant_id, row.priority, row.overlap, row.rate_limit)
    group = memo.plans.get(key)
    if group is None:
        job = DueJob(
            id=row.id, next_nominal_at=row.next_nominal_at,
            spread_offset=timedelta(seconds=offset), catchup=row.catchup,
            max_catchup=row.max_catchup, misfire_policy=row.misfire_policy,
            misfire_seconds=row.misfire_seconds, misfire_until=row.misfire_until, tz=row.tz,
            calendar=rule, window=window)
        first = plan(job, now, memo.next_fire(timetable), remaining=remaining,
                     end_reason=timetable.end_reason)
        # a plan that ends its job wrote its last fire (a claimed job is due: one at least)
        ended_at = (None if not first.ended else first.runs[-1].nominal_at if first.runs
                    else now)
        memo.plans[key] = group = WrittenGroup(
            plan=first, seconds=[unix_seconds(r.nominal_at) for r in first.runs],
            priority=row.priority,
            kinds=[writes.kind(row.tenant_id, row.priority, r, row.overlap, row.rate_limit)
                   for r in first.runs],
            plan_number=writes.plan(first, ended_at))
    return group


def insert_runs(conn: psycopg.Connection[Any],
                jobs: Sequence[tuple[int, int, str, Sequence[PlannedRun]]],
                now: datetime | None) -> int:
    """Write the planned runs of ``jobs`` (job id, tenant id, priority, runs) in one
    statement, a run id written before being left as it is; wake the workers if any run was
    queued. Each run's overlap policy and rate limit are read from its job. Returns the
    rows the insert added."""
    writes = RunBatch()
    for job_id, tenant_id, priority, runs in jobs:
        writes.add_runs(job_id, (run.run_id for run in runs),
                        [writes.kind(tenant_id, priority, run, None, None) for run in runs])
    return writes.insert(conn, now, limits_known=False)
