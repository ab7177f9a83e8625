"""Scheduler benchmark: how fast crondepot turns due jobs into runs, against a row-at-a-time tick.

What it measures, each drain in a fresh database (``crondepot_bench_<n>``, migrated with
``crondepot.db.migrate``, dropped afterwards) on the machine's PostgreSQL:

- **Drains.** ``size`` jobs due now (a reminder-service mix: mostly ``0 9 * * *``
  Asia/Kolkata, four other timetables), then ``copies`` real ``crondepot scheduler``
  processes. Wall time runs from the first process start until every job has its run and
  none is still due; runs/s = size / wall time. Also reported: first → last run written
  (``runs.created_at``, which excludes process start-up; ``created_at`` is the writing
  transaction's start, so this span leaves out the last batch's own duration), peak RSS of
  the scheduler processes (sampled every 50 ms), CPU seconds of the scheduler processes and
  of all the PostgreSQL server's processes, and WAL bytes written per run.
- **Baseline.** The same drain, same database state, with the source document's
  row-at-a-time tick written here (``baseline_tick``): batches of 500 claimed with
  ``FOR UPDATE SKIP LOCKED``, then per job one ``INSERT … ON CONFLICT DO NOTHING`` and one
  ``UPDATE`` of its next time (from croniter), one transaction per batch. It writes the
  same columns crondepot's insert writes, into the same migrated schema, and runs as
  ``copies`` processes of this file in worker mode.
- **Due query** (``--due-query``, or part of a full run): 2.7 million jobs (next runs
  spread over 30 days, a few thousand due now, some cancelled or paused), then the claim
  query ``Q.claim_due_jobs`` (batch 2000) timed 20 times, each in a transaction rolled
  back; its EXPLAIN (ANALYZE, BUFFERS); and the jobs table's size with its indexes.

Completion is polled every 20 ms with an index probe ("is any job still due?"); the runs
are counted once when it says no. (A ``count(*)`` of half a million runs every 20 ms would
take a good share of a 2-core machine away from the drain being measured.) Since a job's
runs and its advanced ``next_run_at`` commit together, "none due" means every run is in.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/scheduler.py                     # full: 10k/100k/480k x 1/3 copies + due query
    python bench/scheduler.py --quick             # 10k x 1/3 copies, under a minute
    python bench/scheduler.py --due-query         # only the 2.7 M-job due query
    python bench/scheduler.py --db postgresql://postgres@127.0.0.1:5432/postgres \\
        --sizes 10000,100000 --copies 1,3 --batch 2000

Figures are printed, never asserted; docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

import psutil  # type: ignore[import-untyped]
import psycopg
from croniter import croniter

from common import (
    DEFAULT_ADMIN_URL,
    BenchDatabases,
    admin_connect,
    compile_crondepot,
    die_with_parent,
    run_interruptibly,
    server_cpu,
    server_lines,
    wal_lsn,
)
from crondepot import next_fires
from crondepot.db import Q

BASELINE_BATCH = 500
POLL_SECONDS = 0.020
RSS_SAMPLE_SECONDS = 0.050
STOP_TIMEOUT = 15.0
DUE_QUERY_JOBS = 2_700_000
DUE_QUERY_REPEATS = 20
MB = 1024 * 1024

# (cron, zone, share of the jobs). The last entry has no share of its own: it stands in for
# any timetable whose next fire is so close that it could fire again during the drain.
MIX: list[tuple[str, str, float]] = [
    ("0 9 * * *", "Asia/Kolkata", 0.80),      # bill reminders, 9:00 a.m. IST
    ("0 9 5 * *", "Asia/Kolkata", 0.08),      # EMI due on the 5th
    ("30 10 * * 1-5", "Asia/Kolkata", 0.05),  # weekday renewal offers
    ("0 9 * * *", "Asia/Dubai", 0.04),        # customers abroad
    ("0 8 1 * *", "Europe/London", 0.03),
    ("0 21 * * *", "Asia/Kolkata", 0.0),      # stand-in
]
MIX_GUARD = timedelta(minutes=30)

BASELINE_CLAIM = """
    SELECT id, tenant_id, cron, tz, next_run_at, next_nominal_at, priority FROM jobs
    WHERE active AND NOT paused AND next_run_at <= now()
    ORDER BY next_run_at LIMIT %(batch)s
    FOR UPDATE SKIP LOCKED
"""
BASELINE_INSERT = """
    INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at,
                      status)
    VALUES (%s, %s, %s, %s, %s, %s, %s, 'queued')
    ON CONFLICT DO NOTHING
