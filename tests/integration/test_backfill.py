"""Backfill on a real PostgreSQL: the fires of a past range without a row get one, with the
run id the tick would have given them, and never a second one.

The clock is injected (``now=``) as in test_ledger.py, so the tests walk through a morning.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.job.store import (
    JobCancelled,
    JobNotFound,
    cancel_job,
    get_job,
    pause_job,
    resume_job,
    update_job,
)
from crondepot.runs.backfill import MAX_RANGE, BackfillRangeError, backfill
from crondepot.scheduler.ledger import verify
from crondepot.tenancy.audit import act_as, list_audit
from crondepot.timetable import run_id
from tests.integration.test_ledger import add, drain
from tests.support.jobs import tenant

DAY = datetime(2026, 3, 2, tzinfo=UTC)


def at(hour: int, minute: int = 0) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute)


def rows(conn: psycopg.Connection[Any], job_id: int) -> dict[datetime, tuple[Any, ...]]:
    return {r[0]: r[1:] for r in conn.execute(
        "SELECT nominal_at, run_id, status, skip_reason, due_at, attempt FROM runs "
        "WHERE job_id = %s ORDER BY nominal_at", (job_id,)).fetchall()}


def delete(conn: psycopg.Connection[Any], job_id: int, *nominals: datetime) -> None:
    conn.execute("DELETE FROM runs WHERE job_id = %s AND nominal_at = ANY(%s)",
                 (job_id, list(nominals)))


def unaccounted(conn: psycopg.Connection[Any], since: datetime, until: datetime,
                now: datetime) -> list[str]:
    report = verify(conn, since=since, until=until, now=now)
    assert not report.duplicated_count, report.document()
    return sorted(f.run_id for f in report.unaccounted)


@pytest.fixture
def t(conn: psycopg.Connection[Any]) -> int:
    return tenant(conn)


@pytest.fixture
def ten_minutely(conn: psycopg.Connection[Any], t: int) -> int:
    """A job every 10 minutes from 08:00; the scheduler wrote 08:10 .. 09:00."""
    job = add(conn, t, at(8), cron="*/10 * * * *")
    drain(conn, at(9))
    assert len(rows(conn, job)) == 6
    return job


def test_writes_exactly_the_missing_fires_with_the_ticks_run_ids(
        conn: psycopg.Connection[Any], t: int, ten_minutely: int) -> None:
    job = ten_minutely
    before = rows(conn, job)
    delete(conn, job, at(8, 20), at(8, 40))
    missing = unaccounted(conn, at(8), at(9), at(9, 5))
    assert missing == sorted([run_id(job, at(8, 20)), run_id(job, at(8, 40))])

    done = backfill(conn, t, job, since=at(8), until=at(9), now=at(9, 5))

    assert sorted(done.written) == missing
    assert done.fires == 5 and done.had_row == 3 and not done.requeued
    assert done.next_since is None and done.pending_since is None
    after = rows(conn, job)
    assert set(after) == set(before)
    for nominal in (at(8, 20), at(8, 40)):
        rid, status, reason, due_at, attempt = after[nominal]
        assert (rid, status, reason, due_at, attempt) == (
            before[nominal][0], "queued", None, at(9, 5), 0)
    for nominal in (at(8, 10), at(8, 30), at(8, 50), at(9)):
        assert after[nominal] == before[nominal]      # untouched
    assert unaccounted(conn, at(8), at(9), at(9, 5)) == []

    again = backfill(conn, t, job, since=at(8), until=at(9), now=at(9, 6))
    assert again.written == [] and again.had_row == 5
    assert rows(conn, job) == after


def test_a_fire_with_a_row_in_any_state_is_left_as_it_is(
        conn: psycopg.Connection[Any], t: int, ten_minutely: int) -> None:
    job = ten_minutely
    conn.execute("UPDATE runs SET status = 'succeeded', finished_at = %s WHERE run_id = %s",
                 (at(8, 11), run_id(job, at(8, 10))))
    conn.execute("UPDATE runs SET status = 'dead', finished_at = %s, attempt = 3 "
                 "WHERE run_id = %s", (at(8, 21), run_id(job, at(8, 20))))
    before = rows(conn, job)
    done = backfill(conn, t, job, since=at(8), until=at(9, 1), include_skipped=True,
                    now=at(9, 5))
    assert done.written == [] and done.requeued == [] and done.had_row == 6
    assert rows(conn, job) == before


def test_include_skipped_queues_again_only_the_skipped_fires(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = add(conn, t, at(8), cron="*/10 * * * *")
    drain(conn, at(8, 15))
    pause_job(conn, t, job, now=at(8, 15))
    resume_job(conn, t, job, now=at(8, 45))
    drain(conn, at(9))
    paused = [at(8, 20), at(8, 30), at(8, 40)]
    before = rows(conn, job)
    assert [n for n, r in before.items() if r[1] == "skipped"] == paused
    conn.execute("UPDATE runs SET status = 'succeeded' WHERE run_id = %s",
                 (run_id(job, at(8, 50)),))

    plain = backfill(conn, t, job, since=at(8), until=at(9, 1), now=at(9, 5))
    assert plain.written == [] and plain.requeued == [] and plain.had_row == 6

    done = backfill(conn, t, job, since=at(8), until=at(9, 1), include_skipped=True,
                    now=at(9, 5))
    assert sorted(done.requeued) == [run_id(job, n) for n in paused]
    assert done.written == [] and done.had_row == 3
    after = rows(conn, job)
    for n in paused:
        rid, status, reason, _, attempt = after[n]
        assert (rid, status, reason, attempt) == (run_id(job, n), "queued", None, 0)
    for n in set(before) - set(paused):
        assert after[n][1:3] == (before[n][1:3] if n != at(8, 50)
                                  else ("succeeded", None))
    assert len(after) == len(before)
    assert unaccounted(conn, at(8), at(9, 1), at(9, 5)) == []
    # nothing is skipped any more: a second call queues nothing
    assert backfill(conn, t, job, since=at(8), until=at(9, 1), include_skipped=True,
                    now=at(9, 6)).requeued == []


def test_a_dry_run_reports_and_writes_nothing(
        conn: psycopg.Connection[Any], t: int, ten_minutely: int) -> None:
    job = ten_minutely
    delete(conn, job, at(8, 30))
    conn.execute("UPDATE runs SET status = 'skipped', skip_reason = 'paused' "
                 "WHERE run_id = %s", (run_id(job, at(8, 50)),))
    before = rows(conn, job)
    done = backfill(conn, t, job, since=at(8), until=at(9, 1), include_skipped=True,
                    dry_run=True, now=at(9, 5))
    assert done.written == [run_id(job, at(8, 30))]
    assert done.requeued == [run_id(job, at(8, 50))]
    assert done.document()["dry_run"] is True
    assert rows(conn, job) == before
    assert unaccounted(conn, at(8), at(9), at(9, 5)) == [run_id(job, at(8, 30))]


def test_an_edited_cron_is_respected(conn: psycopg.Connection[Any], t: int) -> None:
    job = add(conn, t, at(0), cron="0 * * * *")
    drain(conn, at(3, 5))
    version = get_job(conn, t, job).version
    update_job(conn, t, job, {"cron": "30 * * * *"}, version=version, now=at(3, 10))
    drain(conn, at(6, 5))
    conn.execute("DELETE FROM runs WHERE job_id = %s", (job,))
    missing = unaccounted(conn, at(0), at(6), at(6, 5))
    # 01:00 .. 03:00 on the old timetable, 03:30 .. 05:30 on the new one
    expected = ([run_id(job, at(h)) for h in (1, 2, 3)]
                + [run_id(job, at(h, 30)) for h in (3, 4, 5)])
    assert missing == sorted(expected)

    done = backfill(conn, t, job, since=at(0), until=at(6), now=at(6, 5))
    assert sorted(done.written) == missing
    assert unaccounted(conn, at(0), at(6), at(6, 5)) == []
    assert sorted(rows(conn, job)) == sorted([at(h) for h in (1, 2, 3)]
                                             + [at(h, 30) for h in (3, 4, 5)])


@pytest.mark.parametrize(("first", "then", "tz"), [
    ("H * * * *", "H/20 * * * *", "UTC"),                    # H hashes on the job's key
    ("*/45 * * * *", "15 */2 * * *", "Asia/Kolkata"),
    ("0 * * * *", "30 * * * *", "America/St_Johns"),         # a half-hour offset zone
])
def test_the_fires_written_are_those_verify_finds_missing(
        conn: psycopg.Connection[Any], t: int, first: str, then: str, tz: str) -> None:
    job = add(conn, t, at(0), cron=first, tz=tz, key="k-48213")
    drain(conn, at(2, 50))
    version = get_job(conn, t, job).version
    update_job(conn, t, job, {"cron": then}, version=version, now=at(2, 55))
    drain(conn, at(7))
    ticked = rows(conn, job)
    conn.execute("DELETE FROM runs WHERE job_id = %s", (job,))
    missing = unaccounted(conn, at(0), at(6, 59), at(7))
    assert len(missing) >= 6

    done = backfill(conn, t, job, since=at(0), until=at(7), now=at(7))
    assert sorted(done.written) == missing
    assert sorted(r[0] for r in rows(conn, job).values()) == sorted(
        r[0] for n, r in ticked.items() if n < at(7))    # the run ids the tick wrote
    assert unaccounted(conn, at(0), at(6, 59), at(7)) == []


def test_fires_past_their_misfire_deadline_are_written_skipped(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = add(conn, t, at(8), cron="*/10 * * * *",
              misfire={"policy": "skip_after", "seconds": 600})
    drain(conn, at(8, 10))
    drain(conn, at(8, 20))
    drain(conn, at(8, 30))
    delete(conn, job, at(8, 10), at(8, 30))
    done = backfill(conn, t, job, since=at(8), until=at(8, 31), now=at(8, 35))
    assert done.written == [run_id(job, at(8, 30))]          # deadline 08:40
    assert done.written_skipped == [run_id(job, at(8, 10))]  # deadline 08:20: passed
    after = rows(conn, job)
    assert after[at(8, 10)][1:3] == ("skipped", "misfire_deadline")
    assert after[at(8, 30)][1:3] == ("queued", None)
    deadline = conn.execute("SELECT deadline_at FROM runs WHERE run_id = %s",
                            (run_id(job, at(8, 30)),)).fetchone()
    assert deadline == (at(8, 40),)
    assert unaccounted(conn, at(8), at(8, 31), at(8, 35)) == []
    # and a skipped fire past its deadline is not queued again
    again = backfill(conn, t, job, since=at(8), until=at(8, 31), include_skipped=True,
                     now=at(8, 35))
    assert again.requeued == [] and again.held_past_deadline == [run_id(job, at(8, 10))]


def test_fires_from_next_nominal_at_on_are_left_to_the_scheduler(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = add(conn, t, at(8), cron="*/10 * * * *")
    drain(conn, at(8, 25))
    pause_job(conn, t, job, now=at(8, 25))
    done = backfill(conn, t, job, since=at(8), now=at(9))       # until: now
    assert done.until == at(9)
    assert done.written == [] and done.fires == 2 and done.pending_since == at(8, 30)
    assert sorted(rows(conn, job)) == [at(8, 10), at(8, 20)]


def test_large_ranges_go_in_bounded_batches(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = add(conn, t, at(0), cron="* * * * *")
    drain(conn, at(1))
    conn.execute("DELETE FROM runs WHERE job_id = %s", (job,))
    since, written, calls = at(0), 0, 0
    while True:
        done = backfill(conn, t, job, since=since, until=at(1), max_fires=25, now=at(1))
        calls += 1
        assert done.fires <= 25
        written += len(done.written)
        if done.next_since is None:
            break
        since = done.next_since
    assert (written, calls) == (59, 3)
    assert unaccounted(conn, at(0), at(0, 59), at(1)) == []   # verify: until included


def test_racing_the_tick_never_gives_a_fire_two_rows(
        conn: psycopg.Connection[Any], db_url: str, t: int) -> None:
    """Fires 08:01 .. 08:30 lost (rows deleted), 08:31 .. 09:00 due: the tick and backfill
    run at once, on every job."""
    jobs = [add(conn, t, at(8), cron="* * * * *", key=f"race-{i}") for i in range(20)]
    drain(conn, at(8, 30))
    conn.execute("DELETE FROM runs")
    now = at(9)
    errors: list[BaseException] = []
    written: list[int] = []
    start = threading.Barrier(2)

    def scheduler() -> None:
        try:
            with connect(db_url) as c:
                start.wait()
                drain(c, now)
        except BaseException as exc:   # pragma: no cover - reported below
            errors.append(exc)

    def backfiller() -> None:
        try:
            with connect(db_url) as c:
                start.wait()
                for job in jobs:
                    done = backfill(c, t, job, since=at(8), until=now, now=now)
                    written.append(len(done.written))
        except BaseException as exc:   # pragma: no cover
            errors.append(exc)

    threads = [threading.Thread(target=scheduler), threading.Thread(target=backfiller)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors
    assert sum(written) >= 20 * 30       # the lost fires at least
    drain(conn, now)     # jobs the tick skipped while a backfill held them
    for job in jobs:
        backfill(conn, t, job, since=at(8), until=now, now=now)
    per_fire = conn.execute("SELECT job_id, nominal_at, count(*) FROM runs "
                            "GROUP BY 1, 2 HAVING count(*) > 1").fetchall()
    assert per_fire == []
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == (20 * 60,)
    report = verify(conn, since=at(8), until=now, now=now)
    assert report.clean and report.pending == 0, report.document()


def test_bad_input_changes_nothing(conn: psycopg.Connection[Any], t: int,
                                   ten_minutely: int) -> None:
    job = ten_minutely
    delete(conn, job, at(8, 20))
    before = conn.execute("SELECT count(*) FROM runs").fetchone()
    other = tenant(conn, "other")
    cancelled = add(conn, t, at(8), cron="*/10 * * * *")
    cancel_job(conn, t, cancelled, now=at(8, 5))
    cases: list[tuple[type[Exception], dict[str, Any], str]] = [
        (BackfillRangeError, {"since": at(9), "until": at(8)}, "must be before"),
        (BackfillRangeError, {"since": at(9), "until": at(9)}, "must be before"),
        (BackfillRangeError, {"since": at(8), "until": at(10)}, "after now"),
        (BackfillRangeError, {"since": at(9) - MAX_RANGE - timedelta(seconds=1),
                              "until": at(9)}, "at most 31 days"),
        (BackfillRangeError, {"since": at(9) - timedelta(days=30, seconds=1),
                              "until": at(9) - timedelta(days=29)}, "pruned"),
        (BackfillRangeError, {"since": at(8).replace(tzinfo=None), "until": at(9)},
         "UTC offset"),
    ]
    for error, window, says in cases:
        with pytest.raises(error, match=says):
            backfill(conn, t, job, now=at(9, 5), **window)
    with pytest.raises(JobNotFound):
        backfill(conn, t, 10**12, since=at(8), until=at(9), now=at(9, 5))
    with pytest.raises(JobNotFound):
        backfill(conn, other, job, since=at(8), until=at(9), now=at(9, 5))
    with pytest.raises(JobCancelled):
        backfill(conn, t, cancelled, since=at(8), until=at(9), now=at(9, 5))
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == before


def test_a_backfill_is_audited_once(conn: psycopg.Connection[Any], t: int,
                                    ten_minutely: int) -> None:
    job = ten_minutely
    delete(conn, job, at(8, 20), at(8, 30))
    act_as(conn, "cli:test@host")
    backfill(conn, t, job, since=at(8), until=at(9), now=at(9, 5))
    entries = [e for e in list_audit(conn, t) if e.actor == "cli:test@host"]
    # The summary, and the runs' insert as one entry (the runs trigger's), not one per run.
    assert [(e.action, e.subject) for e in entries] == [("job.backfill", str(job)),
                                                         ("run.bulk_create", str(job))]
    assert entries[0].after is not None and entries[0].after["written"] == 2
    assert entries[1].after == {"count": 2, "jobs": [job]}
