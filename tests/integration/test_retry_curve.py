"""A job's retry curve (retry {max_attempts, base_s, cap_s}) through the worker's own code
path: the waits are drawn from the job's curve by the statement that records the retry, a
Retry-After longer than the curve still wins, the job's max_attempts ends the run dead, and
a misfire deadline before the next retry still ends it skipped.

The wait is read as ``available_at - updated_at`` (record_retry sets both from one
``now()``). Between attempts the run is made ready again by hand, as the deadline tests do,
once its wait has been read: nothing here sleeps.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from crondepot.base.errors import TemporaryError
from crondepot.job.guard import AddressGuard
from crondepot.job.store import trigger_job
from crondepot.limits.buckets import RateLimiter
from crondepot.queue import claim_runs, retry_later
from crondepot.queue.lease import Deadline
from crondepot.queue.retry import backoff_cap, retry_wait
from crondepot.tenancy import grants
from crondepot.worker.execute import Attempt, Executor
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.targets import WebhookTarget
from tests.support.jobs import add_job, tenant

BUSY, LATER = "test.retry_curve.busy", "test.retry_curve.later"
CURVE = {"max_attempts": 3, "base_s": 1, "cap_s": 2}


@handler(BUSY)
def _busy(run: RunContext) -> None:
    raise TemporaryError("gateway said 503")


@handler(LATER)
def _later(run: RunContext) -> None:
    raise TemporaryError("gateway said 429", retry_after_seconds=45)


@pytest.fixture
def pool(db_url: str) -> Any:
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True,
                        kwargs={"autocommit": True}) as opened:
        yield opened


def _job(conn: psycopg.Connection[Any], name: str, **doc: Any) -> str:
    """A job calling handler ``name`` with ``doc``'s fields, and its one run, queued now."""
    tenant_id = tenant(conn)
    grants.grant(conn, tenant_id, handlers=[BUSY, LATER])
    job_id = add_job(conn, tenant_id, key=f"bank42:reminder:{name}", cron="0 9 * * *",
                     target={"type": "python", "handler": name}, **doc)
    return trigger_job(conn, tenant_id, job_id).run_id


def _attempt(pool: ConnectionPool, conn: psycopg.Connection[Any],
             caplog: pytest.LogCaptureFixture) -> tuple[int, list[str]]:
    """Claim the one ready run and call it as a worker's slot does: (its attempt number,
    the WARNING lines written)."""
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    outcomes = OutcomeWriter(pool)
    outcomes.start()
    webhooks = WebhookTarget(AddressGuard.from_env())
    executor = Executor(pool, outcomes, RateLimiter(pool), webhooks, stopping=lambda: False)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crondepot"):
        try:
            assert executor.run(Attempt(run=run, deadline=Deadline(time.monotonic() + 30)),
                                lambda: None) == "done"
        finally:
            outcomes.close()
            webhooks.close()
    # (not what another test's broker client, still reconnecting in its own thread, logs)
    return run.attempt, [r.getMessage() for r in caplog.records
                         if r.levelno == logging.WARNING and r.threadName != "crondepot-nats"]


def _state(conn: psycopg.Connection[Any], run_id: str) -> tuple[str, float, str | None]:
    row = conn.execute("SELECT status, extract(epoch FROM available_at - updated_at)::float8,"
                       " skip_reason FROM runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    return str(row[0]), float(row[1]), row[2]


def _logged_wait(line: str) -> float:
    found = re.search(r"again in ([0-9.]+) s\)", line)
    assert found is not None, line
    return float(found[1])


def test_a_job_s_curve_bounds_each_wait_and_its_max_attempts_ends_it_dead(
        pool: ConnectionPool, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    run_id = _job(conn, BUSY, retry=CURVE)
    for expected in (1, 2):
        attempt, lines = _attempt(pool, conn, caplog)
        status, wait, _ = _state(conn, run_id)
        assert (attempt, status) == (expected, "queued")
        assert 0 <= wait <= backoff_cap(attempt, 1, 2) == min(2, 2 ** (attempt - 1))
        assert len(lines) == 1 and f"attempt {attempt} of 3" in lines[0], lines
        assert _logged_wait(lines[0]) == pytest.approx(wait, abs=0.05)   # what was stored
        conn.execute("UPDATE runs SET available_at = now() WHERE run_id = %s", (run_id,))
    attempt, lines = _attempt(pool, conn, caplog)
    assert attempt == 3 and _state(conn, run_id)[0] == "dead"
    assert "gave up after 3 attempts" in lines[0], lines
    kept = conn.execute("SELECT attempt, outcome FROM run_attempts WHERE run_id = %s "
                        "ORDER BY attempt", (run_id,)).fetchall()
    assert kept == [(1, "retried"), (2, "retried")]


def test_the_statement_waits_by_the_job_s_curve_as_stored_when_it_records(
        conn: psycopg.Connection[Any]) -> None:
    run_id = _job(conn, BUSY, retry={"max_attempts": 10, "base_s": 1, "cap_s": 2})
    waits = []
    for attempt in (1, 2, 3):
        (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
        status, wait = retry_later(conn, run.run_id, run.lease_token, jitter=0.75,
                                   error="503", error_class="TemporaryError")
        assert status == "queued" and run.attempt == attempt
        assert wait == pytest.approx(_state(conn, run_id)[1], abs=1e-6)
        waits.append(wait)
        conn.execute("UPDATE runs SET available_at = now()")
    # the same formula in Python and SQL: 0.75 of 1, 2, 2 s
    assert waits == [retry_wait(a, jitter=0.75, base_s=1, cap_s=2) for a in (1, 2, 3)]
    assert waits == [0.75, 1.5, 1.5]
    # a curve changed between attempts is the one the next record uses, whoever records it
    conn.execute("UPDATE jobs SET retry_base_s = 10, retry_cap_s = 100")
    (run,) = claim_runs(conn, owner="other", shares={"normal": 1})
    assert retry_later(conn, run.run_id, run.lease_token, jitter=0.5, error="503",
                       error_class="TemporaryError") == ("queued", 40.0)   # 0.5 · 10 · 2^3


def test_a_retry_after_longer_than_the_curve_still_wins(
        pool: ConnectionPool, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    run_id = _job(conn, LATER, retry=CURVE)
    _, lines = _attempt(pool, conn, caplog)
    status, wait, _ = _state(conn, run_id)
    assert status == "queued" and wait == pytest.approx(45)
    assert "again in 45.0 s" in lines[0], lines


def test_a_deadline_before_the_next_retry_ends_the_run_skipped(
        pool: ConnectionPool, conn: psycopg.Connection[Any],
        caplog: pytest.LogCaptureFixture) -> None:
    # Retry-After 45 s, the run's misfire deadline 20 s away: the retry would come too late
    run_id = _job(conn, LATER, retry=CURVE, misfire={"policy": "skip_after", "seconds": 60})
    conn.execute("UPDATE runs SET deadline_at = now() + interval '20 s'")
    _attempt(pool, conn, caplog)
    status, _, reason = _state(conn, run_id)
    assert (status, reason) == ("skipped", "deadline_passed")
    # and by the curve alone: a 1 h base, any jitter above 1 %, against a 20 s deadline
    run_id = _job(conn, BUSY, retry={"base_s": 3600, "cap_s": 3600},
                  misfire={"policy": "skip_after", "seconds": 60})
    conn.execute("UPDATE runs SET deadline_at = now() + interval '20 s' WHERE run_id = %s",
                  (run_id,))
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    assert retry_later(conn, run.run_id, run.lease_token, jitter=0.5, error="503",
                       error_class="TemporaryError") == ("skipped", 1800.0)
