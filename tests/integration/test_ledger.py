"""The ledger rule under what people do: edits, pauses, resumes and cancels at any moment keep
every fire's row, and ``verify`` finds a fire without a row or with two.

The clock is injected as the code takes it (``now=``: the store, the tick and verify all ask
the database for ``coalesce(now, now())``), so the tests walk through a morning at will.
The first four tests are the ledger rule's regressions (docs/ledger.md): each lost a fire
before the change.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.job import JobSpec
from crondepot.job.store import (
    cancel_job,
    create_jobs,
    get_job,
    pause_job,
    resume_job,
    update_job,
)
from crondepot.maintenance import MaintenanceConfig
from crondepot.scheduler.ledger import WindowError, check_if_due, latest_check, verify
from crondepot.scheduler.loop import Scheduler, SchedulerConfig
from crondepot.scheduler.tick import tick
from crondepot.timetable import run_id, spread_offset
from tests.support.jobs import tenant

DAY = datetime(2026, 3, 2, tzinfo=UTC)          # a Monday; every job here runs on UTC


def at(hour: int, minute: int = 0, day: int = 0) -> datetime:
    return DAY + timedelta(days=day, hours=hour, minutes=minute)


def spread_key(at_least: int, seconds: int = 1800) -> str:
    """A spread key whose offset is at least ``at_least`` seconds."""
    return next(k for k in (f"s{i}" for i in range(10_000))
                if spread_offset(k, seconds) >= at_least)


def add(conn: psycopg.Connection[Any], tenant_id: int, now: datetime, **doc: Any) -> int:
    doc = {"tz": "UTC", "target": {"type": "python", "handler": "test.noop"}, **doc}
    (created,) = create_jobs(conn, tenant_id, [JobSpec.from_document(doc)], now=now)
    return created.id


def drain(conn: psycopg.Connection[Any], now: datetime) -> None:
    while tick(conn, batch=500, now=now).full:
        pass


def rows(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT nominal_at, status, skip_reason, due_at FROM runs "
                        "WHERE job_id = %s ORDER BY nominal_at", (job_id,)).fetchall()


def assert_clean(conn: psycopg.Connection[Any], now: datetime, **kw: Any) -> Any:
    report = verify(conn, since=DAY - timedelta(days=1), now=now, **kw)
    assert report.clean, report.document()
    return report


@pytest.fixture
def t(conn: psycopg.Connection[Any]) -> int:
    return tenant(conn)


# -- the losses the ledger rule closed (the deadline one is in test_deadline.py, the import one in
# -- tests/api/test_ledger_api.py) -----------------------------------------------------------

def test_an_edit_inside_the_spread_window_keeps_the_fire_it_follows(
        conn: psycopg.Connection[Any], t: int) -> None:
    key = spread_key(at_least=600)
    offset = timedelta(seconds=spread_offset(key, 1800))
    job_id = add(conn, t, at(8), key="emi", cron="0 9 * * *", payload={"v": 1},
                 spread={"seconds": 1800, "key": key})
    drain(conn, at(9, 5))                       # 09:00 passed, due 09:00 + offset not yet
    assert rows(conn, job_id) == []
    job = get_job(conn, t, job_id)
    update_job(conn, t, job_id, {"payload": {"v": 2}}, version=job.version, now=at(9, 5))
    # Today's 09:00 is owed: written now, due when it always was, sent with the new payload.
    assert rows(conn, job_id) == [(at(9), "queued", None, at(9) + offset)]
    assert get_job(conn, t, job_id).next_nominal_at == at(9, day=1)
    report = assert_clean(conn, at(9, 6))
    assert (report.fires, report.pending) == (1, 0)


def test_an_edit_during_an_outage_writes_every_missed_fire_by_its_rules(
        conn: psycopg.Connection[Any], t: int) -> None:
    late = add(conn, t, at(8, 30), key="late", cron="0 * * * *")
    strict = add(conn, t, at(8, 30), key="strict", cron="0 * * * *",
                 misfire={"policy": "skip_after", "seconds": 3600})
    # No scheduler ran from 08:30 to 13:10; then cron and tz are edited.
    for job_id in (late, strict):
        version = get_job(conn, t, job_id).version
        update_job(conn, t, job_id, {"cron": "30 * * * *", "tz": "Europe/Paris"},
                   version=version, now=at(13, 10))
    hours = [at(h) for h in range(9, 14)]
    assert rows(conn, late) == [(h, "queued", None, h) for h in hours]
    # skip_after 3600: judged at 13:10, the fires of 09:00 to 11:00 are too late to send
    assert [r[1:3] for r in rows(conn, strict)] == [("skipped", "misfire_deadline")] * 4 + [
        ("queued", None)]
    drain(conn, at(13, 31))
    assert rows(conn, late)[-1][:2] == (at(13, 30), "queued")       # the new timetable
    history = conn.execute("SELECT cron, tz, since, until FROM job_timetables "
                           "WHERE job_id = %s", (late,)).fetchall()
    assert history == [("0 * * * *", "UTC", at(8, 30), at(13, 10))]
    assert assert_clean(conn, at(13, 40)).fires == 2 * 6


def test_pause_then_resume_inside_the_spread_window_keeps_the_fire(
        conn: psycopg.Connection[Any], t: int) -> None:
    key = spread_key(at_least=600)
    offset = timedelta(seconds=spread_offset(key, 1800))
    job_id = add(conn, t, at(8), key="emi", cron="0 9 * * *",
                 spread={"seconds": 1800, "key": key})
    drain(conn, at(9, 5))
    pause_job(conn, t, job_id, now=at(9, 5))    # the pause applies to the fires after it
    resume_job(conn, t, job_id, now=at(9, 8))
    assert rows(conn, job_id) == [(at(9), "queued", None, at(9) + offset)]
    # Paused over the next 09:00: that one is recorded, not sent.
    pause_job(conn, t, job_id, now=at(20))
    resume_job(conn, t, job_id, now=at(10, day=1))
    assert rows(conn, job_id)[-1][:3] == (at(9, day=1), "skipped", "paused")
    assert get_job(conn, t, job_id).next_nominal_at == at(9, day=2)
    assert assert_clean(conn, at(10, day=1)).fires == 2


def test_cancel_inside_the_spread_window_records_the_fire_it_cuts(
        conn: psycopg.Connection[Any], t: int) -> None:
    key = spread_key(at_least=600)
    job_id = add(conn, t, at(8), key="emi", cron="0 9 * * *",
                 spread={"seconds": 1800, "key": key})
    drain(conn, at(9, 5))
    cancel_job(conn, t, job_id, now=at(9, 5))
    assert [r[:2] for r in rows(conn, job_id)] == [(at(9), "cancelled")]
    assert assert_clean(conn, at(12, day=3)).fires == 1      # and none after the cancel


# -- more of what people do -------------------------------------------------------------------

def test_a_paused_job_edited_records_its_paused_fires_under_the_old_timetable(
        conn: psycopg.Connection[Any], t: int) -> None:
    job_id = add(conn, t, at(7, 30), key="k", cron="0 * * * *")
    drain(conn, at(8, 1))
    pause_job(conn, t, job_id, now=at(8, 30))
    update_job(conn, t, job_id, {"cron": "15 * * * *"},
               version=get_job(conn, t, job_id).version, now=at(10, 30))
    resume_job(conn, t, job_id, now=at(11, 20))
    assert [r[:3] for r in rows(conn, job_id)] == [
        (at(8), "queued", None),
        (at(9), "skipped", "paused"), (at(10), "skipped", "paused"),   # old cron, paused
        (at(11, 15), "skipped", "paused"),                              # new cron, paused
    ]
    assert_clean(conn, at(11, 30))


def test_edits_while_a_catchup_backlog_is_pending_never_write_a_fire_twice(
        conn: psycopg.Connection[Any], t: int) -> None:
    job_id = add(conn, t, at(0), key="k", cron="*/10 * * * *", catchup="latest")
    for minute in (25, 31, 47):                 # three payload edits, no scheduler
        update_job(conn, t, job_id, {"payload": {"m": minute}},
                   version=get_job(conn, t, job_id).version, now=at(1, minute))
    drain(conn, at(2))
    statuses = [r[1:3] for r in rows(conn, job_id)]
    assert len(statuses) == 12                  # 00:10 .. 02:00, one row each
    assert statuses.count(("queued", None)) == 4   # the latest fire at each edit, and 02:00
    assert_clean(conn, at(2, 5))


def test_verify_reports_a_missing_row_and_a_fire_with_two(
        conn: psycopg.Connection[Any], t: int) -> None:
    job_id = add(conn, t, at(7), key="k", cron="0 * * * *")
    drain(conn, at(12))
    conn.execute("DELETE FROM runs WHERE run_id = %s", (run_id(job_id, at(10)),))
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at) VALUES ('manual', %s, %s, 'normal', %s, %s, %s)",
                 (job_id, t, at(11), at(11), at(11)))
    report = verify(conn, since=at(0), now=at(12, 30))
    assert (report.fires, report.unaccounted_count, report.duplicated_count) == (5, 1, 1)
    (missing,) = report.unaccounted
    assert (missing.job_id, missing.job_key, missing.nominal_at, missing.run_id, missing.rows
            ) == (job_id, "k", at(10), run_id(job_id, at(10)), 0)
    assert report.duplicated[0].nominal_at == at(11) and report.duplicated[0].rows == 2
    # Outside the window, or for another tenant, there is nothing to report.
    assert verify(conn, since=at(10, 30), until=at(10, 59), now=at(12, 30)).clean
    other = tenant(conn, "otherbank")
    assert verify(conn, tenant_id=other, since=at(0), now=at(12, 30)).fires == 0


def test_fires_not_yet_owed_are_pending_not_unaccounted(
        conn: psycopg.Connection[Any], t: int) -> None:
    behind = add(conn, t, at(7), key="behind", cron="0 * * * *")   # no scheduler ran
    paused = add(conn, t, at(7), key="paused", cron="0 * * * *")
    pause_job(conn, t, paused, now=at(7, 30))
    report = verify(conn, since=at(0), now=at(12, 30))
    assert (report.fires, report.pending, report.unaccounted_count) == (10, 10, 0)
    assert report.clean
    # ... until the scheduler moves a job past them: then a missing row is a loss.
    conn.execute("UPDATE jobs SET next_nominal_at = %s, next_run_at = %s WHERE id = %s",
                 (at(13), at(13), behind))
    assert verify(conn, since=at(0), now=at(12, 30)).unaccounted_count == 5


def test_jobs_with_h_fields_are_checked_on_their_own_hashed_times(
        conn: psycopg.Connection[Any], t: int) -> None:
    ids = [add(conn, t, at(0), key=f"h{i}", cron="H H * * *") for i in range(20)]
    drain(conn, at(0, day=1))
    report = assert_clean(conn, at(0, day=1))
    assert report.fires == 20
    minutes = {r[0] for i in ids for r in rows(conn, i)}
    assert len(minutes) > 5                     # spread over the day, each checked as its own
    conn.execute("DELETE FROM runs WHERE job_id = %s", (ids[3],))
    (missing,) = verify(conn, since=DAY - timedelta(days=1), now=at(0, day=1)).unaccounted
    assert missing.job_id == ids[3]


def test_a_window_must_be_ordered_and_bounded(conn: psycopg.Connection[Any], t: int) -> None:
    with pytest.raises(WindowError, match="after until"):
        verify(conn, since=at(12), until=at(11), now=at(13))
    with pytest.raises(WindowError, match="at most 31 days"):
        verify(conn, since=at(0), until=at(0, day=40), now=at(0, day=41))


def test_scheduler_copies_take_turns_at_the_periodic_check(db_url: str,
                                                           conn: psycopg.Connection[Any],
                                                           t: int) -> None:
    hour = timedelta(hours=1)
    with connect(db_url) as other:
        # Another copy is checking right now (it holds the lock): this one skips its turn.
        other.execute("SELECT pg_advisory_lock(7301847220451893401)")
        assert check_if_due(conn, every=hour, window=hour) is None
        other.execute("SELECT pg_advisory_unlock(7301847220451893401)")
    report = check_if_due(conn, every=hour, window=hour)
    assert report is not None and report.clean
    assert check_if_due(conn, every=hour, window=hour) is None       # checked lately
    latest = latest_check(conn)
    assert latest is not None and (latest.unaccounted, latest.until) == (0, report.until)


def test_a_running_scheduler_records_ledger_checks(db_url: str,
                                                  conn: psycopg.Connection[Any], t: int) -> None:
    # A job that lost its fires of the last half hour (moved on without writing them).
    (now,) = conn.execute("SELECT now()").fetchone()  # type: ignore[misc]
    job_id = add(conn, t, now - timedelta(minutes=30), key="lost", cron="* * * * *")
    conn.execute("UPDATE jobs SET next_nominal_at = date_trunc('minute', now()) + interval "
                 "'2 minutes', next_run_at = date_trunc('minute', now()) + interval "
                 "'2 minutes' WHERE id = %s", (job_id,))
    scheduler = Scheduler(SchedulerConfig(url=db_url, tick_seconds=0.2, maintenance=(
        MaintenanceConfig(url=db_url, verify_every=0.2, verify_window=600))))
    thread = threading.Thread(target=scheduler.run)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while latest_check(conn) is None and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        scheduler.stop()
        thread.join(timeout=10)
    latest = latest_check(conn)
    assert latest is not None
    assert latest.until - latest.since == timedelta(seconds=600)
    assert latest.unaccounted in (10, 11)       # every minute of the ten-minute window


def test_a_job_created_inactive_owes_no_fire(conn: psycopg.Connection[Any], t: int) -> None:
    add(conn, t, at(7), key="off", cron="0 * * * *", active=False)
    drain(conn, at(12))
    report = assert_clean(conn, at(12))
    assert report.fires == 0


def test_h_jobs_whose_cron_came_back_are_counted_once(conn: psycopg.Connection[Any],
                                                      t: int) -> None:
    job_id = add(conn, t, at(0), key="h", cron="H * * * *")
    for hour, cron in ((3, "H/30 * * * *"), (6, "H * * * *")):
        drain(conn, at(hour))
        update_job(conn, t, job_id, {"cron": cron}, version=get_job(conn, t, job_id).version,
                   now=at(hour))
    drain(conn, at(9))
    report = assert_clean(conn, at(9))
    assert report.fires == len(rows(conn, job_id)) == 3 + 6 + 3


def test_the_oldest_pending_fire_is_kept_for_the_next_check(
        conn: psycopg.Connection[Any], t: int) -> None:
    # A spread of two hours: the 09:00 fire is pending until 09:00 + offset, longer than a
    # one-hour window; the periodic check reaches back to it.
    key = spread_key(at_least=3600, seconds=7200)
    add(conn, t, at(8), key="late", cron="0 9 * * *", spread={"seconds": 7200, "key": key})
    drain(conn, at(9, 30))
    report = verify(conn, since=at(8, 30), now=at(9, 30))
    assert (report.pending, report.oldest_pending) == (1, at(9))
    conn.execute("INSERT INTO ledger_checks (checked_at, since, until, fires, unaccounted, "
                 "duplicated, pending, oldest_pending, seconds) VALUES (now() - interval "
                 "'1 hour', %s, %s, 1, 0, 0, 1, now() - interval '3 hours', 0.1)",
                 (at(8, 30), at(9, 30)))
    checked = check_if_due(conn, every=timedelta(minutes=5), window=timedelta(hours=1))
    assert checked is not None
    (now,) = conn.execute("SELECT now()").fetchone()  # type: ignore[misc]
    assert now - checked.since > timedelta(hours=2, minutes=59)


def test_verify_reports_a_timetable_that_no_longer_parses_and_checks_the_rest(
        conn: psycopg.Connection[Any], t: int) -> None:
    good = add(conn, t, at(7), key="good", cron="0 * * * *")
    bad = add(conn, t, at(7), key="bad", cron="0 * * * *")
    hashed = add(conn, t, at(7), key="hashed", cron="H * * * *")
    drain(conn, at(12))
    # rows the parser once accepted and no longer does (steps wider than their field)
    conn.execute("UPDATE jobs SET cron = '*/90 * * * *' WHERE id = %s", (bad,))
    conn.execute("UPDATE jobs SET cron = 'H/90 * * * *' WHERE id = %s", (hashed,))
    report = verify(conn, since=at(8), now=at(12, 30))
    assert not report.clean
    assert report.fires == 5 and report.unaccounted_count == 0     # the good job, checked
    assert [(u.cron, u.job_ids) for u in report.unreadable] == [
        ("*/90 * * * *", (bad,)), ("H/90 * * * *", (hashed,))]
    assert all("step 90" in u.error for u in report.unreadable)
    assert report.document()["unreadable"][0] == {
        "cron": "*/90 * * * *", "tz": "UTC", "error": report.unreadable[0].error,
        "job_ids": [bad]}
    assert good not in {i for u in report.unreadable for i in u.job_ids}


def test_a_job_whose_stored_cron_no_longer_parses_can_still_be_edited_and_cancelled(
        conn: psycopg.Connection[Any], t: int) -> None:
    fixed = add(conn, t, at(7), key="fixed", cron="0 * * * *")
    dropped = add(conn, t, at(7), key="dropped", cron="0 * * * *")
    conn.execute("UPDATE jobs SET cron = '*/90 * * * *' WHERE id = ANY(%s)",
                 ([fixed, dropped],))
    drain(conn, at(9, 30))                          # both put off: their fires stay owed
    job = get_job(conn, t, fixed)
    update_job(conn, t, fixed, {"cron": "*/60 * * * *"}, version=job.version, now=at(9, 40))
    cancel_job(conn, t, dropped, now=at(9, 41))
    drain(conn, at(10, 1))
    assert [r[0] for r in rows(conn, fixed)] == [at(10)]             # the new timetable's
    report = verify(conn, since=at(7), now=at(10, 5))
    assert [(u.cron, u.job_ids) for u in report.unreadable] == [
        ("*/90 * * * *", (fixed, dropped))]
