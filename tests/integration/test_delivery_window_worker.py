"""The worker's side of delivery windows, through its own code path: a retry whose wait
ends after the window closes is queued for the next opening, and claims look windows up
only for tenants that have one. Windows are made relative to the database's now."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from crondepot.base.errors import TemporaryError
from crondepot.job.guard import AddressGuard
from crondepot.job.store import trigger_job
from crondepot.limits.buckets import RateLimiter
from crondepot.queue import WindowedTenants, claim_runs, claimed_windows
from crondepot.queue.lease import Deadline
from crondepot.tenancy import grants
from crondepot.timetable.delivery import parse_window
from crondepot.worker.execute import Attempt, Executor
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.targets import WebhookTarget
from tests.support.jobs import add_job, tenant

TZ = "Asia/Kolkata"
LATER = "test.delivery_window.later"


@handler(LATER)
def _later(run: RunContext) -> None:
    raise TemporaryError("gateway said 429", retry_after_seconds=3600)


@pytest.fixture
def pool(db_url: str) -> Any:
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True,
                        kwargs={"autocommit": True}) as opened:
        yield opened


def _now(conn: psycopg.Connection[Any]) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def test_a_retry_due_after_closing_waits_for_the_next_opening(
        pool: ConnectionPool, conn: psycopg.Connection[Any]) -> None:
    # open now, closing within 30 minutes; the gateway asks for an hour
    local = _now(conn).astimezone(ZoneInfo(TZ))
    window = {"from": f"{local - timedelta(hours=2):%H:%M}",
              "to": f"{local + timedelta(minutes=30):%H:%M}"}
    tenant_id = tenant(conn)
    grants.grant(conn, tenant_id, handlers=[LATER])
    job_id = add_job(conn, tenant_id, key="bank42:renewal-sms", cron="0 9 * * *", tz=TZ,
                     target={"type": "python", "handler": LATER}, delivery_window=window)
    run_id = trigger_job(conn, tenant_id, job_id).run_id
    sent_at = time.monotonic()
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    windows = claimed_windows(conn, [run])
    assert parse_window(window).opening(run.db_now, TZ) is None       # open now
    outcomes = OutcomeWriter(pool)
    outcomes.start()
    webhooks = WebhookTarget(AddressGuard.from_env())
    executor = Executor(pool, outcomes, RateLimiter(pool), webhooks, stopping=lambda: False)
    try:
        attempt = Attempt(run=run, deadline=Deadline(time.monotonic() + 30),
                          window=windows[job_id], claimed_at=sent_at)
        assert executor.run(attempt, lambda: None) == "done"
    finally:
        outcomes.close()
        webhooks.close()
    row = conn.execute("SELECT status, attempt, available_at FROM runs WHERE run_id = %s",
                       (run_id,)).fetchone()
    assert row is not None
    status, attempts, available_at = row
    opening = parse_window(window).opening(_now(conn) + timedelta(hours=1), TZ)
    assert opening is not None and opening > _now(conn) + timedelta(hours=20)
    assert (status, attempts, available_at) == ("queued", 1, opening)


def test_claims_look_windows_up_only_for_tenants_that_have_one(
        conn: psycopg.Connection[Any]) -> None:
    plain = tenant(conn, "shop7")
    windowed = tenant(conn, "bank42")
    job_plain = add_job(conn, plain, key="mail", cron="0 9 * * *")
    job_windowed = add_job(conn, windowed, key="sms", cron="0 9 * * *", tz=TZ,
                           delivery_window={"from": "09:00", "to": "21:00"})
    opted_out = add_job(conn, windowed, key="ops", cron="0 9 * * *",
                        delivery_window="none")
    for job in (job_plain, job_windowed, opted_out):
        trigger_job(conn, plain if job == job_plain else windowed, job)
    runs = claim_runs(conn, owner="w", shares={"normal": 3})
    checked = WindowedTenants(ttl=0).runs_to_check(conn, runs)
    assert {run.job_id for run in checked} == {job_windowed, opted_out}
    found = claimed_windows(conn, checked)
    assert set(found) == {job_windowed}                    # "none" has no window
    assert found[job_windowed] == (parse_window({"from": "09:00", "to": "21:00"}), TZ)
    # a tenant's default makes every job of it one to check, and is each job's window
    conn.execute("UPDATE tenants SET delivery_window = %s WHERE id = %s",
                 ('{"from": "08:00", "to": "20:00"}', plain))
    assert {r.job_id for r in WindowedTenants(ttl=0).runs_to_check(conn, runs)} == {
        job_plain, job_windowed, opted_out}
    assert set(claimed_windows(conn, runs)) == {job_plain, job_windowed}
