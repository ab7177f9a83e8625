"""Persisting jobs. Every write computes the first ``next_run_at`` on the database clock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from crondepot.db import Q
from crondepot.job.spec import JobSpec
from crondepot.timetable import spread_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedJob:
    id: int
    key: str | None
    next_run_at: datetime | None
    next_nominal_at: datetime | None
    created: bool          # False: the key existed and nothing was written


def first_run(spec: JobSpec, job_id: int, now: datetime) -> tuple[datetime | None, datetime | None]:
    """(nominal, due) of the first run after ``now``."""
    fires = spec.timetable(job_id).next_fires(now, 1)
    if not fires:
        return None, None
    offset = 0
    if spec.spread_seconds:
        offset = spread_offset(spec.spread_key or spec.hash_key(job_id), spec.spread_seconds)
    return fires[0], fires[0] + timedelta(seconds=offset)


def create_jobs(conn: psycopg.Connection[Any], tenant_id: int, specs: Sequence[JobSpec], *,
                now: datetime | None = None) -> list[CreatedJob]:
    """Insert ``specs`` in one statement; return one entry per spec, in order."""
    if not specs:
        return []
    with conn.transaction():
        db_now = _db_now(conn, now)
        ids = [row[0] for row in conn.execute(Q.reserve_job_ids, {"count": len(specs)})]
        firsts = [first_run(spec, job_id, db_now) for spec, job_id in zip(specs, ids, strict=True)]
        inserted = {row[0] for row in conn.execute(Q.insert_jobs, _columns(tenant_id, specs, ids,
                                                                            firsts))}
        conn.execute(Q.notify_jobs_changed)
    return [CreatedJob(id=job_id, key=spec.key, next_nominal_at=first[0], next_run_at=first[1],
                       created=job_id in inserted)
            for spec, job_id, first in zip(specs, ids, firsts, strict=True)]


def _db_now(conn: psycopg.Connection[Any], now: datetime | None) -> datetime:
    row = conn.execute(Q.db_now, {"now": now}).fetchone()
    assert row is not None
    value: datetime = row[0]
    return value


def _columns(tenant_id: int, specs: Sequence[JobSpec], ids: list[int],
             firsts: list[tuple[datetime | None, datetime | None]]) -> dict[str, list[Any]]:
    return {
        "ids": ids,
        "tenant_ids": [tenant_id] * len(specs),
        "keys": [s.key for s in specs],
        "crons": [s.cron for s in specs],
        "tzs": [s.tz for s in specs],
        "next_run_ats": [f[1] for f in firsts],
        "next_nominal_ats": [f[0] for f in firsts],
        "priorities": [s.priority for s in specs],
        "actives": [s.active for s in specs],
        "targets": [Jsonb(s.target) for s in specs],
        "payloads": [Jsonb(s.payload) for s in specs],
        "misfire_policies": [s.misfire.policy for s in specs],
        "misfire_seconds": [s.misfire.seconds for s in specs],
        "misfire_untils": [s.misfire.until for s in specs],
        "catchups": [s.catchup for s in specs],
        "max_catchups": [s.max_catchup for s in specs],
        "spread_seconds": [s.spread_seconds for s in specs],
        "spread_keys": [s.spread_key for s in specs],
        "max_attempts": [s.max_attempts for s in specs],
        "lease_seconds": [s.lease_seconds for s in specs],
        "rate_limits": [s.rate_limit for s in specs],
    }
