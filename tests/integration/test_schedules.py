"""Schedules beyond cron against a real database: an at job fires once and completes, a
max_runs job ends after that many fires (skipped ones counted), a window bounds the fires,
and `crondepot verify` finds every fire of them accounted for, none after their end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import takewhile
from typing import Any

import psycopg
import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.spec import JobSpec
from crondepot.job.store import (
    JobCancelled,
    create_job,
    create_jobs,
    get_job,
    pause_job,
    resume_job,
    trigger_job,
    update_job,
)
from crondepot.scheduler.ledger import verify
from crondepot.scheduler.tick import tick
from crondepot.timetable import run_id

TARGET = {"type": "python", "handler": "test.noop"}


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def add(conn: psycopg.Connection[Any], tenant_id: int, created: datetime, **doc: Any) -> int:
    doc.setdefault("tz", "UTC")
    (job,) = create_jobs(conn, tenant_id, [JobSpec.from_document({"target": TARGET, **doc})],
                         now=created)
    return job.id


def runs(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT run_id, nominal_at, status, skip_reason FROM runs "
                        "WHERE job_id = %s ORDER BY nominal_at", (job_id,)).fetchall()


def test_an_at_job_fires_once_then_ends_completed_and_stays_readable(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    at = utc(2026, 12, 5, 3, 30)          # 09:00 in Asia/Kolkata
    job_id = add(conn, tenant_id, utc(2026, 12, 2), at="2026-12-05T09:00:00+05:30",
                 tz="Asia/Kolkata")
    job = get_job(conn, tenant_id, job_id)
    assert job.next_nominal_at == at and job.active and job.ended_reason is None
    assert tick(conn, batch=10, now=at - timedelta(seconds=1)).claimed == 0
    result = tick(conn, batch=10, now=at + timedelta(seconds=5))
    assert result.claimed == 1 and [r.run_id for r in result.queued] == [run_id(job_id, at)]
    job = get_job(conn, tenant_id, job_id)
    assert (job.active, job.ended_reason, job.ended_at, job.fire_count) == (
        False, "completed", at, 1)
    assert job.next_run_at is None and job.spec.at == at
    assert tick(conn, batch=10, now=at + timedelta(days=30)).claimed == 0
    assert [r[:3] for r in runs(conn, job_id)] == [(run_id(job_id, at), at, "queued")]
    with pytest.raises(JobCancelled, match="ended \\(completed\\)"):
        trigger_job(conn, tenant_id, job_id)
    report = verify(conn, since=at - timedelta(days=1), until=at + timedelta(days=1),
                    now=at + timedelta(days=1))
    assert report.clean and report.fires == 1


def test_an_emi_with_l_and_max_runs_ends_after_its_last_instalment(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    # Month-end EMI at 09:00 IST, three instalments; an outage over the first two with
    # catch-up latest writes the January one skipped: it counts towards max_runs.
    job_id = add(conn, tenant_id, utc(2026, 1, 10), cron="0 9 L * *", tz="Asia/Kolkata",
                 max_runs=3, catchup="latest")
    jan, feb, mar = utc(2026, 1, 31, 3, 30), utc(2026, 2, 28, 3, 30), utc(2026, 3, 31, 3, 30)
    assert get_job(conn, tenant_id, job_id).next_nominal_at == jan
    tick(conn, batch=10, now=utc(2026, 3, 1))
    assert [(r[1], r[2], r[3]) for r in runs(conn, job_id)] == [
        (jan, "skipped", "catchup_latest"), (feb, "queued", None)]
    assert get_job(conn, tenant_id, job_id).fire_count == 2
    tick(conn, batch=10, now=utc(2026, 4, 1))
    job = get_job(conn, tenant_id, job_id)
    assert (job.active, job.ended_reason, job.ended_at, job.fire_count) == (
        False, "max_runs", mar, 3)
    assert tick(conn, batch=10, now=utc(2026, 6, 1)).claimed == 0
    assert [r[1] for r in runs(conn, job_id)] == [jan, feb, mar]
    # April's and May's month-ends are after the job's end: not owed, not unaccounted.
    report = verify(conn, since=utc(2026, 3, 20), until=utc(2026, 4, 20), now=utc(2026, 6, 1))
    assert report.clean and report.fires == 1
    report = verify(conn, since=utc(2026, 4, 20), until=utc(2026, 5, 20), now=utc(2026, 6, 1))
    assert report.clean and report.fires == 0


def test_a_window_bounds_the_fires_and_ends_the_job_at_end_at(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    job_id = add(conn, tenant_id, utc(2026, 1, 1), cron="0 * * * *",
                 start_at="2026-01-01T10:30:00Z", end_at="2026-01-01T13:00:00Z")
    assert get_job(conn, tenant_id, job_id).next_nominal_at == utc(2026, 1, 1, 11)
    tick(conn, batch=10, now=utc(2026, 1, 1, 14, 15))
    assert [r[1].hour for r in runs(conn, job_id)] == [11, 12, 13]
    job = get_job(conn, tenant_id, job_id)
    assert (job.active, job.ended_reason, job.ended_at) == (False, "end_at", utc(2026, 1, 1, 13))
    report = verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 20),
                    now=utc(2026, 1, 1, 20))
    assert report.clean and report.fires == 3


def test_a_pause_past_an_at_settles_its_fire_and_ends_the_job(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    at = utc(2026, 5, 1, 9)
    job_id = add(conn, tenant_id, utc(2026, 5, 1), at="2026-05-01T09:00:00Z")
    conn.execute("SELECT set_config('crondepot.actor', 'token:ops', false)")   # as the API
    job = pause_job(conn, tenant_id, job_id, now=at + timedelta(minutes=5))
    assert (job.active, job.ended_reason, job.fire_count) == (False, "completed", 1)
    actions = [row[0] for row in conn.execute(
        "SELECT action FROM audit_log WHERE subject = %s ORDER BY id", (str(job_id),))]
    assert actions == ["job.create", "job.pause", "job.end"]   # create: by role:<user>
    assert [(r[1], r[2]) for r in runs(conn, job_id)] == [(at, "queued")]
    with pytest.raises(JobCancelled):
        resume_job(conn, tenant_id, job_id)


def test_resuming_after_the_window_closed_records_the_paused_fires_and_ends(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    job_id = add(conn, tenant_id, utc(2026, 1, 1), cron="0 * * * *",
                 end_at="2026-01-01T03:00:00Z")
    pause_job(conn, tenant_id, job_id, now=utc(2026, 1, 1, 0, 30))
    job = resume_job(conn, tenant_id, job_id, now=utc(2026, 1, 1, 5))
    assert [(r[1].hour, r[3]) for r in runs(conn, job_id)] == [(1, "paused"), (2, "paused"),
                                                               (3, "paused")]
    assert (job.active, job.ended_reason, job.fire_count) == (False, "end_at", 3)
    report = verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 6), now=utc(2026, 1, 2))
    assert report.clean and report.fires == 3


def test_an_at_or_end_at_already_passed_is_refused_and_nothing_is_written(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    for fields, field in (({"at": "2020-01-01T00:00:00Z"}, "at"),
                          ({"cron": "0 9 * * *", "end_at": "2020-01-01T00:00:00Z"}, "end_at")):
        spec = JobSpec.from_document({"tz": "UTC", "target": TARGET, **fields})
        with pytest.raises(InvalidJob, match="no fire is left after now") as refused:
            create_job(conn, tenant_id, spec)
        assert refused.value.field == field
    row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None and row[0] == 0


def test_a_patch_turns_a_cron_job_into_an_at_job_and_back(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    spec = JobSpec.from_document({"tz": "UTC", "target": TARGET, "cron": "0 9 * * *"})
    job, _ = create_job(conn, tenant_id, spec)
    at = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    with pytest.raises(InvalidJob, match="not both"):
        update_job(conn, tenant_id, job.id, {"at": at.isoformat()}, version=job.version)
    job = update_job(conn, tenant_id, job.id, {"cron": None, "at": at.isoformat()},
                     version=job.version)
    assert job.spec.cron is None and job.spec.at == at and job.next_nominal_at == at
    job = update_job(conn, tenant_id, job.id, {"at": None, "cron": "0 9 * * *",
                                               "max_runs": 2}, version=job.version)
    assert job.spec.cron == "0 9 * * *" and job.spec.max_runs == 2 and job.active


def test_a_patch_may_not_leave_the_job_without_a_fire(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    spec = JobSpec.from_document({"tz": "UTC", "target": TARGET, "cron": "* * * * *"})
    job, _ = create_job(conn, tenant_id, spec)
    before = conn.execute("SELECT version, end_at FROM jobs").fetchone()
    with pytest.raises(InvalidJob) as refused:
        update_job(conn, tenant_id, job.id, {"end_at": "2020-01-01T00:00:00Z"},
                   version=job.version)
    assert refused.value.field == "end_at"
    assert conn.execute("SELECT version, end_at FROM jobs").fetchone() == before


def test_an_import_batch_large_enough_for_copy_stores_the_schedule_fields(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    from crondepot.job.store import COPY_AT_LEAST, import_batch

    at = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    specs = [JobSpec.from_document({"key": f"bill:{n}", "at": at.isoformat(), "tz": "UTC",
                                    "target": TARGET}) for n in range(COPY_AT_LEAST)]
    specs.append(JobSpec.from_document({"key": "emi", "cron": "0 9 L * *", "tz": "UTC",
                                        "target": TARGET, "max_runs": 12,
                                        "start_at": "2030-01-01T00:00:00Z",
                                        "end_at": "2031-01-01T00:00:00Z"}))
    specs.append(JobSpec.from_document({"key": "late", "at": "2020-01-01T00:00:00Z",
                                        "tz": "UTC", "target": TARGET}))
    results = import_batch(conn, tenant_id, specs)
    assert isinstance(results[-1], InvalidJob) and results[-1].field == "at"
    assert all(not isinstance(r, InvalidJob) for r in results[:-1])
    rows = conn.execute("SELECT count(*) FILTER (WHERE at = %s AND cron IS NULL), "
                        "count(*) FILTER (WHERE max_runs = 12 AND start_at IS NOT NULL "
                        "AND end_at IS NOT NULL AND next_nominal_at = '2030-01-31T09:00Z') "
                        "FROM jobs", (at,)).fetchone()
    assert rows == (COPY_AT_LEAST, 1)


def test_verify_flags_a_lost_fire_inside_the_window_and_backfill_writes_only_that(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    from crondepot.runs.backfill import backfill

    job_id = add(conn, tenant_id, utc(2026, 1, 1), cron="0 * * * *",
                 start_at="2026-01-01T01:30:00Z", end_at="2026-01-01T09:00:00Z", max_runs=5)
    tick(conn, batch=10, now=utc(2026, 1, 1, 4, 15))
    assert [r[1].hour for r in runs(conn, job_id)] == [2, 3, 4]
    conn.execute("DELETE FROM runs WHERE run_id = %s", (run_id(job_id, utc(2026, 1, 1, 3)),))
    report = verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 4, 15),
                    now=utc(2026, 1, 1, 4, 15))
    assert report.fires == 3 and [f.nominal_at for f in report.unaccounted] == [
        utc(2026, 1, 1, 3)]
    done = backfill(conn, tenant_id, job_id, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 4, 15),
                    now=utc(2026, 1, 1, 4, 15))
    assert done.written == [run_id(job_id, utc(2026, 1, 1, 3))]   # not 00:00 or 01:00
    assert verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 4, 15),
                  now=utc(2026, 1, 1, 4, 15)).clean
    # max_runs 5: the 05:00 and 06:00 fires end it; 07:00-09:00 are inside the window but
    # after its end, owed nothing.
    tick(conn, batch=10, now=utc(2026, 1, 1, 10))
    job = get_job(conn, tenant_id, job_id)
    assert (job.ended_reason, job.ended_at, job.fire_count) == ("max_runs", utc(2026, 1, 1, 6), 5)
    report = verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 12), now=utc(2026, 1, 2))
    assert report.clean and report.fires == 5
    conn.execute("DELETE FROM runs WHERE run_id = %s", (run_id(job_id, utc(2026, 1, 1, 6)),))
    report = verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 12), now=utc(2026, 1, 2))
    assert [f.nominal_at for f in report.unaccounted] == [utc(2026, 1, 1, 6)]


def test_verify_flags_an_at_job_whose_one_run_was_lost(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    at = utc(2026, 7, 1, 12)
    job_id = add(conn, tenant_id, utc(2026, 6, 1), at="2026-07-01T12:00:00Z")
    tick(conn, batch=10, now=at + timedelta(minutes=1))
    conn.execute("DELETE FROM runs WHERE job_id = %s", (job_id,))
    report = verify(conn, since=at - timedelta(hours=1), until=at + timedelta(hours=1),
                    now=at + timedelta(hours=1))
    assert [(f.job_id, f.nominal_at, f.rows) for f in report.unaccounted] == [(job_id, at, 0)]


@pytest.mark.parametrize("cron", ["0 * * * *", "H * * * *"])
def test_widening_the_window_owes_no_fire_the_old_window_excluded(
        conn: psycopg.Connection[Any], tenant_id: int, cron: str) -> None:
    # The reviewer's case: start_at 10:30 kept 01:00-05:00 out when they passed; dropping it
    # at 05:30 makes the fires after 05:30 the job's, not those before.
    from crondepot.runs.backfill import backfill

    job_id = add(conn, tenant_id, utc(2026, 1, 1), cron=cron, start_at="2026-01-01T10:30:00Z")
    tick(conn, batch=10, now=utc(2026, 1, 1, 5, 30))
    assert runs(conn, job_id) == []
    job = get_job(conn, tenant_id, job_id)
    job = update_job(conn, tenant_id, job_id, {"start_at": None}, version=job.version,
                     now=utc(2026, 1, 1, 5, 30))
    end = utc(2026, 1, 1, 8, 5)
    tick(conn, batch=10, now=end)
    owed = [f.at for f in takewhile(lambda f: f.at <= end,
                                    job.spec.timetable(job_id).fires_after(utc(2026, 1, 1, 5, 30)))]
    assert len(owed) >= 2 and [r[1] for r in runs(conn, job_id)] == owed
    report = verify(conn, since=utc(2026, 1, 1), until=end, now=end)
    assert report.clean and report.fires == len(owed)
    done = backfill(conn, tenant_id, job_id, since=utc(2026, 1, 1), until=end, now=end)
    assert (done.fires, done.written, done.written_skipped) == (len(owed), [], [])
    assert len(runs(conn, job_id)) == len(owed)
    # A fire lost after the change is still found, and backfill writes only that one.
    conn.execute("DELETE FROM runs WHERE run_id = %s", (run_id(job_id, owed[1]),))
    report = verify(conn, since=utc(2026, 1, 1), until=end, now=end)
    assert [f.nominal_at for f in report.unaccounted] == [owed[1]]
    done = backfill(conn, tenant_id, job_id, since=utc(2026, 1, 1), until=end, now=end)
    assert done.written + done.written_skipped == [run_id(job_id, owed[1])]
    assert verify(conn, since=utc(2026, 1, 1), until=end, now=end).clean


def test_narrowing_the_window_keeps_the_fires_owed_before_it_and_owes_none_after(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    from crondepot.runs.backfill import backfill

    job_id = add(conn, tenant_id, utc(2026, 1, 1), cron="0 * * * *",
                 end_at="2026-01-01T20:00:00Z")
    tick(conn, batch=10, now=utc(2026, 1, 1, 5, 5))
    job = get_job(conn, tenant_id, job_id)
    # end_at moved earlier, and start_at moved past the fires already written.
    update_job(conn, tenant_id, job_id,
               {"start_at": "2026-01-01T05:40:00Z", "end_at": "2026-01-01T07:00:00Z"},
               version=job.version, now=utc(2026, 1, 1, 5, 30))
    tick(conn, batch=10, now=utc(2026, 1, 1, 6, 5))
    # A fire lost before the change is still the job's (owed under the window then in
    # force): found, and backfilled; nothing else is written.
    conn.execute("DELETE FROM runs WHERE run_id = %s", (run_id(job_id, utc(2026, 1, 1, 3)),))
    report = verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 6, 5),
                    now=utc(2026, 1, 1, 6, 5))
    assert report.fires == 6 and [f.nominal_at for f in report.unaccounted] == [
        utc(2026, 1, 1, 3)]
    done = backfill(conn, tenant_id, job_id, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 6, 5),
                    now=utc(2026, 1, 1, 6, 5))
    assert done.written + done.written_skipped == [run_id(job_id, utc(2026, 1, 1, 3))]
    tick(conn, batch=10, now=utc(2026, 1, 1, 12))
    assert [r[1].hour for r in runs(conn, job_id)] == [1, 2, 3, 4, 5, 6, 7]
    job = get_job(conn, tenant_id, job_id)
    assert (job.ended_reason, job.ended_at) == ("end_at", utc(2026, 1, 1, 7))
    # 01:00-05:00 were owed under the window in force then; 08:00-20:00 are not owed now.
    report = verify(conn, since=utc(2026, 1, 1), until=utc(2026, 1, 1, 23),
                    now=utc(2026, 1, 1, 23))
    assert report.clean and report.fires == 7
