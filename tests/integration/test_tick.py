"""The tick against a real database: one transaction, set operations, exact counts."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.scheduler.tick import UNREADABLE_RETRY, tick
from crondepot.timetable import run_id
from tests.support.jobs import add_job, bulk_due_jobs, counts


def _set_next(conn: psycopg.Connection[Any], job_id: int, nominal: datetime,
              offset: timedelta = timedelta(0)) -> None:
    conn.execute("UPDATE jobs SET next_nominal_at = %s, next_run_at = %s WHERE id = %s",
                 (nominal, nominal + offset, job_id))


def _runs(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT run_id, status, skip_reason, nominal_at, due_at FROM runs "
                        "WHERE job_id = %s ORDER BY nominal_at", (job_id,)).fetchall()


def test_tick_writes_one_run_per_due_job_and_advances_them(conn: psycopg.Connection[Any]) -> None:
    bulk_due_jobs(conn, 500, due_in_seconds=-5)
    result = tick(conn, batch=1000)
    assert (result.claimed, len(result.queued), result.inserted, result.full) == (500, 500, 500,
                                                                                  False)
    assert counts(conn) == {"runs": 500, "distinct_runs": 500, "jobs_with_runs": 500,
                            "still_due": 0}
    assert tick(conn, batch=1000).claimed == 0


def test_full_batches_report_more_to_do(conn: psycopg.Connection[Any]) -> None:
    bulk_due_jobs(conn, 250, due_in_seconds=-5)
    assert tick(conn, batch=100).full
    assert tick(conn, batch=100).full
    last = tick(conn, batch=100)
    assert last.claimed == 50 and not last.full


def test_outage_backlog_is_written_in_one_pass(conn: psycopg.Connection[Any],
                                               tenant_id: int) -> None:
    all_id = add_job(conn, tenant_id, cron="* * * * *", key="all")
    latest_id = add_job(conn, tenant_id, cron="* * * * *", key="latest", catchup="latest")
    now = datetime(2026, 10, 5, 9, 47, 30, tzinfo=UTC)
    for job_id in (all_id, latest_id):
        _set_next(conn, job_id, now.replace(second=0) - timedelta(minutes=49))
    result = tick(conn, batch=100, now=now)
    assert result.claimed == 2
    runs_all = _runs(conn, all_id)
    assert len(runs_all) == 50 and {r[1] for r in runs_all} == {"queued"}
    runs_latest = _runs(conn, latest_id)
    assert [r[1] for r in runs_latest].count("queued") == 1
    assert [r[2] for r in runs_latest].count("catchup_latest") == 49
    assert runs_latest[-1][1] == "queued"


def test_paused_and_cancelled_jobs_are_not_claimed(conn: psycopg.Connection[Any]) -> None:
    bulk_due_jobs(conn, 3, due_in_seconds=-5)
    conn.execute("UPDATE jobs SET paused = true WHERE key = 'k1'")
    conn.execute("UPDATE jobs SET active = false WHERE key = 'k2'")
    assert tick(conn, batch=10).claimed == 1


def test_a_repeated_tick_for_the_same_instant_writes_nothing_twice(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    job_id = add_job(conn, tenant_id, cron="0 9 * * *", key="emi")
    nine = datetime(2026, 10, 5, 9, tzinfo=UTC)
    _set_next(conn, job_id, nine)
    first = tick(conn, batch=10, now=nine + timedelta(seconds=1))
    _set_next(conn, job_id, nine)       # as if the advance had been lost
    second = tick(conn, batch=10, now=nine + timedelta(seconds=2))
    assert (first.inserted, second.inserted) == (1, 0)
    assert len(_runs(conn, job_id)) == 1


def test_spread_job_gets_its_hash_offset(conn: psycopg.Connection[Any], tenant_id: int) -> None:
    from crondepot.timetable import spread_offset

    job_id = add_job(conn, tenant_id, cron="0 9 * * *", tz="Asia/Kolkata", key="emi",
                     spread={"seconds": 1800, "key": "48213"})
    nine_ist = datetime(2026, 10, 5, 3, 30, tzinfo=UTC)
    offset = timedelta(seconds=spread_offset("48213", 1800))
    _set_next(conn, job_id, nine_ist, offset)
    tick(conn, batch=10, now=nine_ist + timedelta(hours=1))
    ((run_id, _, _, nominal, due),) = _runs(conn, job_id)
    assert run_id == f"{job_id}:{int(nine_ist.timestamp())}"
    assert (nominal, due) == (nine_ist, nine_ist + offset)


def test_dst_fall_back_with_copies_in_different_session_zones(db_url: str) -> None:
    """Two copies whose sessions use different TimeZone settings agree: one run on Nov 1."""
    with connect(db_url) as setup:
        from tests.support.jobs import tenant

        job_id = add_job(setup, tenant(setup), cron="30 1 * * *", tz="America/New_York",
                         key="ny")
        _set_next(setup, job_id, datetime(2026, 10, 31, 5, 30, tzinfo=UTC))
    instants = [datetime(2026, 10, 31, 6, tzinfo=UTC), datetime(2026, 11, 1, 5, 45, tzinfo=UTC),
                datetime(2026, 11, 1, 6, 45, tzinfo=UTC), datetime(2026, 11, 2, 7, tzinfo=UTC)]
    for i, now in enumerate(instants):
        with connect(db_url) as copy:
            zone = "Asia/Kolkata" if i % 2 else "America/Los_Angeles"
            copy.execute(f"SET TimeZone = '{zone}'")
            tick(copy, batch=10, now=now)
    with connect(db_url) as check:
        runs = _runs(check, job_id)
    expected = [datetime(2026, 10, 31, 5, 30, tzinfo=UTC), datetime(2026, 11, 1, 5, 30, tzinfo=UTC),
                datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]
    assert [r[0] for r in runs] == [f"{job_id}:{int(at.timestamp())}" for at in expected]


def test_skip_rules_write_skipped_rows_with_reasons(conn: psycopg.Connection[Any],
                                                    tenant_id: int) -> None:
    renewal = add_job(conn, tenant_id, cron="0 9 * * *", tz="Asia/Kolkata", key="renewal",
                      misfire={"policy": "skip_after_local_time", "until": "12:00"})
    nine_ist = datetime(2026, 10, 5, 3, 30, tzinfo=UTC)
    _set_next(conn, renewal, nine_ist)
    result = tick(conn, batch=10, now=datetime(2026, 10, 5, 7, tzinfo=UTC))   # 12:30 IST
    assert [r.skip_reason for r in result.skipped] == ["misfire_local_deadline"]
    ((_, status, reason, _, _),) = _runs(conn, renewal)
    assert (status, reason) == ("skipped", "misfire_local_deadline")


def test_a_job_whose_stored_cron_no_longer_parses_is_put_off_not_fatal(
        conn: psycopg.Connection[Any], tenant_id: int,
        caplog: pytest.LogCaptureFixture) -> None:
    now = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
    good = add_job(conn, tenant_id, key="good", cron="0 * * * *")
    bad = add_job(conn, tenant_id, key="bad", cron="0 * * * *")
    nominal = datetime(2026, 3, 2, 9, tzinfo=UTC)
    for job_id in (good, bad):
        _set_next(conn, job_id, nominal)
    # a row the parser once accepted and no longer does (a step wider than its field)
    conn.execute("UPDATE jobs SET cron = '*/90 * * * *' WHERE id = %s", (bad,))
    with caplog.at_level(logging.WARNING, logger="crondepot.scheduler"):
        result = tick(conn, batch=10, now=now)
    assert (result.claimed, result.unreadable, len(result.queued)) == (2, [bad], 1)
    assert [r[0] for r in _runs(conn, good)] == [run_id(good, nominal)]
    assert _runs(conn, bad) == []
    warnings = [r for r in caplog.records
                if r.levelno == logging.WARNING and r.name.startswith("crondepot.scheduler")]
    assert len(warnings) == 1 and f"job {bad} " in warnings[0].getMessage()
    next_run_at, next_nominal_at = conn.execute(
        "SELECT next_run_at, next_nominal_at FROM jobs WHERE id = %s", (bad,)).fetchone()
    assert (next_run_at, next_nominal_at) == (now + UNREADABLE_RETRY, nominal)  # still owed
    assert tick(conn, batch=10, now=now + timedelta(minutes=1)).claimed == 0


def test_an_urgent_job_is_claimed_before_an_earlier_backlog(conn: psycopg.Connection[Any],
                                                            tenant_id: int) -> None:
    """A burst of normal jobs due earlier does not hold back an urgent job due later: the
    first tick of a small batch already writes the urgent fire."""
    bulk_due_jobs(conn, 300, due_in_seconds=-30)
    urgent = add_job(conn, tenant_id, cron="* * * * *", key="alert", priority="urgent")
    (now,) = conn.execute("SELECT date_trunc('minute', now())").fetchone()
    _set_next(conn, urgent, now)
    first = tick(conn, batch=100)
    assert (first.claimed, first.full) == (100, True)
    assert [r[1] for r in _runs(conn, urgent)] == ["queued"]
    assert first.queued_priorities.count("urgent") == 1
    # the rest at the first tick's instant: a minute boundary passed while draining would
    # fire the every-minute urgent job again
    while tick(conn, batch=100, now=first.now).claimed:
        pass
    assert counts(conn) == {"runs": 301, "distinct_runs": 301, "jobs_with_runs": 301,
                            "still_due": 0}


def test_urgent_jobs_beyond_a_batch_fill_it_and_the_rest_follow(
        conn: psycopg.Connection[Any]) -> None:
    """More urgent jobs due than a batch holds: the batch is all urgent and says there is
    more; no job is claimed twice in one tick (the second claim does not see the first's
    rows, which SKIP LOCKED would not skip in the same transaction)."""
    bulk_due_jobs(conn, 150, due_in_seconds=-5, priority="urgent")
    conn.execute("UPDATE jobs SET key = 'u' || key")
    bulk_due_jobs(conn, 150, due_in_seconds=-60)
    first = tick(conn, batch=100)
    assert (first.claimed, first.inserted, first.full) == (100, 100, True)
    assert set(first.queued_priorities) == {"urgent"}
    second = tick(conn, batch=100)
    assert (second.claimed, second.inserted) == (100, 100)
    assert sorted(set(second.queued_priorities)) == ["normal", "urgent"]
    assert second.queued_priorities.count("urgent") == 50
    while tick(conn, batch=100).claimed:
        pass
    assert counts(conn) == {"runs": 300, "distinct_runs": 300, "jobs_with_runs": 300,
                            "still_due": 0}


def test_the_claim_locks_only_the_jobs_it_returns(db_url: str,
                                                  conn: psycopg.Connection[Any]) -> None:
    """The claim's second branch (the non-urgent jobs) stops when the batch is full: the
    jobs it did not return stay unlocked for the other copies, and the urgent branch reads
    its own index."""
    from crondepot.db import Q
    bulk_due_jobs(conn, 2000, due_in_seconds=-5)
    conn.execute("ANALYZE jobs")
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        (plan,) = conn.execute(b"EXPLAIN (FORMAT JSON) " + Q.claim_due_jobs.encode(),
                               {"now": None, "batch": 100}).fetchone()
        assert "jobs_due_urgent" in str(plan), plan
        claimed = conn.execute(Q.claim_due_jobs, {"now": None, "batch": 100}).fetchall()
        assert len(claimed) == 100
        with connect(db_url) as other:
            (free,) = other.execute(
                "SELECT count(*) FROM (SELECT id FROM jobs FOR UPDATE SKIP LOCKED) AS f"
            ).fetchone()
        assert free == 1900
