"""Forecast check: the forecast's drain time and deadline passes against a real burst.

Issue 34 asks for the forecast drain time to fall within 5 % of the measured one. The
full-day benchmark's drain is bound by its workers on this machine (148/s of a 450/s
bucket at ``--scale 0.1``), so the bucket the forecast models is not what it measures.
Here the bucket is the bottleneck by construction:

- a fresh database ``crondepot_fcheck`` (migrated, dropped afterwards); tenant ``bank42``
  with the shared bucket ``sms-gateway`` at ``--rate`` 20/s, ``--burst`` 20. Why 20/s: on
  this 2-core machine shared with other sessions' test suites (load 9–16), a worker's
  token take, one token per round trip below 50/s, taken one at a time per process, is
  what bounds a limited drain once many slots wait on it (two workers of 60 slots sent
  23/s through a 50/s bucket, of 20 slots 10–16/s through a 20/s one); with slots sized
  to rate × the gateway's delay, 20/s is carried with room (19.9–20.1/s sustained);
- ``bench/gateway.py`` in its own process: dedupes, answers every request ``--delay``
  (0.05–0.2 s) late, no 503s (a retry would take a second token: not a forecast matter);
- real processes: 1 ``crondepot scheduler``, 2 ``crondepot worker --concurrency 6``
  (12 slots for the 4 calls in flight at 20/s and 0.2 s);
- ``--jobs`` (2,000) identical crons due at the first whole minute at least ``--lead``
  seconds after the processes are up, on ``sms-gateway``, an http target on the gateway,
  misfire ``skip_after`` one hour; of them ``--urgent`` (0) with ``skip_after``
  ``--urgent-seconds`` (40) instead, created after the others.

Before the burst (the jobs written, the processes up), ``forecast(conn, bank42, hours=1)``
(the function behind ``crondepot forecast`` and ``GET /v1/forecast``) gives the drain end
and the runs past deadline. Then the burst runs; when no run of it is queued or running,
the measured figures: the drain end is the gateway's arrival of the last run's first call
(a call leaves as its token is taken), skipped runs are read from ``runs``. Printed: both,
the drain times from the due minute, and their difference in per cent (goal: within 5 %).

    python bench/forecast_check.py                       # 2,000 runs at 20/s, ~2.5 min
    python bench/forecast_check.py --urgent 1200         # 1,200 of them due within 40 s

Figures are printed, never asserted; docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import DEFAULT_ADMIN_URL, admin_connect, fresh_database, run_interruptibly
from crondepot.forecast.report import forecast
from crondepot.forecast.text import wave_line
from crondepot.job import JobSpec, create_jobs
from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.limits.buckets import set_limit
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant
from fullday import crondepot, start_gateway, wait_for
from workers import Children, load_line

DB_NAME = "crondepot_fcheck"
LIMIT = "sms-gateway"
WORKERS = 2
PROGRESS_SECONDS = 10


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--urgent", type=int, default=0, help="of --jobs, those due within "
                   "--urgent-seconds")
    p.add_argument("--urgent-seconds", type=int, default=40)
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--burst", type=int, default=20)
    p.add_argument("--concurrency", type=int, default=6, help="slots per worker")
    p.add_argument("--delay", default="0.05-0.2", help="the gateway's answer delay, s")
    p.add_argument("--lead", type=int, default=20, help="seconds at least before the burst")
    args = p.parse_args(argv)
    if not 0 <= args.urgent <= args.jobs:
        p.error("--urgent: from 0 to --jobs")
    return args


def start_services(url: str, concurrency: int) -> Children:
    services = Children()
    quiet = ["--retention-days", "0", "--verify-every", "0"]
    services.start(crondepot("scheduler", "--db", url, "--name", "s1", *quiet), "scheduler")
    for i in range(WORKERS):
        services.start(crondepot("worker", "--db", url, "--name", f"w{i + 1}",
                                 "--concurrency", str(concurrency), *quiet), "worker")
    return services


def make_jobs(conn: Any, tenant: int, args: argparse.Namespace, gateway: str,
              at: datetime) -> set[int]:
    """The burst's jobs, due at ``at`` (UTC): the unhurried ones first, then the urgent."""
    target = {"type": "http", "url": f"{gateway}/sms", "timeout_s": 10, "dedupes": True}

    def spec(i: int, seconds: int) -> JobSpec:
        return JobSpec.from_document({
            "key": f"reminder-{i}", "cron": f"{at.minute} {at.hour} * * *", "tz": "UTC",
            "rate_limit": LIMIT, "target": target, "payload": {"n": i},
            "misfire": {"policy": "skip_after", "seconds": seconds}})

    calm = args.jobs - args.urgent
    ids: set[int] = set()
    for first, count, seconds in ((0, calm, 3600), (calm, args.urgent, args.urgent_seconds)):
        for low in range(first, first + count, 1000):
            specs = [spec(i, seconds) for i in range(low, min(first + count, low + 1000))]
            ids |= {job.id for job in create_jobs(conn, tenant, specs)}
    return ids


def first_calls(record: str, ids: set[int]) -> list[float]:
    """Each burst run's first call as the gateway saw it (time.time())."""
    first: dict[str, float] = {}
    with open(record, encoding="utf-8") as lines:
        for line in lines:
            arrived, _, key = line.split(" ", 2)
            key = key.strip()
            if ":" in key and int(key.split(":", 1)[0]) in ids:
                first.setdefault(key, float(arrived))
    return sorted(first.values())


def percent(forecast_s: float, measured_s: float) -> str:
    if measured_s <= 0:
        return "n/a"
    return f"{100 * (forecast_s - measured_s) / measured_s:+.1f} %"


