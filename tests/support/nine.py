"""The 9:00 wave for console tests: a backlog of due runs behind a 25/s rate limit, and the
processes (schedulers, maintenance leader) the status panel reads, as real sessions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from crondepot.db import ALL_TENANTS, Q, connect, roles
from crondepot.job import JobSpec, create_jobs
from crondepot.limits.buckets import set_limit
from crondepot.maintenance.leader import Leadership
from crondepot.scheduler.ledger import check_if_due
from crondepot.tenancy.grants import grant
from tests.support.console import PYTHON_TARGET

LIMIT = "sms-gateway"
RATE = 25.0
BURST = 50


def nine_oclock_wave(conn: psycopg.Connection[Any], tenant_id: int, jobs: int) -> list[int]:
    """``jobs`` reminder jobs of ``tenant_id`` at 9:00 behind the shared 25/s limit, each
    with one queued run of the latest 9:00 fire, due since then."""
    set_limit(conn, LIMIT, RATE, BURST)
    grant(conn, tenant_id, limits=[LIMIT])
    specs = [JobSpec.from_document({
        "key": f"reminder:{i}", "cron": "0 9 * * *", "tz": "UTC", "target": PYTHON_TARGET,
        "rate_limit": LIMIT, "labels": {"wave": "nine"}}) for i in range(jobs)]
    ids = [job.id for job in create_jobs(conn, tenant_id, specs)]
    queue_fire(conn, ids, last_nine())
    return ids


def last_nine() -> int:
    """The latest 09:00 UTC already past (unix seconds): the wave's fire. Whole hours, so
    no run id is named after the current second (a trigger now never meets one)."""
    now = datetime.now(UTC)
    nine = now.replace(hour=9, minute=0, second=0, microsecond=0)
    return int((nine if nine <= now else nine - timedelta(days=1)).timestamp())


def queue_fire(conn: psycopg.Connection[Any], job_ids: list[int], nominal: int) -> None:
    """A queued run of each job for the fire at ``nominal`` (unix seconds), due then."""
    conn.execute(
        """
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                          attempt, available_at, created_at)
        SELECT j.id || ':' || %(nominal)s::bigint, j.id, j.tenant_id, j.priority,
               to_timestamp(%(nominal)s), to_timestamp(%(nominal)s), 'queued', 1,
               to_timestamp(%(nominal)s), now()
        FROM jobs AS j WHERE j.id = ANY(%(ids)s)
        """, {"ids": job_ids, "nominal": nominal})


def bucket_row(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    row = conn.execute("SELECT tokens, refilled_at FROM rate_limits WHERE name = %s",
                       (LIMIT,)).fetchone()
    assert row is not None
    return tuple(row)


@contextmanager
def processes(db_url: str) -> Iterator[None]:
    """Two scheduler copies (their LISTEN sessions, named as scheduler/loop.py names them),
    a maintenance leader holding the real lock (maintenance/leader.py), and a recorded
    ledger check (scheduler/ledger.py). They connect as the runtime role, as the processes
    and the API do (PostgreSQL shows a session's activity times to its own role)."""
    db_url = roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    with ExitStack() as stack:
        for name in ("scheduler-1", "scheduler-2"):
            listener = stack.enter_context(
                connect(db_url, application_name=f"crondepot-{name}-listen"))
            listener.execute(Q.listen_jobs_changed)
            stack.enter_context(connect(db_url, application_name=f"crondepot-{name}"))
        leader = Leadership(db_url, "node-a")
        assert leader.refresh()
        stack.callback(leader.release)
        with connect(db_url, tenants=ALL_TENANTS) as conn:
            check_if_due(conn, every=timedelta(0), window=timedelta(minutes=5))
        yield
