"""Exclusion calendars and the ledger, on a real PostgreSQL with the clock injected: the
scheduler's tick writes a fire moved to the business day before in time (next_run_at is
its moved due time), a calendar changed later moves the fires not yet written and leaves
the written ones as they are, backfill applies the rule, and ``verify`` stays clean."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.runs.backfill import backfill
from crondepot.tenancy.calendars import set_calendar
from crondepot.timetable import run_id
from tests.integration.test_ledger import add, assert_clean, drain
from tests.support.jobs import tenant

MON = datetime(2026, 3, 2, tzinfo=UTC)     # Monday 2 March 2026


def day(n: int, hour: int = 9) -> datetime:
    """09:00 UTC on the n-th day after Monday 2 March (0: the Monday)."""
    return MON + timedelta(days=n, hours=hour)


def runs(conn: psycopg.Connection[Any], job: int) -> dict[datetime, tuple[Any, ...]]:
    return {r[0]: r[1:] for r in conn.execute(
        "SELECT nominal_at, run_id, status, skip_reason, due_at FROM runs WHERE job_id = %s",
        (job,))}


def job_times(conn: psycopg.Connection[Any], job: int) -> tuple[Any, ...]:
    row = conn.execute("SELECT next_nominal_at, next_run_at FROM jobs WHERE id = %s",
                       (job,)).fetchone()
    assert row is not None
    return tuple(row)


@pytest.fixture
def t(conn: psycopg.Connection[Any]) -> int:
    made = tenant(conn)
    set_calendar(conn, made, "holidays", [date(2026, 3, 6)], now=day(0, 7))   # Friday
    return made


def _job(conn: psycopg.Connection[Any], t: int, on: str) -> int:
    return add(conn, t, day(0, 8), key=on, cron="0 9 * * *",
               calendar={"exclude": "holidays", "on_excluded": on})


def test_a_fire_moved_to_the_day_before_is_written_by_then(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = _job(conn, t, "previous_business_day")
    for n in range(4):                       # Monday .. Thursday, each at 09:00
        drain(conn, day(n))
    # at 09:00 on Thursday both Thursday's fire and Friday's (moved to Thursday) are written
    written = runs(conn, job)
    assert written[day(4)] == (run_id(job, day(4)), "queued", None, day(3))
    assert written[day(3)][3] == day(3)
    assert job_times(conn, job) == (day(5), day(5))     # Saturday is no holiday: in place
    assert_clean(conn, day(3, 10))


def test_next_business_day_and_skip(conn: psycopg.Connection[Any], t: int) -> None:
    later, skip = _job(conn, t, "next_business_day"), _job(conn, t, "skip")
    for n in range(7):
        drain(conn, day(n))
    assert runs(conn, later)[day(4)][1:] == ("queued", None, day(7))    # Monday the 9th
    assert runs(conn, skip)[day(4)][1:] == ("skipped", "calendar", day(4))
    assert len(runs(conn, later)) == len(runs(conn, skip)) == 7
    assert_clean(conn, day(6, 10))


def test_a_calendar_change_moves_only_the_fires_not_yet_written(
        conn: psycopg.Connection[Any], t: int) -> None:
    job = _job(conn, t, "previous_business_day")
    for n in range(4):
        drain(conn, day(n))
    before = runs(conn, job)
    # Monday the 9th added on Thursday at 10:00, Friday the 6th dropped: Friday's fire was
    # written (due Thursday) and keeps its row; Monday's moves to Friday 09:00, and the
    # next tick of the job (made due by the change) says so.
    set_calendar(conn, t, "holidays", [date(2026, 3, 9)], now=day(3, 10))
    drain(conn, day(3, 10))
    assert runs(conn, job) == before
    assert job_times(conn, job) == (day(5), day(4))
    drain(conn, day(4))
    written = runs(conn, job)
    assert written[day(7)] == (run_id(job, day(7)), "queued", None, day(4))
    # the weekend's fires, nominally before Monday's, are written with it, due as ever
    assert (written[day(5)][3], written[day(6)][3]) == (day(5), day(6))
    assert job_times(conn, job) == (day(8), day(8))
    assert_clean(conn, day(4, 10))


def test_backfill_applies_the_calendar(conn: psycopg.Connection[Any], t: int) -> None:
    moved, skip = _job(conn, t, "previous_business_day"), _job(conn, t, "skip")
    for n in range(6):
        drain(conn, day(n))
    conn.execute("DELETE FROM runs WHERE nominal_at = %s", (day(4),))
    done = backfill(conn, t, skip, since=day(0), until=day(5, 10), now=day(5, 10))
    assert done.written_skipped == [run_id(skip, day(4))]
    assert runs(conn, skip)[day(4)][1:3] == ("skipped", "calendar")
    done = backfill(conn, t, moved, since=day(0), until=day(5, 10), now=day(5, 10))
    assert done.written == [run_id(moved, day(4))]
    assert runs(conn, moved)[day(4)][1:] == ("queued", None, day(5, 10))   # due at once
    assert_clean(conn, day(5, 10))
