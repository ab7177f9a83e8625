"""The forecast (forecast/report.py) on a real PostgreSQL with the clock injected: exact
counts for crafted timetables, the drain of a rate limit, deadlines passed, a held limit,
runs already queued, another tenant's jobs never counted, and the runs it says will pass
their deadline counted against what the real claim then lets pass."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.forecast.drain import drain as bucket_drain
from crondepot.forecast.report import Forecast, ForecastError, LimitForecast, forecast
from crondepot.forecast.text import lines
from crondepot.job import JobSpec
from crondepot.job.store import create_jobs, pause_job
from crondepot.limits import holds
from crondepot.limits.buckets import set_limit
from crondepot.queue import claim_runs
from crondepot.tenancy.calendars import set_calendar
from crondepot.tenancy.tenants import set_delivery_window
from crondepot.timetable.delivery import parse_window
from tests.integration.test_ledger import DAY, add, at, drain
from tests.support.jobs import grant_limit, tenant

NOON = DAY + timedelta(hours=12)


def many(conn: psycopg.Connection[Any], tenant_id: int, count: int, now: datetime,
         **doc: Any) -> None:
    doc = {"tz": "UTC", "target": {"type": "python", "handler": "test.noop"}, **doc}
    create_jobs(conn, tenant_id, [JobSpec.from_document(doc)] * count, now=now)


def on(result: Forecast, name: str | None) -> LimitForecast:
    (found,) = [lf for lf in result.limits if lf.name == name and lf.held != "host"]
    return found


@pytest.fixture
def t(conn: psycopg.Connection[Any]) -> int:
    made = tenant(conn)
    set_limit(conn, "sms", 10, 100)
    grant_limit(conn, made, "sms")
    return made


def test_counts_of_crafted_timetables(conn: psycopg.Connection[Any], t: int) -> None:
    now = at(8)
    many(conn, t, 300, now, cron="0 9 * * *")                        # 300 identical: 300
    add(conn, t, now, key="list", cron=["0 10 * * *", "15 10 * * *", "0 10 * * *"])   # 2
    add(conn, t, now, key="every", every="90m", anchor=now.isoformat())   # 09:30 .. 08:00: 16
    set_calendar(conn, t, "holidays", [date(2026, 3, 2)], now=now)
    add(conn, t, now, key="holiday", cron="0 12 * * *",              # today's skipped: 0
        calendar={"exclude": "holidays", "on_excluded": "skip"})
    add(conn, t, now, key="moved", cron="0 13 * * *",                # moved to Tuesday: 0
        calendar={"exclude": "holidays", "on_excluded": "next_business_day"})
    add(conn, t, now, key="capped", cron="*/10 * * * *", max_runs=3)  # 08:10 .. 08:30: 3
    add(conn, t, now, key="once", at=at(15).isoformat())              # 1
    add(conn, t, now, key="ends", cron="5 * * * *", end_at=at(12).isoformat())   # 8..11: 4
    add(conn, t, now, key="starts", cron="0 * * * *", start_at=at(6, day=1).isoformat())  # 6,7,8: 3
    paused = add(conn, t, now, key="paused", cron="* * * * *")
    pause_job(conn, t, paused, now=now)
    result = forecast(conn, t, hours=24, now=now)
    free = on(result, None)
    assert free.runs == 300 + 2 + 16 + 3 + 1 + 4 + 3
    assert free.per_minute[at(9)] == 300
    assert free.per_minute[at(10)] == 1 and free.per_minute[at(10, 15)] == 1
    assert free.per_minute.get(at(13)) is None            # the moved fire is due on Tuesday
    assert result.skipped == {"calendar": 1}
    # 300 identical crons are one group; the paused job is not read at all
    assert result.jobs == 300 + 8 and result.groups == 9
    text = lines(result, UTC)
    assert any("limited by workers, not modelled" in line for line in text)


def test_the_drain_of_a_rate_limit_and_the_deadline_it_passes(
        conn: psycopg.Connection[Any], t: int) -> None:
    now = at(8)
    many(conn, t, 1000, now, cron="0 9 * * *", rate_limit="sms",
         misfire={"policy": "skip_after", "seconds": 60})
    result = forecast(conn, t, hours=2, now=now)
    sms = on(result, "sms")
    (wave,) = sms.waves
    # 100 tokens at once, then 10/s: 600 in the minute before the deadline, 300 pass it
    assert (sms.runs, wave.start, wave.sent, wave.drained_at) == (1000, at(9), 700, at(9, 1))
    assert wave.deadlines == {at(9, 1): 300}
    assert ("09:00:00: 1,000 runs on `sms` at 10/s, drained by 09:01:00, 300 would pass "
            "their 09:01:00 deadline") in " ".join(lines(result, UTC))


def test_a_local_deadline_and_no_deadline(conn: psycopg.Connection[Any], t: int) -> None:
    now = at(8)
    many(conn, t, 500, now, cron="0 9 * * *", rate_limit="sms")
    many(conn, t, 500, now, cron="0 9 * * *", rate_limit="sms",
         misfire={"policy": "skip_after_local_time", "until": "09:00"})
    result = forecast(conn, t, hours=2, now=now)
    (wave,) = on(result, "sms").waves
    # deadline 09:00 sharp: FIFO ties go to the earlier deadline, the burst sends 100 of them
    assert wave.runs == 1000 and wave.deadlines == {at(9): 400}
    assert wave.drained_at == at(9) + timedelta(seconds=(600 - 100) / 10)


def test_a_held_limit_drains_nothing(conn: psycopg.Connection[Any], t: int) -> None:
    now = at(8)
    many(conn, t, 50, now, cron="0 9 * * *", rate_limit="sms",
         misfire={"policy": "skip_after", "seconds": 600})
    holds.hold(conn, t, "rate_limit", "sms")
    result = forecast(conn, t, hours=4, now=now)
    sms = on(result, "sms")
    (wave,) = sms.waves
    assert (sms.status, wave.runs, wave.sent, wave.drained_at) == ("held", 50, 0, None)
    assert wave.past_deadline == 50
    assert "held (rate_limit hold): none sent while it lasts" in " ".join(lines(result, UTC))


def test_runs_queued_now_drain_first(conn: psycopg.Connection[Any], t: int) -> None:
    many(conn, t, 200, at(8), cron="0 9 * * *", rate_limit="sms")
    drain(conn, at(9))                                  # 200 queued at 09:00, none sent
    result = forecast(conn, t, hours=24, now=at(9, 0))
    sms = on(result, "sms")
    assert (sms.queued_now, sms.runs) == (200, 200)     # today's queued, tomorrow's fired
    first, second = sms.waves
    assert (first.runs, first.drained_at) == (200, at(9) + timedelta(seconds=10))
    assert (second.start, second.runs, second.waited) == (at(9, day=1), 200, True)


def test_another_tenants_jobs_are_never_counted(conn: psycopg.Connection[Any], t: int) -> None:
    other = tenant(conn, "otherbank")
    grant_limit(conn, other, "sms")
    many(conn, other, 400, at(8), cron="0 9 * * *", rate_limit="sms")
    many(conn, t, 7, at(8), cron="0 9 * * *", rate_limit="sms")
    mine = forecast(conn, t, now=at(8))
    assert (mine.jobs, on(mine, "sms").runs) == (7, 7)
    assert forecast(conn, other, now=at(8)).jobs == 400


def test_a_spread_groups_jobs_by_offset(conn: psycopg.Connection[Any], t: int) -> None:
    jobs = [JobSpec.from_document({"key": f"k{i}", "cron": "0 9 * * *", "tz": "UTC",
                                   "spread": {"seconds": 60}, "rate_limit": "sms",
                                   "target": {"type": "python", "handler": "test.noop"}})
            for i in range(300)]
    create_jobs(conn, t, jobs, now=at(8))
    result = forecast(conn, t, hours=2, now=at(8))
    assert on(result, "sms").runs == 300 and result.groups <= 60
    assert sum(n for m, n in on(result, "sms").per_minute.items() if m == at(9)) == 300


@pytest.mark.parametrize("hours", [0, -1, 169, 10_000])
def test_a_horizon_out_of_range_is_refused(conn: psycopg.Connection[Any], t: int,
                                           hours: int) -> None:
    with pytest.raises(ForecastError, match="from 1 to 168"):
        forecast(conn, t, hours=hours, now=NOON)


def test_delivery_windows_the_jobs_and_the_tenants_default(
        conn: psycopg.Connection[Any], t: int) -> None:
    # fires at 9, 10 and 11. The tenant's default window opens at 10:00: "default"'s 09:00
    # fire waits for it (two runs ready at 10:00). "own" skips what falls before 11:00;
    # "none" opts out of any window.
    set_delivery_window(conn, t, parse_window({"from": "10:00", "to": "12:00"}))
    now = at(8, 30)
    add(conn, t, now, key="default", cron="0 9-11 * * *", rate_limit="sms")
    add(conn, t, now, key="own", cron="0 9-11 * * *", rate_limit="sms",
        delivery_window={"from": "11:00", "to": "12:00", "outside": "skip"})
    add(conn, t, now, key="none", cron="0 9-11 * * *", rate_limit="sms",
        delivery_window="none")
    result = forecast(conn, t, hours=6, now=now)
    sms = on(result, "sms")
    assert sms.per_minute == {at(9): 1, at(10): 2 + 1, at(11): 1 + 1 + 1}
    assert result.skipped == {"delivery_window": 2}


def test_a_held_host_drains_nothing(conn: psycopg.Connection[Any], t: int) -> None:
    now = at(8)
    many(conn, t, 20, now, cron="0 9 * * *", rate_limit="sms",
         target={"type": "http", "url": "https://sms.example.com/send"})
    many(conn, t, 5, now, cron="0 9 * * *", rate_limit="sms")
    holds.hold(conn, t, "host", "sms.example.com")
    result = forecast(conn, t, hours=2, now=now)
    held_runs = [lf for lf in result.limits if lf.held == "host"]
    assert [(lf.name, lf.runs, lf.waves[0].sent) for lf in held_runs] == [("sms", 20, 0)]
    free = [lf for lf in result.limits if lf.name == "sms" and lf.held is None]
    assert [(lf.runs, lf.waves[0].sent) for lf in free] == [(5, 5)]


def _queue_behind(conn: psycopg.Connection[Any], tenant_id: int, deadlines: list[float],
                  *, limit_on_runs: bool) -> None:
    """One queued run of a job on the `gw` limit per deadline (seconds after 09:00), ready
    before 09:00 in that order, a millisecond apart. ``limit_on_runs`` False leaves
    runs.rate_limit empty: the claim's order before deadline first (oldest first)."""
    (job_id,) = conn.execute(  # type: ignore[misc]
        "INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, active, rate_limit) "
        "VALUES (%s, 'burst', '0 9 * * *', 'UTC', 'normal', "
        "'{\"type\": \"python\", \"handler\": \"test.noop\"}', false, 'gw') RETURNING id",
        (tenant_id,)).fetchone()
    ready = [at(9) - timedelta(seconds=10) + timedelta(milliseconds=i)
             for i in range(len(deadlines))]
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "available_at, deadline_at, rate_limit) "
        "SELECT %s || ':' || r.i, %s, %s, 'normal', r.at, r.at, r.at, r.deadline, %s "
        "FROM unnest(%s::timestamptz[], %s::timestamptz[]) WITH ORDINALITY AS r(at, deadline, i)",
        (str(job_id), job_id, tenant_id, "gw" if limit_on_runs else None, ready,
         [at(9) + timedelta(seconds=d) for d in deadlines]))


