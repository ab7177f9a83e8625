"""The 9:00 burst: a claim of normal runs beside a backlog of runs deferred to a delivery
window's opening, and the drain when the window opens (docs/schedules.md, "Delivery
windows"). In a fresh database (``crondepot_windowbench``, migrated, dropped after):
tenant A has 1,000 SMS jobs with a 09:00-21:00 window and ``480,000 x --scale`` queued runs
deferred to the opening (due in an hour, as the scheduler writes them); tenant B has 1,000
jobs without a window and 20,000 ready runs.

1. ``claim``: the worker's claim of 20 normal runs as the worker makes it
   (``queue.claim_runs``, then ``queue.claimed_windows``, the window look-up, for the runs
   of tenants with a window, asked once in 5 s a tenant; and with no look-up at all,
   interleaved), each rolled back so every call meets the same queue,
   median of ``--calls``: before A's backlog is written and with it. B's jobs have no
   window, so the look-up finds no row.
2. ``drain``: the backlog's due time moved to now (the window opens), then claims of
   ``--batch`` runs on one connection as a worker does them (claim, window look-up, each
   run checked against its window, successes recorded), for at most ``--drain-seconds``:
   runs drained a second, and the time the whole backlog would take at that rate.

    python bench/delivery_windows.py --db postgresql://postgres@127.0.0.1:5432/postgres \
        [--scale 0.1] [--calls 15] [--batch 100] [--drain-seconds 30]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import timedelta
from typing import Any

import psycopg

from common import admin_connect, fresh_database
from crondepot.job import JobSpec, create_jobs
from crondepot.queue import (
    Success,
    WindowedTenants,
    claim_runs,
    claimed_windows,
    record_successes,
)
from crondepot.tenancy.tenants import create_tenant

JOBS = 1000
WINDOWED = WindowedTenants()
WINDOW = {"from": "09:00", "to": "21:00", "days": "mon-sat", "outside": "defer"}


def _jobs(conn: psycopg.Connection[Any], tenant: int, prefix: str,
          window: dict[str, str] | None) -> list[int]:
    specs = [JobSpec.from_document({
        "key": f"{prefix}{i}", "cron": "0 9 * * *", "tz": "Asia/Kolkata",
        "target": {"type": "http", "url": "https://sms.example.com/send"},
        "delivery_window": window}) for i in range(JOBS)]
    return [job.id for job in create_jobs(conn, tenant, specs)]


def _runs(conn: psycopg.Connection[Any], tenant: int, jobs: list[int], count: int,
          tag: str, ready_in: str) -> None:
    """``count`` queued runs over ``jobs``, available ``ready_in`` from now (an interval)."""
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "available_at) SELECT %(tag)s || g, (%(jobs)s::bigint[])[1 + g %% %(n)s], "
        "%(tenant)s, 'normal', now() - interval '12 hours', now() + %(ready)s::interval, "
        "now() + %(ready)s::interval FROM generate_series(1, %(count)s) AS g",
        {"tag": tag, "jobs": jobs, "n": len(jobs), "tenant": tenant, "count": count,
         "ready": ready_in})


def _claim(conn: psycopg.Connection[Any], size: int,
           look_up: bool = True) -> tuple[list[Any], dict[int, Any]]:
    """A claim as worker/loop.py makes it: the runs, then the windows of those whose tenant
    has one (known for 5 s a tenant, as in the worker)."""
    runs = claim_runs(conn, owner="bench", shares={"normal": size}, lend=False)
    if not look_up or not runs:
        return runs, {}
    return runs, claimed_windows(conn, WINDOWED.runs_to_check(conn, runs))


def _claims(conn: psycopg.Connection[Any], calls: int,
            look_up: bool = True) -> tuple[float, int]:
    times, got = [], 0
    for _ in range(calls):
        start = time.perf_counter()
        runs, _ = _claim(conn, 20, look_up)
        times.append(time.perf_counter() - start)
        got = len(runs)
        conn.rollback()
    return statistics.median(times) * 1000, got


def _drain(conn: psycopg.Connection[Any], batch: int, seconds: float) -> tuple[int, float]:
    drained, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        runs, windows = _claim(conn, batch)
        if not runs:
            break
        for run in runs:        # the worker's guard, as execute.py checks each run
            window = windows.get(run.job_id)
            if window is not None:
                window[0].opening(run.db_now, window[1])
        record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt) for r in runs])
        drained += len(runs)
    return drained, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="an admin URL (a database is created)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="of the 480,000 deferred runs (0.1: 48,000)")
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--drain-seconds", type=float, default=30.0)
    args = parser.parse_args()
    deferred = int(480_000 * args.scale)
    with fresh_database(args.db, "crondepot_windowbench") as url, admin_connect(url) as conn:
        a, b = create_tenant(conn, "bank-a").id, create_tenant(conn, "bank-b").id
        windowed, plain = _jobs(conn, a, "sms-", WINDOW), _jobs(conn, b, "mail-", None)
        _runs(conn, b, plain, 20_000, "b-", "-1 minute")
        conn.execute("VACUUM ANALYZE runs")
        conn.autocommit = False
        _claims(conn, args.calls)                   # warm-up
        for look_up in (False, True, False, True):  # interleaved: the look-up's own cost
            median, got = _claims(conn, args.calls, look_up)
            print(f"claim of 20 normal runs, no backlog, window look-up "
                  f"{'on' if look_up else 'off'}: median {median:.2f} ms ({got} runs)")
        conn.autocommit = True
        start = time.perf_counter()
        _runs(conn, a, windowed, deferred, "a-", "1 hour")
        print(f"{deferred:,} runs deferred to the opening, written in "
              f"{time.perf_counter() - start:.1f} s")
        conn.execute("VACUUM ANALYZE runs")
        conn.autocommit = False
        for look_up in (False, True, False, True):
            median, got = _claims(conn, args.calls, look_up)
            print(f"claim of 20 normal runs, {deferred:,} deferred, window look-up "
                  f"{'on' if look_up else 'off'}: median {median:.2f} ms ({got} runs)")
        conn.autocommit = True
        conn.execute("DELETE FROM runs WHERE tenant_id = %s", (b,))      # A's burst alone
        start = time.perf_counter()
        conn.execute("UPDATE runs SET available_at = now() - interval '1 second', "
                     "due_at = now() - interval '1 second' WHERE tenant_id = %s", (a,))
        conn.execute("VACUUM ANALYZE runs")
        print(f"the window opens (due times moved to now): {time.perf_counter() - start:.1f} s")
        drained, took = _drain(conn, args.batch, args.drain_seconds)
        rate = drained / took if took else 0.0
        whole = timedelta(seconds=round(deferred / rate)) if rate else "n/a"
        print(f"drain, one connection, claims of {args.batch}: {drained:,} runs in {took:.1f} s, "
              f"{rate:,.0f} runs/s; the whole backlog at that rate: {whole}")


if __name__ == "__main__":
    main()
