"""Delivery windows end to end (issue 31, 8): a real scheduler defers a fire due while its
job's window is closed (queued, due at the opening, never leased), and a real worker gives
back a run it claimed outside the window (due at the opening, the attempt not counted, the
target not called). The window is made relative to the database's now, two hours ahead,
so the test does not depend on the second it runs in."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from crondepot.db import connect
from crondepot.scheduler.ledger import verify
from crondepot.timetable.delivery import parse_window
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import CALLS_TABLE, add_job, tenant

TZ = "Asia/Kolkata"


def _closed_window(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """A one-hour window opening two hours after the database's now (local time)."""
    (now,) = conn.execute("SELECT now()").fetchone()  # type: ignore[misc]
    local = now.astimezone(ZoneInfo(TZ))
    return {"from": f"{local + timedelta(hours=2):%H:%M}",
            "to": f"{local + timedelta(hours=3):%H:%M}", "outside": "defer"}


def _opening(window: dict[str, str], conn: psycopg.Connection[Any]) -> datetime:
    (now,) = conn.execute("SELECT now()").fetchone()  # type: ignore[misc]
    opening = parse_window(window).opening(now, TZ)
    assert opening is not None            # closed now: it opens in about two hours
    return opening


@pytest.mark.slow
def test_a_closed_window_defers_fires_and_the_worker_gives_back_a_late_claim(
        db_url: str) -> None:
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)
        t = tenant(conn)
        window = _closed_window(conn)
        job = add_job(conn, t, key="sms-reminder", cron="* * * * *", tz=TZ,
                      target={"type": "python", "handler": "test.record"},
                      delivery_window=window)
        opening = _opening(window, conn)
        # One fire owed a minute back: the scheduler writes it at once.
        conn.execute("UPDATE jobs SET next_nominal_at = date_trunc('minute', now()) - "
                     "interval '1 minute', next_run_at = date_trunc('minute', now()) - "
                     "interval '1 minute' WHERE id = %s", (job,))
        (nominal,) = conn.execute("SELECT next_nominal_at FROM jobs WHERE id = %s",
                                  (job,)).fetchone()  # type: ignore[misc]
        # A run queued inside the window, claimed after it closed: a backlog, as a worker
        # finds it (ready now, its job's window closed).
        late_id = f"{job}:1"
        conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, "
                     "due_at, available_at) VALUES (%s, %s, %s, 'normal', now() - interval "
                     "'1 hour', now() - interval '1 hour', now())", (late_id, job, t))
        procs = [Proc("scheduler", "--db", db_url, "--tick", "500ms"),
                 Proc("worker", "--db", db_url, "--import", "tests.support.handlers",
                      "--name", "w1", env={"CRONDEPOT_TEST_CALLS_URL": db_url})]
        fire_id = f"{job}:{int(nominal.timestamp())}"

        def row(run_id: str) -> Any:
            return conn.execute(
                "SELECT status, due_at, available_at, attempt, lease_token, nominal_at "
                "FROM runs WHERE run_id = %s", (run_id,)).fetchone()

        try:
            wait_until(lambda: row(fire_id) is not None, timeout=60,
                       message="the scheduler wrote the owed fire")
            wait_until(lambda: conn.execute(
                "SELECT available_at > now() FROM runs WHERE run_id = %s",
                (late_id,)).fetchone() == (True,),
                timeout=60, message="the worker gave the late run back")
        finally:
            for proc in procs:
                proc.stop()
        fire, late = row(fire_id), row(late_id)
        calls = conn.execute("SELECT count(*) FROM test_calls").fetchone()
        # the ledger: every fire of the job has its row, the deferred ones included
        report = verify(conn, tenant_id=t, since=nominal)
    assert report.clean, report.document()
    # the fire: queued with its nominal run id, due at the opening, not leased
    assert fire[0] == "queued" and fire[1] == opening and fire[2] == opening
    assert fire[3] == 0 and fire[4] is None and fire[5] == nominal
    # the late claim: back in the queue until the opening, its attempt not counted
    assert late[0] == "queued" and late[2] == opening and late[1] == opening
    assert late[3] == 0 and late[4] is None
    assert calls == (0,)
