"""Intervals and lists of crons kept by the ledger: the tick writes their fires, verify reads
their timetables (current and earlier ones in job_timetables) through the same Schedule,
and backfill writes exactly the fires verify finds missing, with the tick's run ids.

The clock is injected (``now=``), as in test_ledger.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.job.store import get_job, update_job
from crondepot.runs.backfill import backfill
from crondepot.scheduler.ledger import verify
from crondepot.timetable import run_id
from tests.integration.test_ledger import add, drain
from tests.support.jobs import tenant

DAY = datetime(2026, 3, 28, tzinfo=UTC)      # London's clocks go forward the next night


def at(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return DAY + timedelta(hours=hour, minutes=minute, seconds=second)


@pytest.fixture
def t(conn: psycopg.Connection[Any]) -> int:
    return tenant(conn)


def nominals(conn: psycopg.Connection[Any], job_id: int) -> list[datetime]:
    return [r[0] for r in conn.execute(
        "SELECT nominal_at FROM runs WHERE job_id = %s ORDER BY nominal_at", (job_id,))]


def unaccounted(conn: psycopg.Connection[Any], since: datetime, until: datetime,
                now: datetime) -> list[str]:
    report = verify(conn, since=since, until=until, now=now)
    assert not report.duplicated_count and not report.unreadable, report.document()
    return sorted(f.run_id for f in report.unaccounted)


def test_an_interval_job_is_written_every_interval_from_its_anchor(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = add(conn, t, at(0, 0, 0) + timedelta(microseconds=250_000), every="90s",
              tz="Europe/London")
    stored = get_job(conn, t, job)
    assert stored.spec.anchor_at == at(0)             # the creation instant, whole seconds
    drain(conn, at(0, 30))
    assert nominals(conn, job) == [at(0) + timedelta(seconds=90 * k) for k in range(1, 21)]
    assert unaccounted(conn, at(0), at(0, 30), at(0, 30)) == []


def test_an_edit_history_of_interval_list_interval_is_verified_and_backfilled(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = add(conn, t, at(0), every="20m", anchor="2026-03-27T23:05:00Z", tz="Europe/London")
    drain(conn, at(1, 10))                      # 00:05 .. 01:05 every 20 minutes
    version = get_job(conn, t, job).version
    update_job(conn, t, job, {"every": None, "cron": ["0 * * * *", "30 1 * * *", "0,30 1 * * *"]},
               version=version, now=at(1, 12))
    drain(conn, at(3, 5))                       # 01:30 (named twice: one fire), 02:00, 03:00
    version = get_job(conn, t, job).version
    update_job(conn, t, job, {"cron": None, "every": "1h", "anchor": "2026-03-28T03:15:00Z"},
               version=version, now=at(3, 10))
    drain(conn, at(5, 20))                      # 03:15, 04:15, 05:15
    written = nominals(conn, job)
    expected = [at(0, 5), at(0, 25), at(0, 45), at(1, 5),      # every 20m
                at(1, 30), at(2), at(3),                        # the list
                at(3, 15), at(4, 15), at(5, 15)]                # every 1h
    assert written == expected
    assert unaccounted(conn, at(0), at(5, 20), at(5, 20)) == []

    conn.execute("DELETE FROM runs WHERE job_id = %s", (job,))
    missing = unaccounted(conn, at(0), at(5, 20), at(5, 20))
    assert missing == sorted(run_id(job, nominal) for nominal in expected)
    done = backfill(conn, t, job, since=at(0), until=at(5, 20), now=at(5, 20))
    assert sorted(done.written) == missing
    assert nominals(conn, job) == expected
    assert unaccounted(conn, at(0), at(5, 20), at(5, 20)) == []
