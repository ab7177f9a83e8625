"""pause_after_failures (maintenance/pause_on_failure.py): a job whose latest fires failed
that many times in a row is paused by the maintenance leader, with a note, as the actor
crondepot:pause_after_failures; its resume starts the count again (issue 31, item 9)."""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.job.store import get_job, pause_job, resume_job
from crondepot.maintenance.config import MaintenanceConfig
from crondepot.maintenance.pause_on_failure import ACTOR, pause_failing_jobs
from crondepot.runtime import metrics
from tests.support.jobs import add_job, tenant


def _failing(conn: psycopg.Connection[Any], job_id: int, fires: int) -> None:
    conn.execute("UPDATE jobs SET failing_fires = %s WHERE id = %s", (fires, job_id))


def _count(conn: psycopg.Connection[Any], job_id: int) -> int:
    row = conn.execute("SELECT failing_fires FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])


def _paused_total() -> float:
    return metrics.REGISTRY.get_sample_value(
        "crondepot_jobs_paused_for_failures_total") or 0.0


def test_a_job_that_reached_its_threshold_pauses_itself_and_no_other(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    t = tenant(conn)
    reached = add_job(conn, t, key="reached", cron="0 9 * * *", pause_after_failures=2)
    below = add_job(conn, t, key="below", cron="0 9 * * *", pause_after_failures=3)
    unset = add_job(conn, t, key="unset", cron="0 9 * * *")
    manual = add_job(conn, t, key="manual", cron="0 9 * * *", pause_after_failures=1)
    for job_id, fires in ((reached, 2), (below, 2), (unset, 50), (manual, 4)):
        _failing(conn, job_id, fires)
    pause_job(conn, t, manual, note="by hand")
    before = _paused_total()

    assert pause_failing_jobs(conn, MaintenanceConfig(url=db_url, name="test")) == 1

    job = get_job(conn, t, reached)
    assert job.paused and job.pause is not None
    assert job.pause.by == ACTOR
    assert job.pause.note == "paused after 2 failed fires in a row (pause_after_failures)"
    assert not get_job(conn, t, below).paused and not get_job(conn, t, unset).paused
    kept = get_job(conn, t, manual).pause
    assert kept is not None and kept.note == "by hand"        # a paused job is left alone
    assert _paused_total() == before + 1
    actor = conn.execute("SELECT actor FROM audit_log WHERE subject = %s "
                         "ORDER BY id DESC LIMIT 1", (str(reached),)).fetchone()
    assert actor == (ACTOR,)
    # Nothing more to do: a second turn pauses nothing.
    assert pause_failing_jobs(conn, MaintenanceConfig(url=db_url, name="test")) == 0


def test_the_resume_of_a_job_that_paused_itself_starts_its_count_again(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    t = tenant(conn)
    auto = add_job(conn, t, key="auto", cron="0 9 * * *", pause_after_failures=2)
    manual = add_job(conn, t, key="manual", cron="0 9 * * *", pause_after_failures=5)
    _failing(conn, auto, 2)
    _failing(conn, manual, 3)
    pause_failing_jobs(conn, MaintenanceConfig(url=db_url, name="test"))
    conn.execute("SELECT set_config('crondepot.actor', '', false)")   # the test's own session
    pause_job(conn, t, manual)
    resume_job(conn, t, auto)
    resume_job(conn, t, manual)
    assert (_count(conn, auto), _count(conn, manual)) == (0, 3)
    assert get_job(conn, t, auto).pause is None
    # Resumed, it does not pause again until it fails twice more.
    assert pause_failing_jobs(conn, MaintenanceConfig(url=db_url, name="test")) == 0


def test_a_bulk_resume_starts_the_count_again_as_a_single_resume_does(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    from crondepot.job import bulk
    from crondepot.job.bulk import BulkFilter

    t = tenant(conn)
    auto = add_job(conn, t, key="auto:1", cron="0 9 * * *", pause_after_failures=2)
    manual = add_job(conn, t, key="auto:2", cron="0 9 * * *", pause_after_failures=5)
    _failing(conn, auto, 2)
    _failing(conn, manual, 3)
    pause_failing_jobs(conn, MaintenanceConfig(url=db_url, name="test"))
    conn.execute("SELECT set_config('crondepot.actor', '', false)")
    pause_job(conn, t, manual)
    assert bulk.apply(conn, t, "resume", BulkFilter.checked(key_prefix="auto:")) == 2
    assert (_count(conn, auto), _count(conn, manual)) == (0, 3)
    assert pause_failing_jobs(conn, MaintenanceConfig(url=db_url, name="test")) == 0