@pytest.mark.parametrize("limit_on_runs", [True, False], ids=["deadline_first", "fifo"])
def test_past_deadline_is_what_the_claim_then_lets_pass(
        conn: psycopg.Connection[Any], limit_on_runs: bool) -> None:
    # 300 runs of mixed deadlines (8, 15, 25 or 40 s after 09:00) behind a bucket of 7/s
    # holding 7 tokens, and a gateway that takes 7 a second: the claim run once a second
    # from 09:00 takes 7 each time. The forecast (made before, on the same queue) says how
    # many pass their deadline; the real claim then lets exactly that many pass: 43 deadline
    # first, where first come first served (the claim's order for runs without their limit)
    # lets 106 pass.
    bank = tenant(conn)
    set_limit(conn, "gw", 7, 7)
    grant_limit(conn, bank, "gw")
    rng = random.Random(34)
    _queue_behind(conn, bank, [rng.choice([8.0, 15.0, 25.0, 40.0]) for _ in range(300)],
                  limit_on_runs=limit_on_runs)
    gw = on(forecast(conn, bank, hours=1, now=at(9)), "gw")
    (wave,) = gw.waves
    assert gw.bucket is not None
    fifo = bucket_drain(gw.arrivals, rate=gw.bucket.rate_per_second, burst=gw.bucket.burst,
                        tokens=gw.tokens, start=at(9), fifo=True)
    predicted = wave.past_deadline if limit_on_runs else sum(w.past_deadline for w in fifo)
    sent = [len(claim_runs(conn, owner="w", shares={"normal": 7}, now=at(9) + timedelta(
        seconds=k))) for k in range(45)]
    (passed,) = conn.execute(  # type: ignore[misc]
        "SELECT count(*) FROM runs WHERE status = 'queued'").fetchone()
    assert predicted == passed == (43 if limit_on_runs else 106)
    assert sum(sent) == 300 - passed
    if limit_on_runs:
        # the last claim that took a run is the second the forecast drains by
        last = max(k for k, n in enumerate(sent) if n)
        assert wave.drained_at is not None
        assert last - 1 < (wave.drained_at - at(9)).total_seconds() <= last
