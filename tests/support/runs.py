"""Runs of several jobs and two tenants in every state, ended at known ages, so a listing's
exact result (a set of run ids, in order) can be written down."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.support.jobs import add_job, tenant

# label: (job, status, minutes since it ended (negative: due in the future), error class,
# error). Jobs A and B are tenant bank42's, D is acme's.
RUNS: dict[str, tuple[str, str, int, str | None, str | None]] = {
    "a_f1": ("A", "failed", 10, "PermanentError", "permanent: 404 Not Found"),
    "a_f2": ("A", "failed", 50, "PermanentError", "permanent: 410 Gone"),
    "a_f3": ("A", "failed", 120, "PermanentError", "permanent: 404 Not Found"),
    "b_f1": ("B", "failed", 20, "PermanentError", "permanent: invalid number"),
    "a_s1": ("A", "succeeded", 5, None, None),
    "b_s1": ("B", "succeeded", 30, None, None),
    "b_d1": ("B", "dead", 15, "OutcomeUnknown", "timeout: the target does not drop repeats"),
    "a_k1": ("A", "skipped", 40, None, None),
    "a_q1": ("A", "queued", -10, None, None),
    "b_r1": ("B", "running", 25, None, None),      # listed by its due time
    "d_f1": ("D", "failed", 5, "PermanentError", "permanent: 404 Not Found"),
}
BANK42 = [label for label, run in RUNS.items() if run[0] != "D"]


def seed_runs(conn: psycopg.Connection[Any]) -> tuple[dict[str, str], dict[str, int]]:
    """Insert ``RUNS`` (ages measured from the database's now()); returns run ids by label
    and job ids by job label."""
    bank, acme = tenant(conn, "bank42"), tenant(conn, "acme")
    jobs = {label: add_job(conn, acme if label == "D" else bank, cron="0 9 * * *",
                           key=f"job-{label}") for label in "ABD"}
    ids: dict[str, str] = {}
    for n, (label, (job, status, minutes, error_class, error)) in enumerate(RUNS.items()):
        run_id = f"{jobs[job]}:{1_700_000_000 + 60 * n}"
        conn.execute(
            """
            INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                              attempt, available_at, finished_at, skip_reason, last_error,
                              error_class, lease_owner, lease_token, lease_expires_at)
            SELECT %(run_id)s, %(job_id)s, j.tenant_id, 'normal', t.at, t.at, %(status)s,
                   CASE WHEN %(status)s IN ('queued', 'skipped') THEN 0 ELSE 1 END, t.at,
                   CASE WHEN %(status)s NOT IN ('queued', 'running') THEN t.at END,
                   CASE WHEN %(status)s = 'skipped' THEN 'deadline_passed' END,
                   %(error)s, %(error_class)s,
                   CASE WHEN %(status)s = 'running' THEN 'w1' END,
                   CASE WHEN %(status)s = 'running' THEN gen_random_uuid() END,
                   CASE WHEN %(status)s = 'running' THEN now() + interval '1 hour' END
            FROM jobs j, (SELECT now() - make_interval(mins => %(minutes)s) AS at) AS t
            WHERE j.id = %(job_id)s
            """,
            {"run_id": run_id, "job_id": jobs[job], "status": status, "minutes": minutes,
             "error": error, "error_class": error_class})
        ids[label] = run_id
    return ids, jobs


def newest_first(labels: list[str]) -> list[str]:
    """``labels`` in the listing's order: newest ended first (a run due in the future is
    the newest)."""
    return sorted(labels, key=lambda label: RUNS[label][2])


def run_state(conn: psycopg.Connection[Any], run_id: str) -> tuple[Any, ...]:
    """A run's (status, attempt, lease_owner)."""
    row = conn.execute("SELECT status, attempt, lease_owner FROM runs WHERE run_id = %s",
                       (run_id,)).fetchone()
    assert row is not None
    return tuple(row)


def due_runs(conn: psycopg.Connection[Any], name: str, count: int, *,
             priority: str = "normal", age_seconds: float = 60,
             deadline_in: float | None = None) -> int:
    """``count`` jobs of tenant ``name`` with one queued run each, available ``age_seconds``
    ago (negative: in the future), the oldest first in run order. Returns the tenant's id."""
    tenant_id = tenant(conn, name)
    conn.execute(
        """
        WITH j AS (
            INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, active)
            SELECT %(tenant)s, %(name)s || ':' || %(priority)s || ':' || g || ':'
                               || %(age)s::text,
                   '0 9 * * *', 'UTC', %(priority)s::text,
                   '{"type": "python", "handler": "test.noop"}', false
            FROM generate_series(1, %(count)s) AS g
            RETURNING id, tenant_id, priority, key
        )
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,
                          available_at, deadline_at)
        SELECT j.id || ':1791171000', j.id, j.tenant_id, j.priority, a.at, a.at, a.at,
               now() + make_interval(secs => %(deadline)s)
        FROM j,
             LATERAL (SELECT now() - make_interval(secs => %(age)s)
                             + make_interval(secs => split_part(j.key, ':', 3)::int / 1e6)
                             AS at) AS a
        """,
        {"tenant": tenant_id, "name": name, "priority": priority, "count": count,
         "age": age_seconds, "deadline": deadline_in})
    return tenant_id
