"""Forecast benchmark: what ``crondepot forecast`` costs for the seed's 9:00 burst.

The data set, built in a fresh database (``crondepot_fbench``, migrated, dropped
afterwards) on the machine's PostgreSQL, for one tenant:

- **The burst.** ``--identical`` (480,112) reminder jobs ``0 9 * * *`` in Asia/Kolkata on
  the rate limit ``sms-gateway`` (450/s, burst 50), misfire ``skip_after_local_time``
  20:00, written with one ``INSERT ... SELECT generate_series``; next fire 09:00 IST on
  5 November 2026 (03:30 UTC).
- **The rest.** ``--varied`` (10,000) jobs made through ``create_jobs`` that share little:
  crons at every minute of the day in four zones, ``every`` intervals with their own
  anchors, cron lists, ``H`` fields, a 10-minute spread, ``max_runs``, a holiday calendar
  that skips or moves fires, delivery windows; a few paused. About 9,000 distinct groups.

Measured: ``forecast(conn, tenant, hours=24, now=NOW)`` ``--repeats`` times (median and
best printed) with NOW = 08:30 IST on 5 November (the burst half an hour ahead); then again
at 09:00:05 IST, after the scheduler's tick wrote (and "workers" finished) the varied jobs'
fires up to then and the burst's runs were written queued (one ``INSERT ... SELECT``, the
rows a tick writes): the 480,112 queued runs are read and drained too. Each pass prints
the forecast's own lines for ``sms-gateway``; the drain time is checked against the
arithmetic ((480,112 - 50) / 450 s after 09:00 IST), a mismatch stops the run.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/forecast.py                      # 480,112 + 10,000 jobs (build ~1 min)
    python bench/forecast.py --identical 50000 --varied 1000 --repeats 1    # a quick look

Figures are printed, never asserted; docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg

from common import DEFAULT_ADMIN_URL, fresh_database, server_lines
from crondepot.forecast.report import Forecast, forecast
from crondepot.forecast.text import lines
from crondepot.job import JobSpec
from crondepot.job.store import create_jobs, pause_job
from crondepot.limits.buckets import set_limit
from crondepot.scheduler.tick import tick
from crondepot.tenancy.calendars import set_calendar
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant

NAME = "crondepot_fbench"
BURST_AT = datetime(2026, 11, 5, 3, 30, tzinfo=UTC)          # 09:00 Asia/Kolkata
CREATED = BURST_AT - timedelta(hours=1)
NOW = BURST_AT - timedelta(minutes=30)
NOW_QUEUED = BURST_AT + timedelta(seconds=5)
RATE, BURST = 450.0, 50
ZONES = ("Asia/Kolkata", "UTC", "Europe/London", "America/New_York")

INSERT_IDENTICAL = """
    INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, target, payload,
                      rate_limit, misfire_policy, misfire_until, created_at, updated_at)
    SELECT %(tenant)s, 'bank42:' || g || ':reminder', '0 9 * * *', 'Asia/Kolkata',
           %(first)s, %(first)s,
           '{"type": "http", "url": "https://sms.example/send", "timeout_s": 10}',
           jsonb_build_object('phone', '+91' || (9800000000 + g), 'template', 'emi'),
           'sms-gateway', 'skip_after_local_time', '20:00', %(created)s, %(created)s
    FROM generate_series(1, %(count)s::bigint) AS g
"""
# The burst's runs as a tick writes them: queued, due at 09:00 IST, deadline 20:00 IST.
QUEUE_BURST = """
    INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at,
                      status, deadline_at)
    SELECT id || ':' || extract(epoch FROM %(at)s::timestamptz)::bigint, id, tenant_id,
           'normal', %(at)s, %(at)s, %(at)s, 'queued', %(deadline)s
    FROM jobs WHERE key LIKE '%%:reminder'
"""
# Workers' work, done at once: the varied jobs' runs written so far are finished (the
# burst's stay queued).
FINISH_RUNS = """
    UPDATE runs
    SET status = 'succeeded', attempt = 1, first_claimed_at = due_at, started_at = due_at,
        finished_at = due_at + interval '1 second', updated_at = due_at
    WHERE status = 'queued'
      AND NOT EXISTS (SELECT FROM jobs AS j WHERE j.id = runs.job_id AND j.key LIKE '%%:reminder')
"""
ADVANCE_BURST = """
    UPDATE jobs SET next_run_at = next_run_at + interval '1 day',
                    next_nominal_at = next_nominal_at + interval '1 day',
                    fire_count = fire_count + 1
    WHERE key LIKE '%%:reminder'