def run(args: argparse.Namespace) -> None:
    os.environ[ALLOWLIST_ENV] = "127.0.0.1/32"      # the gateway is on loopback
    record = tempfile.NamedTemporaryFile(prefix="crondepot-fcheck-", suffix=".txt",  # noqa: SIM115
                                         delete=False).name
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(fresh_database(args.admin_url, DB_NAME))
        stack.callback(Path(record).unlink, missing_ok=True)
        gateway, base = start_gateway(record, 0.0, args.delay)
        stack.callback(gateway.stop)
        conn = stack.enter_context(admin_connect(url))
        bank = create_tenant(conn, "bank42").id
        set_limit(conn, LIMIT, args.rate, args.burst)
        grant(conn, bank, limits=[LIMIT])
        services = start_services(url, args.concurrency)
        stack.callback(services.stop)
        wait_for(lambda: _workers_up(conn), 60, "the workers", services)
        now = _db_now(conn)
        at = (now + timedelta(seconds=args.lead + 59)).replace(second=0, microsecond=0)
        made = time.monotonic()
        ids = make_jobs(conn, bank, args, base, at)
        print(f"{len(ids):,} jobs due at {at:%H:%M:%S} UTC ({args.urgent:,} within "
              f"{args.urgent_seconds} s, the rest within 1 h) made in "
              f"{time.monotonic() - made:.1f} s; `{LIMIT}` {args.rate:g}/s, burst "
              f"{args.burst}; {WORKERS} workers × {args.concurrency} slots; gateway "
              f"{args.delay} s late")

        result = forecast(conn, bank, hours=1)
        (limit,) = [lf for lf in result.limits if lf.name == LIMIT]
        waves = [w for w in limit.waves if w.runs]
        wave = max(waves, key=lambda w: w.runs)
        if _db_now(conn) >= at or wave.drained_at is None:
            raise RuntimeError(f"the forecast came too late or drains nothing: {waves}")
        print(f"forecast at {result.now:%H:%M:%S} ({result.seconds:.2f} s): "
              + wave_line(limit, wave, UTC))

        expected = wave.drained_at + timedelta(seconds=120)
        services.check_alive()
        wait_for(Progress(conn, ids), (expected - _db_now(conn)).total_seconds(),
                 "the burst's end", services)
        statuses = dict(conn.execute(
            "SELECT status || coalesce('/' || skip_reason, ''), count(*) FROM runs "
            "WHERE job_id = ANY(%s) GROUP BY 1", (sorted(ids),)).fetchall())
        started, finished = conn.execute(
            "SELECT max(started_at), max(finished_at) FROM runs WHERE job_id = ANY(%s) "
            "AND status = 'succeeded'", (sorted(ids),)).fetchone() or (None, None)
        services.stop()
        gateway.stop()                       # writes the record
        calls = first_calls(record, ids)
        skipped = sum(n for s, n in statuses.items() if s.startswith("skipped"))
        report(at, wave.drained_at, wave.past_deadline, calls, skipped, statuses,
               started, finished)


def report(at: datetime, forecast_end: datetime, forecast_passed: int, calls: list[float],
           skipped: int, statuses: dict[str, int], started: datetime | None,
           finished: datetime | None) -> None:
    if not calls:
        print("no call reached the gateway")
        return
    due = at.timestamp()
    measured = calls[-1] - due
    predicted = (forecast_end - at).total_seconds()
    print(f"runs: {statuses}")
    print(f"first call {calls[0] - due:+.2f} s after the due minute, {len(calls):,} runs "
          "called")
    inside = [c for c in calls if calls[0] + 5 <= c <= calls[-1]]
    if len(inside) > 1:
        print(f"sustained at the gateway: {len(inside) / (calls[-1] - calls[0] - 5):.1f}/s "
              "(from the 5th second to the last first call)")
    print(f"drain end: forecast +{predicted:.1f} s, measured +{measured:.1f} s (last first "
          f"call at the gateway): {percent(predicted, measured)}")
    if started is not None and finished is not None:
        print(f"  runs table: last started_at +{(started - at).total_seconds():.1f} s, last "
              f"finished_at +{(finished - at).total_seconds():.1f} s")
    print(f"past deadline: forecast {forecast_passed:,}, measured {skipped:,} skipped")
    print(json.dumps({"forecast_drain_s": round(predicted, 2),
                      "measured_drain_s": round(measured, 2),
                      "difference": percent(predicted, measured),
                      "forecast_past_deadline": forecast_passed, "skipped": skipped}))
    print(load_line())


def _db_now(conn: Any) -> datetime:
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    value: datetime = row[0]
    return value


def _workers_up(conn: Any) -> bool:
    row = conn.execute("SELECT count(*) FROM workers").fetchone()
    return row is not None and row[0] >= WORKERS


class Progress:
    """Whether the burst has ended (every run written, none queued or running); prints
    the runs by status every PROGRESS_SECONDS meanwhile."""

    def __init__(self, conn: Any, ids: set[int]) -> None:
        self.conn, self.ids, self.printed = conn, sorted(ids), time.monotonic()

    def __call__(self) -> bool:
        counts = Counter(dict(self.conn.execute(
            "SELECT status, count(*) FROM runs WHERE job_id = ANY(%s) GROUP BY 1",
            (self.ids,)).fetchall()))
        if time.monotonic() - self.printed >= PROGRESS_SECONDS:
            self.printed = time.monotonic()
            print(f"  {_db_now(self.conn):%H:%M:%S} {dict(sorted(counts.items()))}",
                  flush=True)
        return (sum(counts.values()) >= len(self.ids)
                and counts["queued"] + counts["running"] == 0)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_interruptibly(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
