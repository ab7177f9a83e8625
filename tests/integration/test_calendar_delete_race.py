"""A calendar's delete and a job write naming it, at once: the job write holds the calendar
row (FOR SHARE) until it commits, so the delete waits for it and then refuses, finding the
new job; the job never names a calendar that is gone."""

from __future__ import annotations

import threading
from datetime import date
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.job.spec import JobSpec
from crondepot.job.store import create_job
from crondepot.tenancy.calendars import CalendarInUse, delete_calendar, set_calendar
from crondepot_testkit.processes import wait_until


def _waiting(conn: psycopg.Connection[Any], pid: int) -> bool:
    row = conn.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s",
                       (pid,)).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_delete_waits_for_a_job_write_naming_the_calendar_and_refuses(
        db_url: str, conn: psycopg.Connection[Any], tenant_id: int) -> None:
    set_calendar(conn, tenant_id, "in-bank-holidays", [date(2026, 12, 25)])
    spec = JobSpec.from_document({
        "key": "emi", "cron": "0 9 5 * *", "tz": "Asia/Kolkata",
        "target": {"type": "python", "handler": "test.noop"},
        "calendar": {"exclude": "in-bank-holidays"}})
    outcome: list[BaseException | None] = []
    with connect(db_url) as writer, connect(db_url) as deleter:
        deleter_pid = deleter.info.backend_pid

        def delete() -> None:
            try:
                delete_calendar(deleter, tenant_id, "in-bank-holidays")
                outcome.append(None)
            except BaseException as exc:   # reported to the test below
                outcome.append(exc)

        with writer.transaction():
            create_job(writer, tenant_id, spec)
            thread = threading.Thread(target=delete)
            thread.start()
            wait_until(lambda: _waiting(conn, deleter_pid), timeout=10,
                       message="the delete waits for the job write")
        thread.join(timeout=10)
    assert len(outcome) == 1 and isinstance(outcome[0], CalendarInUse)
    assert conn.execute("SELECT count(*) FROM calendars").fetchone() == (1,)
    with pytest.raises(CalendarInUse):
        delete_calendar(conn, tenant_id, "in-bank-holidays")
