"""Reads the API serves about runs: one run, a job's runs, runs across jobs, and the
tenant's stats.

Every query is scoped by tenant; a run of another tenant is not found, exactly like an
unknown id. The one exception, ``all_tenants_stats``, is for operators (the CLI).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from crondepot.base import jsontext
from crondepot.base.vocab import OUTCOMES, RUN_STATES
from crondepot.db import Q
from crondepot.job.spec import PRIORITIES
from crondepot.runs.deadletter import RunNotFound

__all__ = ["OUTCOMES", "RUN_STATES", "RunNotFound"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFilter:
    """Which of a tenant's runs to list (None = any): one state, one job, an error class or
    part of the message, and a window on when the run ended (due, if it has not)."""

    status: str | None = None
    job_id: int | None = None
    error: str | None = None
    since: datetime | None = None
    until: datetime | None = None


def get_run(conn: psycopg.Connection[Any], tenant_id: int, run_id: str) -> dict[str, Any]:
    row = conn.cursor(row_factory=dict_row).execute(
        Q.get_run, {"run_id": run_id, "tenant_id": tenant_id}).fetchone()
    if row is None:
        raise RunNotFound(f"no run {run_id!r}")
    return row


def job_runs(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, *,
             before: tuple[datetime, str] | None, limit: int) -> list[dict[str, Any]]:
    """A page of the job's runs, newest first, strictly older than ``before``."""
    return conn.cursor(row_factory=dict_row).execute(Q.list_job_runs, {
        "job_id": job_id, "tenant_id": tenant_id, "limit": limit,
        "before_nominal": before[0] if before else None,
        "before_run_id": before[1] if before else None,
    }).fetchall()


def listed_statuses(status: str | None) -> list[str]:
    """The statuses other than running a runs list reads, each through its own index range
    (queries/runs.sql, list_runs): the one asked, or all of them."""
    if status is None:
        return [state for state in RUN_STATES if state != "running"]
    return [] if status == "running" else [status]


def list_runs(conn: psycopg.Connection[Any], tenant_id: int, where: RunFilter, *,
              before: tuple[datetime, str] | None, limit: int) -> list[dict[str, Any]]:
    """A page of the tenant's runs across jobs, newest first by ``ended_at`` (finished_at,
    or due_at for a run not ended), strictly older than the ``before`` cursor."""
    return conn.cursor(row_factory=dict_row).execute(Q.list_runs, {
        "tenant_id": tenant_id, "status": where.status, "statuses": listed_statuses(where.status),
        "job_id": where.job_id,
        "error": where.error, "since": where.since, "until": where.until, "limit": limit,
        "before_at": before[0] if before else None,
        "before_run_id": before[1] if before else None,
    }).fetchall()


def runs_page(conn: psycopg.Connection[Any], tenant_id: int, where: RunFilter, *,
              before: tuple[datetime, str] | None,
              limit: int) -> tuple[list[dict[str, Any]], str | None]:
    """``list_runs`` as a page and its ``next_cursor`` (None on the last page)."""
    rows = list_runs(conn, tenant_id, where, before=before, limit=limit + 1)
    page = rows[:limit]
    cursor = encode_run_cursor(page[-1]["ended_at"], page[-1]["run_id"]) \
        if len(rows) > limit else None
    return page, cursor


def finished_last_hour(conn: psycopg.Connection[Any],
                       tenant_id: int | None) -> dict[str, int]:
    """Runs that ended in the last hour by outcome (every tenant's when ``tenant_id`` is
    None), in one query."""
    counts: dict[str, int] = dict.fromkeys(OUTCOMES, 0)
    for status, count in conn.execute(Q.finished_last_hour, {"tenant_id": tenant_id}):
        counts[status] = count
    return counts


def stats(conn: psycopg.Connection[Any], tenant_id: int) -> dict[str, Any]:
    return _stats(conn, (Q.tenant_queue_depth, Q.start_lag, Q.tenant_dead_count),
                  {"tenant_id": tenant_id}) | {
        "finished_last_hour": finished_last_hour(conn, tenant_id)}


def all_tenants_stats(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """``stats`` across every tenant, for operators (``crondepot status`` without --tenant)."""
    return _stats(conn, (Q.queue_depth, Q.start_lag, Q.dead_count),
                  {"tenant_id": None}) | {"finished_last_hour": finished_last_hour(conn, None)}


def _stats(conn: psycopg.Connection[Any], queries: tuple[str, str, str],
           params: dict[str, Any]) -> dict[str, Any]:
    queue_sql, lag_sql, dead_sql = queries
    queue = {p: {"ready": 0, "waiting": 0, "oldest_ready_seconds": None}
             for p in PRIORITIES}
    for priority, ready, waiting, oldest in conn.execute(queue_sql, params):
        queue[priority] = {"ready": ready, "waiting": waiting, "oldest_ready_seconds": oldest}
    lag = conn.execute(lag_sql, params).fetchone()
    dead = conn.execute(dead_sql, params).fetchone()
    assert lag is not None and dead is not None
    return {"queue": queue,
            "lag": {"samples": lag[0], "p50_seconds": lag[1], "p99_seconds": lag[2]},
            "dead_letter": dead[0]}


def encode_run_cursor(nominal: datetime, run_id: str) -> str:
    """The opaque cursor after a page of runs (a job's: its nominal time; across jobs: its
    ended_at); API, CLI and console share it."""
    raw = json.dumps([nominal.isoformat(), run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_run_cursor(cursor: str) -> tuple[datetime, str]:
    """The (nominal, run id) a cursor stands for; ValueError if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        nominal, run_id = json.loads(raw)
        at = datetime.fromisoformat(nominal)
    except (ValueError, TypeError, binascii.Error):
        raise ValueError("not a next_cursor value") from None
    # a cursor is decoded text: a NUL or a lone surrogate in it would fail in PostgreSQL
    if at.tzinfo is None or jsontext.unstorable(str(run_id)) is not None:
        raise ValueError("not a next_cursor value")
    return at, str(run_id)


def run_cursor_or_none(cursor: str | None,
                       invalid: Callable[[str], Exception]) -> tuple[datetime, str] | None:
    """``decode_run_cursor`` for a cursor that may be absent: None (the first page) for None,
    and for a text that is not a cursor the caller's own error, ``invalid(cursor)`` (the API's
    422 naming the field, the CLI's message naming the option), raised from None."""
    if cursor is None:
        return None
    try:
        return decode_run_cursor(cursor)
    except ValueError:
        raise invalid(cursor) from None