"""
BASELINE_ADVANCE = "UPDATE jobs SET next_run_at = %s, next_nominal_at = %s WHERE id = %s"

STILL_DUE = """
    SELECT EXISTS (SELECT 1 FROM jobs WHERE active AND NOT paused AND next_run_at <= now())
"""


# --------------------------------------------------------------------------- baseline tick

def baseline_next_time(cron: str, tz: str, after: datetime) -> datetime:
    """croniter read on the job's own clock, as the source document's tick does it."""
    nxt: datetime = croniter(cron, after.astimezone(ZoneInfo(tz))).get_next(datetime)
    return nxt


def baseline_tick(conn: psycopg.Connection[Any]) -> int:
    """One row-at-a-time tick: claim 500, then two statements per job, one commit."""
    with conn.transaction():
        rows = conn.execute(BASELINE_CLAIM, {"batch": BASELINE_BATCH}).fetchall()
        for job_id, tenant_id, cron, tz, due, nominal, priority in rows:
            run_id = f"{job_id}:{int(nominal.timestamp())}"
            conn.execute(BASELINE_INSERT,
                         (run_id, job_id, tenant_id, priority, nominal, due, due))
            nxt = baseline_next_time(cron, tz, nominal)
            conn.execute(BASELINE_ADVANCE, (nxt, nxt, job_id))
    return len(rows)


def baseline_worker(url: str) -> int:
    """Worker mode: tick until stopped, at once while batches come back full."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with psycopg.connect(url, autocommit=True, application_name="bench-baseline") as conn:
        while not stop.is_set():
            if baseline_tick(conn) < BASELINE_BATCH:
                stop.wait(0.05)
    return 0


# --------------------------------------------------------------------------- databases

def latest_fire(cron: str, tz: str, now: datetime) -> tuple[datetime, datetime]:
    """The last fire at or before ``now`` and the first one after it."""
    fires = next_fires(cron, tz, now - timedelta(days=40), 400)
    past = [f for f in fires if f <= now]
    after = [f for f in fires if f > now]
    return past[-1], after[0]


def mix_for(size: int, now: datetime) -> list[tuple[str, str, datetime, int]]:
    """(cron, tz, nominal, count) per timetable: every job's last fire is due, none refires.

    A timetable whose next fire is within ``MIX_GUARD`` could fire again during the drain
    (one job, two runs); its share goes to the stand-in at the end of ``MIX``.
    """
    shares: dict[tuple[str, str], float] = {}
    standin = MIX[-1][:2]
    for cron, tz, share in MIX:
        _, following = latest_fire(cron, tz, now)
        key = (cron, tz) if following - now > MIX_GUARD else standin
        shares[key] = shares.get(key, 0.0) + share
    plan: list[tuple[str, str, datetime, int]] = []
    left = size
    items = [(k, s) for k, s in shares.items() if s > 0]
    for i, ((cron, tz), share) in enumerate(items):
        count = left if i == len(items) - 1 else round(size * share)
        left -= count
        plan.append((cron, tz, latest_fire(cron, tz, now)[0], count))
    return plan


INSERT_DUE_JOBS = """
    INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, target, payload)
    SELECT 1, %(prefix)s || g, %(cron)s, %(tz)s, %(nominal)s, %(nominal)s,
           '{"type": "python", "handler": "sms.send"}',
           jsonb_build_object('customer', g, 'template', 'bill_due')
    FROM generate_series(1, %(count)s) AS g
"""


def load_due_jobs(url: str, size: int) -> list[tuple[str, str, datetime, int]]:
    """``size`` due jobs, vacuumed and analysed, then a checkpoint: the same start each time."""
    with admin_connect(url) as conn:
        row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        plan = mix_for(size, row[0])
        for i, (cron, tz, nominal, count) in enumerate(plan):
            conn.execute(INSERT_DUE_JOBS, {"prefix": f"m{i}-", "cron": cron, "tz": tz,
                                           "nominal": nominal, "count": count})
        conn.execute("VACUUM (ANALYZE) jobs")
        conn.execute("ANALYZE runs")
        conn.execute("CHECKPOINT")
    return plan


# --------------------------------------------------------------------------- processes

