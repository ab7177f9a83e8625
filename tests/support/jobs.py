"""Quick ways to put many due jobs in a test database."""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.job import JobSpec, create_jobs
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant

# The handlers of tests/support/handlers.py and the names the tests' job documents use: a
# tenant made by ``tenant`` may name them (crondepot.tenancy.grants), as a tenant an operator had
# granted them would. Tests of the grant rules make their own tenants without.
TEST_HANDLERS = ("test.noop", "test.record", "test.fail", "test.async", "test.async_blocking",
                 "test.async_sleep", "test.overlap_slow", "test.replace_async",
                 "test.replace_sync", "test.retry_spread.busy",
                 "test.retry_curve.busy",
                 "test.retry_curve.later", "sms.send", "reports.nightly",
                 "crondepot.log")


def tenant(conn: psycopg.Connection[Any], name: str = "bank42") -> int:
    """The id of tenant ``name``, made (and granted TEST_HANDLERS) if it does not exist."""
    row = conn.execute("SELECT id FROM tenants WHERE name = %s", (name,)).fetchone()
    if row:
        return int(row[0])
    made = create_tenant(conn, name).id
    grant(conn, made, handlers=TEST_HANDLERS)
    return made


def grant_limit(conn: psycopg.Connection[Any], tenant_id: int, name: str) -> None:
    """Grant the shared rate limit ``name`` to the tenant (it must exist: set_limit)."""
    grant(conn, tenant_id, limits=[name])


def add_job(conn: psycopg.Connection[Any], tenant_id: int, **doc: Any) -> int:
    doc.setdefault("target", {"type": "python", "handler": "test.noop"})
    doc.setdefault("tz", "UTC")
    (created,) = create_jobs(conn, tenant_id, [JobSpec.from_document(doc)])
    return created.id


def bulk_due_jobs(conn: psycopg.Connection[Any], count: int, *, due_in_seconds: float = 0,
                  cron: str = "0 9 * * *", tz: str = "Asia/Kolkata",
                  priority: str = "normal", handler: str = "test.noop") -> None:
    """``count`` jobs whose next run is due ``due_in_seconds`` from the database's now,
    calling the Python handler ``handler``.

    Written in one INSERT … SELECT: the point of these tests is the scheduler, and a 100,000
    job set-up through the API path would dominate their time.
    """
    tenant_id = tenant(conn)
    conn.execute(
        """
        INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
                          target)
        SELECT %(tenant)s, 'k' || g, %(cron)s, %(tz)s, t.due, t.due, %(priority)s,
               jsonb_build_object('type', 'python', 'handler', %(handler)s::text)
        FROM generate_series(1, %(count)s) AS g,
             (SELECT date_trunc('second', now()) + make_interval(secs => %(due)s) AS due) AS t
        """,
        {"tenant": tenant_id, "cron": cron, "tz": tz, "count": count,
         "priority": priority, "due": due_in_seconds, "handler": handler},
    )


def counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    row = conn.execute(
        """
        SELECT (SELECT count(*) FROM runs),
               (SELECT count(DISTINCT run_id) FROM runs),
               (SELECT count(DISTINCT job_id) FROM runs),
               (SELECT count(*) FROM jobs WHERE active AND NOT paused AND next_run_at <= now())
        """
    ).fetchone()
    assert row is not None
    return {"runs": row[0], "distinct_runs": row[1], "jobs_with_runs": row[2], "still_due": row[3]}


CALLS_TABLE = """
CREATE TABLE IF NOT EXISTS test_calls (
    run_id text NOT NULL, attempt integer NOT NULL, pid integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(), tenant text)
"""


def queued_runs(conn: psycopg.Connection[Any], count: int, *, handler: str = "test.record",
                priority: str = "normal", payload: str = "{}", lease_seconds: int = 60,
                max_attempts: int = 6, tenant_name: str = "bank42",
                target: str = "{}") -> None:
    """``count`` jobs with one queued run each, ready now (what a scheduler tick leaves);
    ``target`` adds members to the python target (JSON: '{"timeout_s": 1}')."""
    tenant_id = tenant(conn, tenant_name)
    conn.execute(CALLS_TABLE)
    conn.execute(
        """
        WITH j AS (
            INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, payload,
                              lease_seconds, max_attempts, active)
            SELECT %(tenant)s, %(priority)s::text || g, '0 9 * * *', 'UTC', %(priority)s::text,
                   jsonb_build_object('type', 'python', 'handler', %(handler)s::text)
                   || %(target)s::jsonb,
                   %(payload)s::jsonb, %(lease)s::integer, %(max_attempts)s::integer, false
            FROM generate_series(1, %(count)s) AS g
            RETURNING id, tenant_id, priority
        )
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
        SELECT j.id || ':1791171000', j.id, j.tenant_id, j.priority, now(), now(), now()
        FROM j
        """,
        {"tenant": tenant_id, "count": count, "handler": handler, "priority": priority,
         "payload": payload, "lease": lease_seconds, "max_attempts": max_attempts,
         "target": target},
    )
