"""The forecast of one tenant: its runs over the next hours, set against its rate limits.

Read in one REPEATABLE READ snapshot: the tenant's live, unpaused jobs grouped by what
decides their runs (queries/forecast.sql, ``forecast_job_groups``), the runs it has queued
now, its buckets (rate, burst, the tokens they hold now) and its holds. Each group's runs
are computed once (fires.py) and multiplied by its jobs; the runs of each rate limit, the
queued ones included, are drained through its bucket (drain.py). Runs with no rate limit
are counted, not drained: workers bound them, and workers are not modelled.

Only the tenant's own runs are counted: a shared bucket that other tenants also use drains
the tenant's runs later than the forecast says.
"""

from __future__ import annotations

import json
import time as clock
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import namedtuple_row

from crondepot.base.errors import CrondepotError, InvalidSchedule
from crondepot.base.vocab import SkipReason
from crondepot.db import Q
from crondepot.db.clock import database_now
from crondepot.db.transactions import one_snapshot
from crondepot.forecast.drain import Arrival, Wave, drain, held
from crondepot.forecast.fires import Group, group_runs
from crondepot.limits.buckets import Bucket, tenant_limits
from crondepot.scheduler.plan import DueJob
from crondepot.tenancy.calendars import TickCalendars
from crondepot.timetable import schedule, spread_offset, uses_hash
from crondepot.timetable.calendar import Rule, business_days
from crondepot.timetable.delivery import resolve

__all__ = ["DEFAULT_HOURS", "MAX_HOURS", "Forecast", "ForecastError", "LimitForecast",
           "check_hours", "forecast"]

DEFAULT_HOURS = 24
MAX_HOURS = 168
# Waves listed in a document; the rest are counted (a minutely job has 1,440 a day).
MAX_WAVES = 500


class ForecastError(CrondepotError, ValueError):
    """A horizon that cannot be forecast; ``field`` names the input at fault."""

    def __init__(self, message: str, field: str = "hours") -> None:
        super().__init__(message)
        self.field = field


def check_hours(hours: object) -> int:
    if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= MAX_HOURS:
        raise ForecastError(f"hours: expected a whole number of hours from 1 to {MAX_HOURS} "
                            f"(a week), got {hours!r}")
    return hours


@dataclass(slots=True, kw_only=True)
class LimitForecast:
    """The tenant's runs on one rate limit (``name`` None: on none)."""

    name: str | None
    bucket: Bucket | None = None      # None: no limit, or one the tenant may not use
    tokens: float = 0.0               # in the bucket now
    held: str | None = None           # "rate_limit" or "host": a hold keeps them
    runs: int = 0                     # fired in the horizon
    queued_now: int = 0
    per_minute: dict[datetime, int] = field(default_factory=dict)
    arrivals: list[Arrival] = field(default_factory=list)
    waves: list[Wave] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.name is None:
            return "unlimited"
        if self.bucket is None:
            return "unknown"
        return "held" if self.held else "drained"

    @property
    def past_deadline(self) -> int:
        return sum(w.past_deadline for w in self.waves)

    def document(self) -> dict[str, Any]:
        waves = self.waves[:MAX_WAVES]
        return {
            "rate_limit": self.name, "status": self.status, "held_by": self.held,
            "rate_per_second": self.bucket and self.bucket.rate_per_second,
            "burst": self.bucket and self.bucket.burst,
            "shared": self.bucket is not None and not self.bucket.owned,
            "tokens_now": round(self.tokens, 3) if self.bucket else None,
            "runs": self.runs, "queued_now": self.queued_now,
            "past_deadline": self.past_deadline,
            "per_minute": [{"minute": m.isoformat(), "runs": n}
                           for m, n in sorted(self.per_minute.items())],
            "waves": [_wave_document(w) for w in waves],
            "waves_omitted": len(self.waves) - len(waves)}