@dataclass
class Children:
    """Processes started for one drain, their logs, and a peak-RSS sampler."""

    popens: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)
    peak_rss: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    def start(self, argv: list[str]) -> None:
        log = tempfile.NamedTemporaryFile(prefix="crondepot-bench-", suffix=".log")  # noqa: SIM115
        env = {**os.environ, "CRONDEPOT_LOG_FORMAT": "json"}
        self.logs.append(log)
        self.popens.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            env=env, preexec_fn=die_with_parent))

    def sample_rss(self) -> None:
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        procs = [psutil.Process(p.pid) for p in self.popens]
        while not self._stop.wait(RSS_SAMPLE_SECONDS):
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    self.peak_rss = max(self.peak_rss, proc.memory_info().rss)

    def check_alive(self) -> None:
        for popen, log in zip(self.popens, self.logs, strict=True):
            if popen.poll() is not None:
                tail = Path(log.name).read_text(errors="replace")[-3000:]
                raise RuntimeError(f"process {popen.args!r} exited with {popen.returncode}:\n"
                                   f"{tail}")

    def cpu_seconds(self) -> float:
        total = 0.0
        for popen in self.popens:
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(popen.pid).cpu_times()
                total += times.user + times.system
        return total

    def stop(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(timeout=5)
        for popen in self.popens:
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        for popen in self.popens:
            try:
                popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait(timeout=STOP_TIMEOUT)
        for log in self.logs:
            log.close()


def scheduler_argv(url: str, name: str, batch: int) -> list[str]:
    return [sys.executable, "-m", "crondepot", "scheduler", "--db", url,
            "--batch", str(batch), "--name", name]


def baseline_argv(url: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--baseline-worker", "--db", url]


# --------------------------------------------------------------------------- measurements

@dataclass
class Drain:
    kind: str
    size: int
    copies: int
    wall: float = 0.0
    first_to_last: float = 0.0
    runs: int = 0
    peak_rss: int = 0
    scheduler_cpu: float = 0.0
    postgres_cpu: float = 0.0
    wal_bytes: int = 0

    @property
    def rate(self) -> float:
        return self.size / self.wall if self.wall else 0.0


def drain(databases: BenchDatabases, kind: str, size: int, copies: int, batch: int) -> Drain:
    result = Drain(kind=kind, size=size, copies=copies)
    with databases.fresh() as url:
        load_due_jobs(url, size)
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            children = Children()
            try:
                _measure(conn, url, result, children, batch)
            finally:
                children.stop()
            result.peak_rss = children.peak_rss
            _count(conn, result)
    return result


def _measure(conn: psycopg.Connection[Any], url: str, result: Drain, children: Children,
             batch: int) -> None:
    cpu_before, lsn_before = server_cpu(conn), wal_lsn(conn)
    timeout = 60 + result.size / 400
    started = time.monotonic()
    for i in range(result.copies):
        children.start(scheduler_argv(url, f"bench{i}", batch) if result.kind == "crondepot"
                       else baseline_argv(url))
    children.sample_rss()
    while True:
        row = conn.execute(STILL_DUE).fetchone()
        if row is not None and not row[0]:
            break
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{result.kind} drain of {result.size} with {result.copies} "
                               f"copies not done after {timeout:.0f}s")
        children.check_alive()
        time.sleep(POLL_SECONDS)
    result.wall = time.monotonic() - started
    result.scheduler_cpu = children.cpu_seconds()
    cpu_after = server_cpu(conn)
    result.postgres_cpu = sum(t - cpu_before.get(k, 0.0) for k, t in cpu_after.items())
    row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint",
                       (lsn_before,)).fetchone()
    assert row is not None
    result.wal_bytes = int(row[0])


def _count(conn: psycopg.Connection[Any], result: Drain) -> None:
    row = conn.execute("SELECT count(*), count(DISTINCT run_id), "
                       "extract(epoch FROM max(created_at) - min(created_at))::float8 "
                       "FROM runs").fetchone()
    assert row is not None
    result.runs, distinct, result.first_to_last = row[0], row[1], row[2] or 0.0
    if result.runs != result.size or distinct != result.size:
        raise RuntimeError(f"{result.kind}: expected {result.size} runs, found {result.runs} "
                           f"({distinct} distinct)")


def startup_cpu(databases: BenchDatabases, batch: int) -> tuple[float, int]:
    """CPU seconds and RSS of one scheduler process that starts on an empty database."""
    with databases.fresh() as url:
        children = Children()
        try:
            children.start(scheduler_argv(url, "idle", batch))
            children.sample_rss()
            time.sleep(3.0)
            children.check_alive()
            return children.cpu_seconds(), children.peak_rss
        finally:
            children.stop()


# --------------------------------------------------------------------------- due query

