"""A run's attempt history and a job's health, written by the outcome statements."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from crondepot.job.health import job_health, list_unhealthy_jobs, set_tenant_threshold
from crondepot.job.store import JobFilter
from crondepot.queue import claim_runs, reap_abandoned_runs, record_retry, record_success
from crondepot.queue.lease import skip_runs_past_deadline
from crondepot.queue.outcome import record_final_failure
from crondepot.runs.attempts import run_attempts
from crondepot.runs.deadletter import retry
from crondepot.runs.reads import get_run
from crondepot.runs.retention import prune_finished_runs
from tests.support.jobs import queued_runs


def _attempts(conn: psycopg.Connection[Any], run_id: str) -> list[dict[str, Any]]:
    (tenant,) = conn.execute("SELECT tenant_id FROM runs WHERE run_id = %s",
                             (run_id,)).fetchone() or (None,)
    return run_attempts(conn, get_run(conn, tenant, run_id))


def _stored_attempts(conn: psycopg.Connection[Any]) -> int:
    (count,) = conn.execute("SELECT count(*) FROM run_attempts").fetchone() or (0,)
    return int(count)


def _ready_again(conn: psycopg.Connection[Any], run_id: str) -> None:
    conn.execute("UPDATE runs SET available_at = now() WHERE run_id = %s", (run_id,))


def test_a_first_attempt_success_writes_no_attempt_row(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 3)
    for run in claim_runs(conn, owner="w1", shares={"normal": 3}):
        record_success(conn, run.run_id, run.lease_token, run.attempt)
    assert _stored_attempts(conn) == 0
    (run_id,) = conn.execute("SELECT run_id FROM runs LIMIT 1").fetchone() or ("",)
    (only,) = _attempts(conn, run_id)
    assert (only["attempt"], only["outcome"], only["worker"]) == (1, "succeeded", "w1")
    assert only["ended_at"] is not None and only["error"] is None


def test_attempts_after_a_retry_then_a_success(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1)
    (first,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    assert record_retry(conn, first.run_id, first.lease_token, delay=0, error="HTTP 503",
                        error_class="TemporaryError") == "queued"
    _ready_again(conn, first.run_id)
    (second,) = claim_runs(conn, owner="w2", shares={"normal": 1})
    mid = _attempts(conn, first.run_id)
    assert [(a["attempt"], a["outcome"], a["worker"]) for a in mid] == [
        (1, "retried", "w1"), (2, "running", "w2")]
    assert mid[0]["error"] == "HTTP 503" and mid[0]["error_class"] == "TemporaryError"
    record_success(conn, second.run_id, second.lease_token, second.attempt)
    done = _attempts(conn, first.run_id)
    assert [(a["attempt"], a["outcome"], a["worker"]) for a in done] == [
        (1, "retried", "w1"), (2, "succeeded", "w2")]
    assert done[0]["started_at"] <= done[0]["ended_at"] <= done[1]["started_at"]


def test_a_lease_that_expired_is_an_attempt_then_another_worker_succeeds(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, lease_seconds=5)
    (run,) = claim_runs(conn, owner="lost-worker", shares={"normal": 1})
    later = run.lease_expires_at + timedelta(seconds=1)
    assert reap_abandoned_runs(conn, now=later) == {"queued": 1, "dead": 0}
    (again,) = claim_runs(conn, owner="w2", shares={"normal": 1}, now=later)
    record_success(conn, again.run_id, again.lease_token, again.attempt)
    attempts = _attempts(conn, run.run_id)
    assert [(a["attempt"], a["outcome"], a["worker"]) for a in attempts] == [
        (1, "lease_expired", "lost-worker"), (2, "succeeded", "w2")]
    assert attempts[0]["ended_at"] == run.lease_expires_at
    assert attempts[0]["error_class"] == "LeaseExpired"


def test_a_retried_dead_run_keeps_its_attempts(conn: psycopg.Connection[Any],
                                                tenant_id: int) -> None:
    queued_runs(conn, 1, max_attempts=1)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    record_final_failure(conn, run.run_id, run.lease_token, status="failed", error="HTTP 400",
                         error_class="PermanentError")
    retry(conn, tenant_id, run.run_id, ignore_deadline=False)
    (again,) = claim_runs(conn, owner="w2", shares={"normal": 1})
    record_success(conn, again.run_id, again.lease_token, again.attempt)
    attempts = _attempts(conn, run.run_id)
    assert [(a["outcome"], a["worker"], a["error"]) for a in attempts] == [
        ("failed", "w1", "HTTP 400"), ("succeeded", "w2", None)]


def test_retention_prunes_attempts_with_their_runs(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 2)
    for run in claim_runs(conn, owner="w1", shares={"normal": 2}):
        record_retry(conn, run.run_id, run.lease_token, delay=0, error="boom",
                     error_class="TemporaryError")
    conn.execute("UPDATE runs SET available_at = now()")
    for run in claim_runs(conn, owner="w1", shares={"normal": 2}):
        record_success(conn, run.run_id, run.lease_token, run.attempt)
    assert _stored_attempts(conn) == 2
    conn.execute("UPDATE runs SET created_at = now() - interval '40 days' "
                 "WHERE job_id = (SELECT min(job_id) FROM runs)")
    assert prune_finished_runs(conn, timedelta(days=30)) == 1
    assert _stored_attempts(conn) == 1
    (left,) = conn.execute("SELECT run_id FROM run_attempts").fetchone() or ("",)
    assert conn.execute("SELECT 1 FROM runs WHERE run_id = %s", (left,)).fetchone()


# --- health ------------------------------------------------------------------------------

def _fail_once(conn: psycopg.Connection[Any], job_id: int, n: int) -> None:
    """Write fire n of the job and end it failed (a permanent error)."""
    conn.execute("""
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
        SELECT j.id || ':' || (1791171000 + %(n)s * 60), j.id, j.tenant_id, j.priority,
               now(), now(), now()
        FROM jobs j WHERE j.id = %(job)s""", {"job": job_id, "n": n})
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    record_final_failure(conn, run.run_id, run.lease_token, status="failed", error="HTTP 400",
                         error_class="PermanentError")


def _one_job(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    queued_runs(conn, 1)
    row = conn.execute("SELECT id, tenant_id FROM jobs").fetchone()
    assert row is not None
    return row[0], row[1]


def test_consecutive_failures_are_counted_and_reset_by_a_success(
        conn: psycopg.Connection[Any]) -> None:
    job, tenant = _one_job(conn)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    record_success(conn, run.run_id, run.lease_token, run.attempt)
    health = job_health(conn, tenant, job)
    assert health is not None and health.consecutive_failures == 0
    assert health.last_success_run_id == run.run_id and not health.unhealthy
    for n in range(1, 4):
        _fail_once(conn, job, n)
    health = job_health(conn, tenant, job)
    assert health is not None
    assert (health.consecutive_failures, health.alert_after_failures, health.threshold_from,
            health.unhealthy) == (3, 3, "tenant", True)
    assert health.last_success_run_id == run.run_id
    assert [j.id for j in list_unhealthy_jobs(conn, tenant, JobFilter())] == [job]
    conn.execute("""
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
        VALUES (%(job)s || ':1791180000', %(job)s, %(tenant)s, 'normal', now(), now(), now())
        """, {"job": job, "tenant": tenant})
    (ok,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    record_success(conn, ok.run_id, ok.lease_token, ok.attempt)
    health = job_health(conn, tenant, job)
    assert health is not None and health.consecutive_failures == 0 and not health.unhealthy
    assert health.last_success_run_id == ok.run_id
    assert list_unhealthy_jobs(conn, tenant, JobFilter()) == []


def test_dead_runs_and_deadline_skips_count_as_failed_fires(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 2, lease_seconds=5, max_attempts=1)
    runs = claim_runs(conn, owner="w1", shares={"normal": 2})
    later = max(r.lease_expires_at for r in runs) + timedelta(seconds=1)
    assert reap_abandoned_runs(conn, now=later) == {"queued": 0, "dead": 2}
    assert conn.execute("SELECT array_agg(failing_fires) FROM jobs").fetchone() == ([1, 1],)
    queued_runs(conn, 1, priority="bulk")
    conn.execute("UPDATE runs SET deadline_at = now() - interval '1 minute' "
                 "WHERE status = 'queued'")
    skip_runs_past_deadline(conn)
    assert conn.execute("SELECT sum(failing_fires) FROM jobs").fetchone() == (3,)


def test_the_threshold_is_the_jobs_else_the_tenants(conn: psycopg.Connection[Any]) -> None:
    job, tenant = _one_job(conn)
    conn.execute("DELETE FROM runs")
    _fail_once(conn, job, 1)
    health = job_health(conn, tenant, job)
    assert health is not None and not health.unhealthy
    assert set_tenant_threshold(conn, "bank42", 1)
    health = job_health(conn, tenant, job)
    assert health is not None and health.unhealthy and health.threshold_from == "tenant"
    conn.execute("UPDATE jobs SET alert_after_failures = 2 WHERE id = %s", (job,))
    health = job_health(conn, tenant, job)
    assert health is not None and not health.unhealthy
    assert (health.alert_after_failures, health.threshold_from) == (2, "job")
    assert health.last_success_at is None
    assert not set_tenant_threshold(conn, "no-such-tenant", 2)
    with pytest.raises(ValueError, match=r"alert_after_failures.*1 to 10000, got 0"):
        set_tenant_threshold(conn, "bank42", 0)


def test_health_of_another_tenants_job_is_none(conn: psycopg.Connection[Any]) -> None:
    job, _tenant = _one_job(conn)
    queued_runs(conn, 1, tenant_name="other")
    (other,) = conn.execute("SELECT id FROM tenants WHERE name = 'other'").fetchone() or (0,)
    assert job_health(conn, other, job) is None
