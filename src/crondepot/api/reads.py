"""Reads the API serves about runs: one run, a job's runs, and the tenant's stats.

Every query is scoped by tenant; a run of another tenant is not found, exactly like an
unknown id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from crondepot.db import Q
from crondepot.job.store import JobNotFound

PRIORITY_ORDER = ("urgent", "normal", "bulk")


class RunNotFound(JobNotFound):
    """No run with this id for this tenant."""


def get_run(conn: psycopg.Connection[Any], tenant_id: int, run_id: str) -> dict[str, Any]:
    row = conn.cursor(row_factory=dict_row).execute(
        Q.api_get_run, {"run_id": run_id, "tenant_id": tenant_id}).fetchone()
    if row is None:
        raise RunNotFound(f"no run {run_id!r}")
    return row


def job_runs(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
             before: tuple[datetime, str] | None, limit: int) -> list[dict[str, Any]]:
    """A page of the job's runs, newest first, strictly older than ``before``."""
    return conn.cursor(row_factory=dict_row).execute(Q.api_list_job_runs, {
        "job_id": job_id, "tenant_id": tenant_id, "limit": limit,
        "before_nominal": before[0] if before else None,
        "before_run_id": before[1] if before else None,
    }).fetchall()


def stats(conn: psycopg.Connection[Any], tenant_id: int) -> dict[str, Any]:
    params = {"tenant_id": tenant_id}
    queue = {p: {"ready": 0, "waiting": 0, "oldest_ready_seconds": None}
             for p in PRIORITY_ORDER}
    for priority, ready, waiting, oldest in conn.execute(Q.api_stats_queue, params):
        queue[priority] = {"ready": ready, "waiting": waiting, "oldest_ready_seconds": oldest}
    lag = conn.execute(Q.api_stats_lag, params).fetchone()
    dead = conn.execute(Q.api_stats_dead, params).fetchone()
    assert lag is not None and dead is not None
    return {"queue": queue,
            "lag": {"samples": lag[0], "p50_seconds": lag[1], "p99_seconds": lag[2]},
            "dead_letter": dead[0]}
