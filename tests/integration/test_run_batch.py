"""The tick's writes as kinds and members (scheduler/batch.py), against a real database:
the array literals read back as sent, and a tick of many kinds writes every run with its
own job's tenant, priority, times and status."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.scheduler.batch import int_array, text_array
from crondepot.scheduler.tick import tick
from crondepot.timetable import run_id
from tests.support.jobs import add_job, tenant

ODD = ["7:1796552340", "", "a,b", 'say "hi"', "back\\slash", "{braced}", " spaced ",
       "NULL", "-5:-60", "ünï"]


@pytest.mark.parametrize("values", [["1:60", "22:-1", "333:1796552340"], ODD, ["x"], []])
def test_a_text_literal_reads_back_as_the_strings_sent(conn: psycopg.Connection[Any],
                                                       values: list[str]) -> None:
    (back,) = conn.execute("SELECT %s::text[]", (text_array(values),)).fetchone()
    assert back == values


def test_an_integer_literal_reads_back_as_the_integers_sent(
        conn: psycopg.Connection[Any]) -> None:
    values = [1, -2, 2**62, 0]
    (back,) = conn.execute("SELECT %s::bigint[]", (int_array(values),)).fetchone()
    assert back == values
    assert conn.execute("SELECT %s::bigint[]", (int_array([]),)).fetchone() == ([],)


def test_a_tick_of_many_kinds_writes_each_run_as_its_job_would(
        conn: psycopg.Connection[Any]) -> None:
    """60 jobs in two tenants, both priorities, overlap rules and catch-up policies, each
    behind by a different number of minutes: a tick writes hundreds of runs of dozens of
    kinds, shared across plans. Every row must carry its own job's tenant, priority and
    overlap, its run id's nominal time, and the status its plan gave it."""
    now = datetime(2026, 10, 5, 9, 30, 30, tzinfo=UTC)
    tenants = [tenant(conn, "bank42"), tenant(conn, "bank7")]
    jobs: dict[int, tuple[int, str, str]] = {}
    for k in range(60):
        t = tenants[k % 2]
        priority = ("normal", "urgent", "bulk")[k % 3]
        overlap = "allow" if k % 4 else "skip"
        job = add_job(conn, t, cron="* * * * *", key=f"j{k}", priority=priority,
                      overlap=overlap, catchup="latest" if k % 5 == 0 else "all")
        behind = now.replace(second=0) - timedelta(minutes=k % 12)
        conn.execute("UPDATE jobs SET next_nominal_at = %s, next_run_at = %s WHERE id = %s",
                     (behind, behind, job))
        jobs[job] = (t, priority, overlap)
    result = tick(conn, batch=100, now=now)
    assert result.claimed == 60
    planned = {r.run_id: r for r in (*result.queued, *result.skipped)}
    assert len(planned) == result.written == result.inserted > 200
    rows = conn.execute("SELECT run_id, job_id, tenant_id, priority, overlap, nominal_at, "
                        "due_at, status, skip_reason FROM runs").fetchall()
    assert len(rows) == len(planned)
    kinds = set()
    for rid, job, t, priority, overlap, nominal, due, status, reason in rows:
        run = planned[rid]
        assert rid == run_id(job, nominal)
        assert (t, priority, overlap) == jobs[job]
        assert (nominal, due, reason) == (run.nominal_at, run.due_at, run.skip_reason)
        assert status == ("queued" if reason is None else "skipped")
        kinds.add((t, priority, overlap, nominal, reason))
    assert len(kinds) > 30
    assert sorted(result.queued_priorities) == sorted(
        jobs[int(r.run_id.split(":")[0])][1] for r in result.queued)
