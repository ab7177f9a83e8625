"""Exclusion calendars end to end (issue 31, item 4): a real scheduler process writes the
fire of three daily jobs whose calendar excludes today, skipped or moved by each job's
rule, each with its nominal run id; and ``verify`` finds every fire with exactly one row."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from crondepot.db import connect
from crondepot.scheduler.ledger import verify
from crondepot.tenancy.calendars import set_calendar
from crondepot.timetable import run_id
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import add_job, tenant

ZONE = ZoneInfo("Asia/Kolkata")
EVERY_DAY = "mon-sun"      # so the day before and after are business days whatever today is


@pytest.mark.slow
def test_a_daily_job_whose_calendar_excludes_today_is_skipped_or_moved(db_url: str) -> None:
    with connect(db_url) as conn:
        row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        today = row[0].astimezone(ZONE).date()
        # today's local midnight fire, already passed: due at the scheduler's first tick
        nominal = datetime.combine(today, time(0), ZONE)
        t = tenant(conn)
        set_calendar(conn, t, "in-bank-holidays", [today])
        jobs = {}
        for rule in ("skip", "next_business_day", "previous_business_day"):
            jobs[rule] = add_job(conn, t, key=rule, cron="0 0 * * *", tz="Asia/Kolkata",
                                 calendar={"exclude": "in-bank-holidays", "on_excluded": rule,
                                           "business_days": EVERY_DAY})
        # as if made before today's fire (verify checks a timetable from when it was made)
        conn.execute("UPDATE jobs SET next_nominal_at = %s, next_run_at = %s, "
                     "created_at = %s, timetable_since = %s WHERE id = ANY(%s)",
                     (nominal, nominal, nominal - timedelta(minutes=1),
                      nominal - timedelta(minutes=1), list(jobs.values())))
        ids = {rule: run_id(job, nominal) for rule, job in jobs.items()}

        def written() -> bool:
            found = conn.execute("SELECT count(*) FROM runs WHERE run_id = ANY(%s)",
                                 (list(ids.values()),)).fetchone()
            return found is not None and found[0] == 3

        scheduler = Proc("scheduler", "--db", db_url, "--tick", "500ms")
        try:
            wait_until(written, timeout=60, message="the three fires written")
        finally:
            scheduler.stop()
        runs = {r[0]: r[1:] for r in conn.execute(
            "SELECT run_id, status, skip_reason, nominal_at, due_at FROM runs "
            "WHERE run_id = ANY(%s)", (list(ids.values()),))}
        report = verify(conn, since=nominal - timedelta(hours=1))
    assert runs[ids["skip"]][:3] == ("skipped", "calendar", nominal)
    assert runs[ids["next_business_day"]] == ("queued", None, nominal, nominal + timedelta(days=1))
    assert runs[ids["previous_business_day"]] == ("queued", None, nominal,
                                                  nominal - timedelta(days=1))
    assert report.clean, report.document()
    assert report.fires >= 3 and report.unaccounted_count == 0
