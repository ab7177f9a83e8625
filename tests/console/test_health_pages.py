"""The console shows a run's attempts, a job's health, and marks (and filters) unhealthy
jobs in the jobs list."""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tests.console.test_pages import table
from tests.support.console import World, login


def test_the_run_page_lists_its_attempts(client: TestClient, world: World,
                                         conn: psycopg.Connection[Any]) -> None:
    run_id = world.dead[0]
    conn.execute("""
        INSERT INTO run_attempts (run_id, attempt, started_at, ended_at, outcome, error,
                                  error_class, worker)
        VALUES (%(r)s, 5, now() - interval '2 minutes', now() - interval '1 minute',
                'lease_expired', 'lease expired: worker <w9> was lost', 'LeaseExpired', 'w9')
        """, {"r": run_id})
    conn.execute("UPDATE runs SET worker = 'worker-7' WHERE run_id = %s", (run_id,))
    login(client, world.admin)
    attempts = table(client.get(f"/console/runs/{run_id}").text, "attempts")
    rows = attempts.split("<tr>")[2:]
    assert len(rows) == 2
    assert "lease_expired" in rows[0] and "w9" in rows[0] and "&lt;w9&gt;" in rows[0]
    assert "st-dead" in rows[1] and "worker-7" in rows[1] and "timed out" in rows[1]
    theirs = client.get(f"/console/runs/{world.their_dead}")
    assert theirs.status_code == 404


def test_jobs_list_marks_unhealthy_jobs_and_the_job_page_shows_health(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    conn.execute("UPDATE jobs SET failing_fires = 3 WHERE id = %s", (world.daily,))
    login(client, world.admin)
    jobs = table(client.get("/console/jobs").text, "jobs")
    marked = [row for row in jobs.split("<tr ")[1:] if "st-unhealthy" in row]
    assert len(marked) == 1 and f'data-job="{world.daily}"' in marked[0]
    only = table(client.get("/console/jobs?health=unhealthy").text, "jobs")
    assert only.count("data-job=") == 1 and f'data-job="{world.daily}"' in only
    page = client.get(f"/console/jobs/{world.daily}").text
    health = page[page.index('id="health"'):]
    health = health[:health.index("</section>")]
    assert "st-unhealthy" in health and "3 (alert after 3, the tenant's threshold)" in health
    assert "/console/runs/" in health          # its last success links to the run
    berlin = client.get(f"/console/jobs/{world.berlin}").text
    assert "none in the runs kept" in berlin and "st-unhealthy" not in berlin