def _wave_document(wave: Wave) -> dict[str, Any]:
    return {"start": wave.start.isoformat(), "runs": wave.runs, "sent": wave.sent,
            "drained_at": wave.drained_at and wave.drained_at.isoformat(),
            "past_deadline": wave.past_deadline,
            "deadlines": [{"deadline": d.isoformat(), "runs": n}
                          for d, n in sorted(wave.deadlines.items())]}


@dataclass(slots=True, kw_only=True)
class Forecast:
    tenant_id: int
    now: datetime
    until: datetime
    hours: int
    jobs: int = 0
    groups: int = 0
    limits: list[LimitForecast] = field(default_factory=list)
    skipped: dict[SkipReason, int] = field(default_factory=dict)
    unreadable_jobs: int = 0
    seconds: float = 0.0

    @property
    def runs(self) -> int:
        return sum(lf.runs for lf in self.limits)

    def document(self) -> dict[str, Any]:
        return {"now": self.now.isoformat(), "until": self.until.isoformat(),
                "hours": self.hours, "jobs": self.jobs, "groups": self.groups,
                "runs": self.runs, "queued_now": sum(lf.queued_now for lf in self.limits),
                "past_deadline": sum(lf.past_deadline for lf in self.limits),
                "skipped": dict(sorted(self.skipped.items())),
                "unreadable_jobs": self.unreadable_jobs,
                "order": "deadline_first",
                "limits": [lf.document() for lf in self.limits],
                "seconds": round(self.seconds, 3)}


def forecast(conn: psycopg.Connection[Any], tenant_id: int, *, hours: int = DEFAULT_HOURS,
             now: datetime | None = None) -> Forecast:
    """The forecast of ``tenant_id``'s runs from now to ``hours`` ahead. ``conn`` is in
    autocommit mode (or scoped to the tenant); the reads share one snapshot."""
    check_hours(hours)
    started = clock.perf_counter()
    with one_snapshot(conn):
        conn.execute(Q.forecast_no_jit)
        db_now = database_now(conn, now)
        result = Forecast(tenant_id=tenant_id, now=db_now,
                          until=db_now + timedelta(hours=hours), hours=hours)
        scope = {"tenant_id": tenant_id, "until": result.until, "now": db_now}
        with conn.cursor(row_factory=namedtuple_row) as cur:
            rows: list[Any] = cur.execute(Q.forecast_job_groups, scope).fetchall()
            queued: list[Any] = cur.execute(Q.forecast_queued_runs, scope).fetchall()
        buckets = {b.name: b for b in tenant_limits(conn, tenant_id)}
        held_limits = {name for (name,) in conn.execute(Q.forecast_held_limits, scope)}
        levels = dict(conn.execute(Q.forecast_bucket_levels,
                                   {**scope, "names": sorted(buckets)}).fetchall())
        groups = _groups(conn, tenant_id, rows, result)
    by_limit: dict[tuple[str | None, bool], LimitForecast] = {}

    def limit(name: str | None, host_held: bool) -> LimitForecast:
        key = (name, host_held)
        if key not in by_limit:
            bucket = buckets.get(name) if name is not None else None
            hold = ("host" if host_held else
                    "rate_limit" if name is not None and name in held_limits else None)
            by_limit[key] = LimitForecast(name=name, bucket=bucket, held=hold,
                                          tokens=float(levels.get(name, 0.0) or 0.0))
        return by_limit[key]

    _add_fires(groups, result, limit)
    for row in queued:
        lf = limit(row.rate_limit, row.host_held)
        lf.queued_now += row.runs
        lf.arrivals.append(Arrival(row.ready, row.runs, row.deadline_at))
    for lf in by_limit.values():
        lf.waves = _waves(lf, result)
    result.limits = sorted(by_limit.values(),
                           key=lambda lf: (lf.name is None, lf.name or "", lf.held or ""))
    result.seconds = clock.perf_counter() - started
    return result


