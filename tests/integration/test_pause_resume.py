"""Pausing and resuming: the runs missed while paused are recorded as skipped, not sent."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from crondepot.job.store import pause_job, resume_job
from tests.support.jobs import add_job


def test_resume_records_the_runs_missed_while_paused_as_skipped(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    job_id = add_job(conn, tenant_id, cron="* * * * *", key="every-minute")
    pause_job(conn, tenant_id, job_id)
    conn.execute("UPDATE jobs SET next_nominal_at = date_trunc('minute', now()) - "
                 "interval '10 minutes', next_run_at = date_trunc('minute', now()) - "
                 "interval '10 minutes' WHERE id = %s", (job_id,))
    resumed = resume_job(conn, tenant_id, job_id)
    rows = conn.execute("SELECT status, skip_reason, count(*) FROM runs GROUP BY 1, 2"
                        ).fetchall()
    assert rows == [("skipped", "paused", 11)]
    assert resumed.next_run_at is not None and not resumed.paused
    (now,) = conn.execute("SELECT now()").fetchone()  # type: ignore[misc]
    assert now < resumed.next_run_at <= now + timedelta(minutes=1)


def test_a_long_pause_records_every_fire_however_many(conn: psycopg.Connection[Any],
                                                    tenant_id: int) -> None:
    # The ledger rule has no bound: max_catchup limits what is *sent* after an outage, but
    # every fire of a pause still gets its row (three days of a minutely job: 4,320).
    job_id = add_job(conn, tenant_id, cron="* * * * *", key="k", max_catchup=5)
    pause_job(conn, tenant_id, job_id)
    conn.execute("UPDATE jobs SET next_nominal_at = date_trunc('minute', now()) - "
                 "interval '3 days', next_run_at = date_trunc('minute', now()) - "
                 "interval '3 days' WHERE id = %s", (job_id,))
    resume_job(conn, tenant_id, job_id)
    assert conn.execute("SELECT status, skip_reason, count(*) FROM runs GROUP BY 1, 2"
                        ).fetchall() == [("skipped", "paused", 3 * 24 * 60 + 1)]
