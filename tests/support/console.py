"""What console tests share beyond their fixtures: a tenant's world (its jobs and runs),
adding jobs and runs, logging in, and reading the CSRF token and a run's status."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.job import JobSpec, create_jobs

PYTHON_TARGET = {"type": "python", "handler": "test.noop"}


@dataclass(frozen=True, slots=True, kw_only=True)
class World:
    """bank42 (admin and read tokens) with jobs, runs and dead runs; otherbank with one job."""

    tenant_id: int
    admin: str
    reader: str
    other: str
    berlin: int        # a job whose timetable crosses a DST change
    daily: int         # a job with finished, failed and dead runs
    theirs: int        # otherbank's job
    their_dead: str    # otherbank's dead run
    dead: list[str]    # bank42's dead runs (of ``daily``), newest first


def add_job(conn: psycopg.Connection[Any], tenant_id: int, **doc: Any) -> int:
    doc.setdefault("target", PYTHON_TARGET)
    doc.setdefault("tz", "UTC")
    (created,) = create_jobs(conn, tenant_id, [JobSpec.from_document(doc)])
    return created.id


def add_run(conn: psycopg.Connection[Any], job_id: int, minutes_ago: int, status: str, *,
            attempt: int = 1, late_seconds: float = 1.5, error: str | None = None,
            error_class: str | None = None) -> str:
    """A run of ``job_id`` due ``minutes_ago`` minutes ago, first claimed ``late_seconds``
    after it was due, in ``status`` (finished a second later unless queued or running)."""
    row = conn.execute("SELECT tenant_id, priority FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=minutes_ago)
    run_id = f"{job_id}:{int(due.timestamp())}"
    claimed = due + timedelta(seconds=late_seconds) if status != "queued" else None
    finished = (claimed + timedelta(seconds=1)
                if claimed and status not in ("queued", "running") else None)
    conn.execute(
        """
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                          attempt, available_at, first_claimed_at, started_at, finished_at,
                          last_error, error_class, lease_token, lease_expires_at, lease_owner,
                          created_at)
        VALUES (%(run_id)s, %(job_id)s, %(tenant_id)s, %(priority)s, %(due)s, %(due)s,
                %(status)s, %(attempt)s, %(due)s, %(claimed)s, %(claimed)s, %(finished)s,
                %(error)s, %(error_class)s,
                CASE WHEN %(status)s = 'running' THEN gen_random_uuid() END,
                CASE WHEN %(status)s = 'running' THEN now() + interval '1 minute' END,
                CASE WHEN %(status)s = 'running' THEN 'worker-1' END, %(due)s)
        """,
        {"run_id": run_id, "job_id": job_id, "tenant_id": row[0], "priority": row[1],
         "due": due, "status": status, "attempt": attempt, "claimed": claimed,
         "finished": finished, "error": error, "error_class": error_class})
    return run_id


CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    found = CSRF.search(html)
    assert found, "no CSRF token in the page"
    return found.group(1)


def login(client: TestClient, token: str) -> str:
    """Log in through the form; return the session's CSRF token."""
    page = client.get("/console/login")
    assert page.status_code == 200
    done = client.post("/console/login", data={"csrf": csrf_of(page.text), "token": token})
    assert done.status_code == 303, done.text
    assert done.headers["location"] == "/console"
    overview = client.get("/console")
    assert overview.status_code == 200, overview.text
    return csrf_of(overview.text)


def run_status(conn: psycopg.Connection[Any], run_id: str) -> str:
    row = conn.execute("SELECT status FROM runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    status: str = row[0]
    return status