def _waves(lf: LimitForecast, result: Forecast) -> list[Wave]:
    if lf.held:
        return held(lf.arrivals, start=result.now, until=result.until)
    if lf.bucket is None:
        return []
    return drain(lf.arrivals, rate=lf.bucket.rate_per_second, burst=lf.bucket.burst,
                 tokens=lf.tokens, start=result.now)


def _add_fires(groups: list[Group], result: Forecast, limit: Any) -> None:
    for group in groups:
        runs = group_runs(group, now=result.now, until=result.until)
        lf = limit(group.rate_limit, group.host_held)
        for reason, count in runs.skipped.items():
            result.skipped[reason] = result.skipped.get(reason, 0) + count * group.jobs
        for due, deadline in runs.queued:
            ready = max(due, result.now)
            minute = ready.replace(second=0, microsecond=0)
            lf.per_minute[minute] = lf.per_minute.get(minute, 0) + group.jobs
            lf.arrivals.append(Arrival(ready, group.jobs, deadline))
        lf.runs += len(runs.queued) * group.jobs


def _groups(conn: psycopg.Connection[Any], tenant_id: int, rows: list[Any],
            result: Forecast) -> list[Group]:
    """The rows as groups: jobs with a spread are regrouped by their offset (at most
    ``spread_seconds`` of them), jobs whose cron has no real ``H`` lose their key."""
    calendars = TickCalendars().load(conn, {(tenant_id, r.calendar["exclude"])
                                           for r in rows if r.calendar is not None})
    merged: dict[tuple[Any, ...], list[Any]] = defaultdict(list)
    for row in rows:
        result.jobs += row.jobs
        try:
            hashed = row.cron is not None and uses_hash(row.cron)
        except InvalidSchedule:
            result.unreadable_jobs += row.jobs
            continue
        offset = (spread_offset(row.spread_key or row.hash_key, row.spread_seconds)
                  if row.spread_seconds else 0)
        key = (row.cron, row.tz, row.hash_key if hashed else "", row.at, row.start_at,
               row.end_at, row.next_run_at, row.next_nominal_at, row.catchup,
               row.max_catchup, row.misfire_policy, row.misfire_seconds, row.misfire_until,
               row.remaining, _frozen(row.calendar), _frozen(row.delivery_window),
               row.rate_limit, row.host_held, offset)
        merged[key].append(row)
    groups = []
    for key, members in merged.items():
        try:
            groups.append(_group(key, members, calendars, tenant_id))
        except InvalidSchedule:
            result.unreadable_jobs += sum(r.jobs for r in members)
    result.groups = len(groups)
    return groups


def _frozen(value: Any) -> Any:
    return None if value is None else json.dumps(value, sort_keys=True)


def _group(key: tuple[Any, ...], members: list[Any],
           calendars: dict[tuple[int, str], frozenset[Any]], tenant_id: int) -> Group:
    row = members[0]
    hash_key, offset = key[2], key[-1]
    rule = None
    if row.calendar is not None:
        rule = Rule(dates=calendars.get((tenant_id, row.calendar["exclude"]), frozenset()),
                    on_excluded=row.calendar.get("on_excluded", "skip"),
                    business_days=business_days(row.calendar.get("business_days",
                                                                 "mon-fri")),
                    tz=row.tz)
    job = DueJob(id=0, next_nominal_at=row.next_nominal_at,
                 spread_offset=timedelta(seconds=offset), catchup=row.catchup,
                 max_catchup=row.max_catchup, misfire_policy=row.misfire_policy,
                 misfire_seconds=row.misfire_seconds, misfire_until=row.misfire_until,
                 tz=row.tz, calendar=rule, window=resolve(row.delivery_window, None))
    return Group(schedule=schedule(row.cron, row.tz, hash_key=hash_key, at=row.at,
                                   start_at=row.start_at, end_at=row.end_at),
                 job=job, next_run_at=row.next_run_at, remaining=row.remaining,
                 rate_limit=row.rate_limit, host_held=row.host_held,
                 jobs=sum(r.jobs for r in members))
