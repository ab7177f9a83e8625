"""Every failed, retried and dead run writes one WARNING line naming the run id, the job's
key and the error: through the worker's own code path (Executor), in-process, and through
the reaper for a run whose lease expired on its last attempt. A success writes none."""

from __future__ import annotations

import logging
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from crondepot.base.errors import PermanentError, TemporaryError
from crondepot.job.guard import AddressGuard
from crondepot.limits.buckets import RateLimiter
from crondepot.queue import claim_runs, reap_abandoned_runs
from crondepot.queue.lease import Deadline
from crondepot.tenancy import grants
from crondepot.worker.execute import Attempt, Executor
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.targets import WebhookTarget
from tests.support.jobs import queued_runs, tenant

HANDLERS = ("test.logs.temporary", "test.logs.permanent", "test.logs.ok")


@handler("test.logs.temporary")
def _temporary(run: RunContext) -> None:
    raise TemporaryError("gateway said 503")


@handler("test.logs.permanent")
def _permanent(run: RunContext) -> None:
    raise PermanentError("invalid number")


@handler("test.logs.ok")
def _ok(run: RunContext) -> None:
    return None


def _queued(conn: psycopg.Connection[Any], handler_name: str, **options: Any) -> None:
    queued_runs(conn, 1, handler=handler_name, **options)
    grants.grant(conn, tenant(conn), handlers=list(HANDLERS))


@pytest.fixture
def pool(db_url: str) -> Any:
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True,
                        kwargs={"autocommit": True}) as opened:
        yield opened


def _execute_one(pool: ConnectionPool, conn: psycopg.Connection[Any],
                 caplog: pytest.LogCaptureFixture, *,
                 max_lease_seconds: int = 12 * 3600) -> tuple[str, str, list[str]]:
    """Claim the one queued run, execute it as a worker's slot does; (run id, its status
    after, the WARNING lines written meanwhile)."""
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    outcomes = OutcomeWriter(pool)
    outcomes.start()
    webhooks = WebhookTarget(AddressGuard.from_env())
    executor = Executor(pool, outcomes, RateLimiter(pool), webhooks, stopping=lambda: False,
                        max_lease_seconds=max_lease_seconds)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crondepot"):
        try:
            executor.run(Attempt(run=run, deadline=Deadline(time.monotonic() + 30)),
                         lambda: None)
        finally:
            outcomes.close()
            webhooks.close()
    row = conn.execute("SELECT status FROM runs WHERE run_id = %s", (run.run_id,)).fetchone()
    assert row is not None
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return run.run_id, str(row[0]), lines


def _job_key(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT key FROM jobs").fetchone()
    assert row is not None
    return str(row[0])


def test_a_temporary_failure_logs_one_retried_line(
        pool: ConnectionPool, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    _queued(conn, "test.logs.temporary")
    run_id, status, lines = _execute_one(pool, conn, caplog)
    assert status == "queued"
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"run {run_id} retried: job {_job_key(conn)}: TemporaryError: ")
    assert "gateway said 503" in lines[0] and "attempt 1 of 6" in lines[0]


def test_a_permanent_failure_logs_one_failed_line(
        pool: ConnectionPool, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    _queued(conn, "test.logs.permanent")
    run_id, status, lines = _execute_one(pool, conn, caplog)
    assert status == "failed"
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"run {run_id} failed: job {_job_key(conn)}: PermanentError: ")
    assert lines[0].endswith("invalid number")


def test_the_last_attempt_logs_one_dead_line(
        pool: ConnectionPool, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    _queued(conn, "test.logs.temporary", max_attempts=1)
    run_id, status, lines = _execute_one(pool, conn, caplog)
    assert status == "dead"
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"run {run_id} dead: job {_job_key(conn)}: TemporaryError: ")


def test_a_retry_past_the_lease_time_cap_logs_one_dead_line(
        pool: ConnectionPool, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    _queued(conn, "test.logs.temporary")
    run_id, status, lines = _execute_one(pool, conn, caplog, max_lease_seconds=0)
    assert status == "dead"
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"run {run_id} dead: job {_job_key(conn)}: lease time cap "
                               "reached; last error TemporaryError: ")
    assert "again in" not in lines[0]


def test_a_success_logs_no_warning(pool: ConnectionPool, conn: psycopg.Connection[Any],
                                   caplog: pytest.LogCaptureFixture) -> None:
    _queued(conn, "test.logs.ok")
    _run_id, status, lines = _execute_one(pool, conn, caplog)
    assert status == "succeeded" and lines == []


def test_a_run_reaped_into_the_dead_letter_logs_one_dead_line(
        conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture) -> None:
    queued_runs(conn, 2, max_attempts=1)
    (run,) = claim_runs(conn, owner="lost-worker", shares={"normal": 1})
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crondepot"):
        assert reap_abandoned_runs(conn, now=run.lease_expires_at + timedelta(seconds=1)) == {
            "queued": 0, "dead": 1}
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    key = conn.execute("SELECT key FROM jobs WHERE id = %s", (run.job_id,)).fetchone()
    assert key is not None
    assert lines == [f"run {run.run_id} dead: job {key[0]}: lease expired: worker "
                     "lost-worker was lost"]