INSERT_MANY_JOBS = """
    INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, active, paused,
                      target, payload)
    SELECT 1, 'c' || g, '0 9 * * *', 'Asia/Kolkata', t.at, t.at, g %% 20 <> 1, g %% 100 = 2,
           '{"type": "python", "handler": "sms.send"}',
           jsonb_build_object('customer', g, 'template', 'bill_due')
    FROM generate_series(1, %(count)s) AS g,
         LATERAL (SELECT CASE WHEN g %% 900 = 0   -- 3,000 due, up to ten minutes late
                              THEN now() - make_interval(secs => g %% 600)
                              ELSE now() + make_interval(secs => (g::bigint * 7919) %% 2592000)
                         END AS at) AS t
"""


@dataclass
class DueQuery:
    jobs: int
    due: int
    timings_ms: list[float]        # client: execute + fetch of the claimed rows
    server_ms: list[float]         # server: EXPLAIN ANALYZE execution time
    plan: list[str]
    table_bytes: int
    index_bytes: int



def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def due_query(databases: BenchDatabases, batch: int = 2000) -> DueQuery:
    with databases.fresh() as url, admin_connect(url) as conn:
        print(f"  loading {DUE_QUERY_JOBS:,} jobs ...", flush=True)
        conn.execute(INSERT_MANY_JOBS, {"count": DUE_QUERY_JOBS})
        conn.execute("VACUUM (ANALYZE) jobs")
        params = {"now": None, "batch": batch}
        row = conn.execute("SELECT count(*) FROM jobs WHERE active AND NOT paused "
                           "AND next_run_at <= now()").fetchone()
        assert row is not None
        due = int(row[0])
        timings = [_claim_ms(conn, params, due) for _ in range(DUE_QUERY_REPEATS + 1)][1:]
        server = [_claim_server_ms(conn, params) for _ in range(DUE_QUERY_REPEATS)]
        plan: list[str] = []
        with contextlib.suppress(_Rollback), conn.transaction():
            plan = [r[0] for r in conn.execute(
                b"EXPLAIN (ANALYZE, BUFFERS) " + Q.claim_due_jobs.encode(), params)]
            raise _Rollback
        row = conn.execute("SELECT pg_total_relation_size('jobs'), "
                           "pg_indexes_size('jobs')").fetchone()
        assert row is not None
        return DueQuery(jobs=DUE_QUERY_JOBS, due=due, timings_ms=timings, server_ms=server,
                        plan=plan, table_bytes=int(row[0]), index_bytes=int(row[1]))


def _claim_ms(conn: psycopg.Connection[Any], params: dict[str, Any], due: int) -> float:
    """One claim, executed and fetched, then rolled back; the first call warms the cache."""
    with contextlib.suppress(_Rollback), conn.transaction():
        started = time.perf_counter()
        claimed = conn.execute(Q.claim_due_jobs, params).fetchall()
        elapsed = (time.perf_counter() - started) * 1000
        if len(claimed) != min(params["batch"], due):
            raise RuntimeError(f"claimed {len(claimed)} of {due} due jobs")
        raise _Rollback
    return elapsed


def _claim_server_ms(conn: psycopg.Connection[Any], params: dict[str, Any]) -> float:
    """The claim's execution time inside the server (no transfer to the client)."""
    with contextlib.suppress(_Rollback), conn.transaction():
        row = conn.execute(b"EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) "
                           + Q.claim_due_jobs.encode(), params).fetchone()
        assert row is not None
        elapsed = float(row[0][0]["Execution Time"])
        raise _Rollback
    return elapsed


class _Rollback(Exception):
    """Raised inside ``conn.transaction()`` to roll the claim back."""


# --------------------------------------------------------------------------- report

def server_report(admin_url: str) -> list[str]:
    lines = server_lines(admin_url, ["fsync", "synchronous_commit", "shared_buffers",
                                     "wal_level", "full_page_writes", "max_wal_size",
                                     "checkpoint_timeout"])
    lines[-1] += " (the machine's defaults)"
    lines.append(f"nproc: {os.cpu_count()} (nproc {_nproc()}), python {sys.version.split()[0]}")
    return lines


def _nproc() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        return subprocess.run(["nproc"], capture_output=True, text=True, timeout=10,
                              check=True).stdout.strip()
    return "?"


def print_table(drains: list[Drain]) -> None:
    by_key = {(d.kind, d.size, d.copies): d for d in drains}
    head = (f"{'size':>8} {'copies':>6} {'crondepot runs/s':>16} {'baseline runs/s':>15} "
            f"{'ratio':>6} {'wall s':>7} {'first->last s':>13} {'peak RSS MB':>11}")
    print(head)
    print("-" * len(head))
    for d in drains:
        if d.kind != "crondepot":
            continue
        base = by_key.get(("baseline", d.size, d.copies))
        base_rate = f"{base.rate:,.0f}" if base else "-"
        ratio = f"{d.rate / base.rate:.1f}x" if base and base.rate else "-"
        print(f"{d.size:>8,} {d.copies:>6} {d.rate:>16,.0f} {base_rate:>15} {ratio:>6} "
              f"{d.wall:>7.2f} {d.first_to_last:>13.2f} {d.peak_rss / MB:>11.1f}")