"""


def varied(n: int) -> dict[str, Any]:
    """The n-th of the jobs that share little with each other."""
    doc: dict[str, Any] = {"key": f"bank42:{n}:varied", "tz": ZONES[n % len(ZONES)],
                           "target": {"type": "http", "url": "https://hooks.example/x"}}
    kind = n % 8
    if kind == 0:
        doc["every"], doc["anchor"] = f"{300 + n % 900}s", (CREATED - timedelta(
            seconds=n)).isoformat()
    elif kind == 1:
        doc["cron"] = [f"{n % 60} {n % 24} * * *", f"{(n + 7) % 60} {(n + 5) % 24} * * 1-5"]
    elif kind == 2:
        doc["cron"] = "H H * * *"
    elif kind == 3:
        doc["cron"] = f"{n % 60} {n % 24} * * *"
        doc["spread"] = {"seconds": 600}
    elif kind == 4:
        doc["cron"] = f"*/{5 + n % 10} * * * *"
        doc["max_runs"] = 1 + n % 50
    elif kind == 5:
        doc["cron"] = f"{n % 60} {n % 24} * * *"
        doc["calendar"] = {"exclude": "holidays",
                           "on_excluded": ("skip", "next_business_day",
                                           "previous_business_day")[n % 3]}
    elif kind == 6:
        doc["cron"] = f"{n % 60} * * * *"
        doc["delivery_window"] = {"from": "09:00", "to": "21:00",
                                  "outside": ("defer", "skip")[n % 2]}
    else:
        doc["cron"] = f"{n % 60} {n % 24} * * *"
        doc["rate_limit"] = "sms-gateway"
        doc["misfire"] = {"policy": "skip_after", "seconds": 300}
    return doc


def build(conn: psycopg.Connection[Any], identical: int, count: int) -> int:
    tenant = create_tenant(conn, "bank42").id
    set_limit(conn, "sms-gateway", RATE, BURST)
    grant(conn, tenant, limits=["sms-gateway"])
    set_calendar(conn, tenant, "holidays", [date(2026, 11, 4), date(2026, 11, 5)], now=CREATED)
    started = time.monotonic()
    conn.execute(INSERT_IDENTICAL, {"tenant": tenant, "first": BURST_AT, "created": CREATED,
                                    "count": identical})
    print(f"  {identical:,} identical jobs: {time.monotonic() - started:.1f} s", flush=True)
    started = time.monotonic()
    created = create_jobs(conn, tenant, [JobSpec.from_document(varied(n))
                                         for n in range(count)], now=CREATED)
    for job in created[::97]:
        pause_job(conn, tenant, job.id, now=CREATED)
    print(f"  {count:,} varied jobs ({len(created[::97])} paused): "
          f"{time.monotonic() - started:.1f} s", flush=True)
    conn.execute("VACUUM (ANALYZE) jobs")
    return tenant


def run_ticks(conn: psycopg.Connection[Any], now: datetime) -> None:
    while tick(conn, batch=5000, now=now).full:
        pass
    conn.execute(FINISH_RUNS)


def measure(conn: psycopg.Connection[Any], tenant: int, now: datetime,
            repeats: int) -> tuple[list[float], Forecast]:
    forecast(conn, tenant, now=now)                           # warm-up
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = forecast(conn, tenant, hours=24, now=now)
        times.append(time.perf_counter() - started)
    assert result is not None
    return times, result


def report(title: str, times: list[float], result: Forecast, identical: int,
           start: datetime) -> None:
    kolkata = ZoneInfo("Asia/Kolkata")
    print(f"\n{title}: median {statistics.median(times):.2f} s, best {min(times):.2f} s "
          f"({len(times)} runs); {result.jobs:,} jobs in {result.groups:,} groups, "
          f"{result.runs:,} runs")
    for line in lines(result, kolkata):
        if "sms-gateway" in line or line.startswith(("forecast", "no rate", "written")):
            print("  " + line)
    (sms,) = [lf for lf in result.limits if lf.name == "sms-gateway"]
    (burst,) = [w for w in sms.waves if w.start == start]
    expected = start + timedelta(seconds=(burst.runs - BURST) / RATE)
    if burst.runs < identical or burst.drained_at is None or abs(
            (burst.drained_at - expected).total_seconds()) > 1.0:
        sys.exit(f"the burst's wave is not what the arithmetic says: {burst} vs {expected}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--identical", type=int, default=480_112)
    parser.add_argument("--varied", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for line in server_lines(args.admin_url, ["shared_buffers", "work_mem"]):
        print(line)
    with fresh_database(args.admin_url, NAME) as url, psycopg.connect(url,
                                                                      autocommit=True) as conn:
        print("build:")
        tenant = build(conn, args.identical, args.varied)
        times, result = measure(conn, tenant, NOW, args.repeats)
        report("forecast at 08:30 IST, the burst half an hour ahead", times, result,
               args.identical, BURST_AT)
        # the scheduler's half hour: the varied jobs' fires written and worked, the burst
        # written queued (a tick's rows, in one statement), then five more seconds
        run_ticks(conn, BURST_AT - timedelta(seconds=1))
        conn.execute(QUEUE_BURST, {"at": BURST_AT,
                                   "deadline": BURST_AT + timedelta(hours=11)})
        conn.execute(ADVANCE_BURST)
        run_ticks(conn, NOW_QUEUED)
        conn.execute("VACUUM (ANALYZE) runs")
        times, result = measure(conn, tenant, NOW_QUEUED, args.repeats)
        report(f"forecast at 09:00:05 IST, {args.identical:,} runs queued", times, result,
               args.identical, NOW_QUEUED)


if __name__ == "__main__":
    main()