def print_costs(drains: list[Drain]) -> None:
    print("\nWhere the time goes (CPU seconds over the whole drain, start-up included; "
          "PostgreSQL = every process of the server; CPU busy = both / (wall x cores))")
    head = (f"{'kind':>9} {'size':>8} {'copies':>6} {'wall s':>7} {'sched CPU s':>11} "
            f"{'PG CPU s':>8} {'sched us/run':>12} {'PG us/run':>9} {'WAL B/run':>9} "
            f"{'WAL MB':>7} {'CPU busy':>8}")
    print(head)
    print("-" * len(head))
    cores = os.cpu_count() or 1
    for d in drains:
        busy = (d.scheduler_cpu + d.postgres_cpu) / (d.wall * cores) * 100
        print(f"{d.kind:>9} {d.size:>8,} {d.copies:>6} {d.wall:>7.2f} {d.scheduler_cpu:>11.2f} "
              f"{d.postgres_cpu:>8.2f} {d.scheduler_cpu / d.size * 1e6:>12.1f} "
              f"{d.postgres_cpu / d.size * 1e6:>9.1f} {d.wal_bytes / d.size:>9.0f} "
              f"{d.wal_bytes / MB:>7.1f} {busy:>7.0f}%")


def print_due_query(result: DueQuery) -> None:
    print(f"\nDue query with {result.jobs:,} jobs ({result.due:,} due now), "
          f"Q.claim_due_jobs batch 2000, {len(result.timings_ms)} runs, rolled back:")
    for label, values in (("client (execute + fetch 2000 rows)", result.timings_ms),
                          ("server (EXPLAIN ANALYZE execution)", result.server_ms)):
        print(f"  {label}: median {statistics.median(values):.2f} ms, "
              f"p95 {p95(values):.2f} ms, max {max(values):.2f} ms")
    print(f"  jobs table with indexes: {result.table_bytes / MB:,.0f} MB "
          f"(indexes {result.index_bytes / MB:,.0f} MB)")
    print("  EXPLAIN (ANALYZE, BUFFERS):")
    for line in result.plan:
        print(f"    {line}")


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help=f"admin URL that may CREATE DATABASE (default {DEFAULT_ADMIN_URL})")
    parser.add_argument("--sizes", default="10000,100000,480000",
                        help="due jobs per drain, comma-separated")
    parser.add_argument("--copies", default="1,3", help="scheduler copies, comma-separated")
    parser.add_argument("--batch", type=int, default=2000, help="crondepot --batch (default 2000)")
    parser.add_argument("--quick", action="store_true",
                        help="10,000 jobs with 1 and 3 copies only (smoke check)")
    parser.add_argument("--due-query", action="store_true",
                        help="only the due-query latency with 2.7 million jobs")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline drains")
    parser.add_argument("--no-due-query", action="store_true",
                        help="skip the 2.7 M-job due query in a full run")
    parser.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> None:
    databases = BenchDatabases(args.db, "crondepot_bench_")
    compile_crondepot()     # the scheduler processes start as an installed release would
    for line in server_report(args.db):
        print(line)
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n", flush=True)
    if args.due_query:
        print_due_query(due_query(databases))
        return
    sizes = [10_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    copies = [1, 3] if args.quick else [int(c) for c in args.copies.split(",")]
    kinds = ["crondepot"] if args.no_baseline else ["crondepot", "baseline"]
    drains: list[Drain] = []
    for size in sizes:
        for n in copies:
            for kind in kinds:
                print(f"  {kind}: {size:,} due jobs, {n} cop{'y' if n == 1 else 'ies'} ...",
                      end=" ", flush=True)
                d = drain(databases, kind, size, n, args.batch)
                print(f"{d.wall:.2f}s, {d.rate:,.0f} runs/s", flush=True)
                drains.append(d)
    idle_cpu, idle_rss = startup_cpu(databases, args.batch)
    print()
    print_table(drains)
    print_costs(drains)
    print(f"\nOne scheduler process starting on an empty database: {idle_cpu:.2f} CPU s, "
          f"{idle_rss / MB:.1f} MB RSS (start-up cost included in 'sched CPU s' above)")
    if not (args.quick or args.no_due_query):
        print_due_query(due_query(databases))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.baseline_worker:
        return baseline_worker(args.db)
    return run_interruptibly(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
