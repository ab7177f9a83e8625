"""Ledger check benchmark: what ``crondepot verify`` costs over 2.7 million jobs and a day of runs.

The data set, built in a fresh database (``crondepot_lbench_1``, migrated with
``crondepot.db.migrate``, dropped afterwards) on the machine's PostgreSQL:

- **Jobs.** ``--jobs`` (2.7 million) reminder jobs of one tenant, created 25 hours before
  the end of the simulated day (``DAY_END``, 2026-11-05 03:30 UTC = 09:00 in Asia/Kolkata,
  the day the EMI reminders fire). The mix (``MIX``) is mostly monthly and daily timetables
  in four zones, an hourly one, and 3 % ``H 9 * * *`` jobs whose minute hashes on their own
  key. Each row looks like the API benchmark's jobs (an http target, a ~140-byte payload,
  keys like ``bank42:48213:emi``), written with one ``INSERT ... SELECT generate_series``
  per timetable; ``next_nominal_at`` is the first fire after the creation.
- **A day of runs.** Written by crondepot's own scheduler tick
  (``crondepot.scheduler.tick.tick`` with an injected ``now``), so every row is the one a
  scheduler writes: ``run_id = "{job_id}:{unix seconds of nominal}"``, and every job ends
  with ``next_nominal_at`` = its first fire after ``DAY_END``. Between the ticks, in the
  simulated day: 3,000 jobs are cancelled (``cancel_job``) at 10:00 UTC and 300 have
  their cron edited (``update_job``; each leaves a row in ``job_timetables``) at 12:00 and
  12:10 UTC; after each stage the runs already due are marked done as workers would
  (``succeeded``, one job in a thousand ``dead``). The 09:00 IST runs of ``DAY_END`` are
  left ``queued``. About 1.24 million rows at 2.7 M jobs.
- Not built: older runs (the 29 days a retention of 30 would keep). ``verify`` reaches the
  rows of its window only, by index probes on ``runs_job (job_id, nominal_at)``; older rows
  make that index deeper and larger, not the probes more numerous.

Measured, after ``VACUUM (ANALYZE)`` and a ``CHECKPOINT``: ``crondepot.scheduler.ledger.verify(conn,
since=DAY_END - window, until=DAY_END, now=DAY_END)`` for windows of 5 min, 15 min, 1 h and
24 h, ``--repeats`` times each (median reported), after one warm-up check. Each check is
timed as a whole and by statement (the connection is wrapped so each ``execute`` is timed);
"Python" is the rest (computing fires, expanding ``H`` per job). The CPU of the check's
server backend (psutil) is reported beside its wall time; then every check again without
parallel workers, so that the backend's CPU (by statement) is all the server does for it:
the steadier figure on a shared machine. Each check must report clean, with as many fires
as there are rows in the window; then 3 rows are deleted and a second row added for one
fire, and the 5-minute and 24-hour checks must report exactly 3 unaccounted and 1
duplicated (the rows are restored afterwards).

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/ledger.py                    # 2.7 M jobs, a day of runs (build 3-11 min)
    python bench/ledger.py --quick            # 50,000 jobs, under a minute
    python bench/ledger.py --jobs 500000 --repeats 5
    python bench/ledger.py --keep             # leave crondepot_lbench_keep for later runs
    python bench/ledger.py --reuse            # measure crondepot_lbench_keep again, no build
    python bench/ledger.py --drop             # drop crondepot_lbench_keep

Figures are printed, never asserted (the correctness checks excepted: a wrong count stops
the run); docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar, cast

import psutil  # type: ignore[import-untyped]
import psycopg
from psycopg.conninfo import make_conninfo

from common import (
    DEFAULT_ADMIN_URL,
    BenchDatabases,
    admin_connect,
    run_interruptibly,
    server_lines,
)
from crondepot.db import Q, migrate
from crondepot.job.store import cancel_job, get_job, update_job
from crondepot.scheduler.ledger import Report, verify
from crondepot.scheduler.tick import tick
from crondepot.timetable import Timetable, uses_hash

FULL_JOBS = 2_700_000
QUICK_JOBS = 50_000
TENANT = 1
BATCH = 5000
KEEP_NAME = "crondepot_lbench_keep"
MB = 1024 * 1024

DAY_END = datetime(2026, 11, 5, 3, 30, tzinfo=UTC)     # 09:00 Asia/Kolkata on the 5th
CREATED = DAY_END - timedelta(hours=25)
CANCEL_AT = datetime(2026, 11, 4, 10, 0, tzinfo=UTC)
EDITS_AT = (datetime(2026, 11, 4, 12, 0, tzinfo=UTC), datetime(2026, 11, 4, 12, 10, tzinfo=UTC))

# (kind, cron, zone, share of the jobs). Keys are "bank42:{n}:{kind}".
MIX: list[tuple[str, str, str, float]] = [
    ("emi", "0 9 5 * *", "Asia/Kolkata", 0.20),        # EMI due on the 5th, 09:00 IST
    ("bill", "30 9 * * *", "Asia/Kolkata", 0.15),      # daily bill reminder
    ("renewal", "0 10 1 * *", "Asia/Kolkata", 0.30),   # renewals on the 1st
    ("card", "0 9 20 * *", "Asia/Kolkata", 0.20),      # card statement on the 20th
    ("abroad", "0 9 * * *", "Asia/Dubai", 0.03),       # customers abroad, daily
    ("uk", "0 8 1 * *", "Europe/London", 0.088),
    ("sync", "0 * * * *", "UTC", 0.002),               # hourly
    ("nudge", "H 9 * * *", "Asia/Kolkata", 0.03),      # minute hashed on the job's key
]
# At 2.7 M jobs (scaled down with --jobs, at least a few each):
CANCELS = {"bill": 1500, "emi": 1000, "sync": 500}                  # at CANCEL_AT
EDITS = [("bill", "0 18 * * *", 200), ("sync", "30 * * * *", 100)]  # at EDITS_AT[0], [1]

WINDOWS = [("5 min", timedelta(minutes=5)), ("15 min", timedelta(minutes=15)),
           ("1 h", timedelta(hours=1)), ("24 h", timedelta(hours=24))]

TARGET = ('{"type": "http", "url": "https://notify.bank42.example/v1/reminders", '
          '"timeout_s": 10, "dedupes": true}')
PAYLOAD = """jsonb_build_object(
    'phone', '+91' || (9800000000 + (g * 7919) %% 199999999), 'template', %(kind)s::text,
    'amount', 1000 + (g * 37) %% 90000, 'currency', 'INR',
    'account', 'XXXX' || lpad((g %% 10000)::text, 4, '0'),
    'lang', CASE WHEN g %% 3 = 0 THEN 'en' ELSE 'hi' END)"""

INSERT_JOBS = f"""
    INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, target, payload,
                      created_at, updated_at)
    SELECT {TENANT}, 'bank42:' || g || ':' || %(kind)s, %(cron)s, %(tz)s, %(first)s, %(first)s,
           '{TARGET}', {PAYLOAD}, %(created)s, %(created)s
    FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS g
"""
INSERT_HASHED_JOBS = f"""
    INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, target, payload,
                      created_at, updated_at)
    SELECT {TENANT}, 'bank42:' || g || ':' || %(kind)s, %(cron)s, %(tz)s, f.first, f.first,
           '{TARGET}', {PAYLOAD}, %(created)s, %(created)s
    FROM unnest(%(gs)s::bigint[], %(firsts)s::timestamptz[]) AS f(g, first)
"""
# Workers' work, done at once: the runs due before a moment are finished.
FINISH_RUNS = """
    UPDATE runs
    SET status = CASE WHEN job_id %% 1000 = 7 THEN 'dead' ELSE 'succeeded' END,
        attempt = CASE WHEN job_id %% 1000 = 7 THEN 6 ELSE 1 END,
        first_claimed_at = due_at + interval '1 second',
        started_at = due_at + interval '1 second',
        finished_at = due_at + interval '2 seconds',
        last_error = CASE WHEN job_id %% 1000 = 7 THEN 'HTTP 503 from the SMS gateway' END,
        error_class = CASE WHEN job_id %% 1000 = 7 THEN 'http_5xx' END,
        updated_at = due_at + interval '2 seconds'
    WHERE status = 'queued' AND due_at < %(before)s
"""


# --------------------------------------------------------------------------- the data set

@dataclass
class Build:
    jobs: int = 0
    hashed_jobs: int = 0
    cancelled: int = 0
    edited: int = 0
    runs: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)   # table: (heap, indexes)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        print(f"  {name} ...", end=" ", flush=True)
        started = time.monotonic()
        yield
        self.seconds[name] = elapsed = time.monotonic() - started
        print(f"{elapsed:.1f}s", flush=True)


def first_fire(cron: str, tz: str, hash_key: str = "") -> datetime:
    (fire,) = Timetable(cron, tz, hash_key=hash_key).next_fires(CREATED, 1)
    return fire


def scaled(count: int, jobs: int) -> int:
    return max(5, round(count * jobs / FULL_JOBS))


def insert_jobs(conn: psycopg.Connection[Any], jobs: int) -> dict[str, range]:
    """The mix's jobs; the ids of each kind (one statement per kind, so they are
    consecutive)."""
    ids: dict[str, range] = {}
    low = 1
    for i, (kind, cron, tz, share) in enumerate(MIX):
        count = jobs - low + 1 if i == len(MIX) - 1 else round(jobs * share)
        high = low + count - 1
        params: dict[str, Any] = {"kind": kind, "cron": cron, "tz": tz, "created": CREATED}
        if uses_hash(cron):
            gs = list(range(low, high + 1))
            firsts: dict[str, datetime] = {}
            per_job = []
            for g in gs:
                expanded = Timetable(cron, tz, hash_key=f"bank42:{g}:{kind}").expanded
                if expanded not in firsts:
                    firsts[expanded] = first_fire(expanded, tz)
                per_job.append(firsts[expanded])
            conn.execute(INSERT_HASHED_JOBS, {**params, "gs": gs, "firsts": per_job})
        else:
            conn.execute(INSERT_JOBS, {**params, "low": low, "high": high,
                                       "first": first_fire(cron, tz)})
        row = conn.execute("SELECT currval(pg_get_serial_sequence('jobs', 'id'))").fetchone()
        assert row is not None
        ids[kind] = range(row[0] - count + 1, row[0] + 1)
        low = high + 1
    return ids


def drain(conn: psycopg.Connection[Any], now: datetime) -> int:
    """Ticks at ``now`` until nothing is due; the rows written."""
    written = 0
    while True:
        result = tick(conn, batch=BATCH, now=now)
        written += result.inserted
        if not result.full:
            return written


def picks(ids: range, count: int, offset: int) -> list[int]:
    """``count`` ids spread over ``ids`` (every ``stride``-th one, from ``offset``)."""
    stride = max(1, len(ids) // count)
    return [ids[(offset + k * stride) % len(ids)] for k in range(count)]


def build(url: str, jobs: int) -> Build:
    result = Build(jobs=jobs)
    with admin_connect(url) as conn:
        with result.step(f"{jobs:,} jobs (INSERT ... SELECT)"):
            ids = insert_jobs(conn, jobs)
            result.hashed_jobs = sum(len(ids[k]) for k, c, _, _ in MIX if uses_hash(c))
        with result.step("VACUUM (ANALYZE) jobs"):
            conn.execute("VACUUM (ANALYZE) jobs")
        cancels = sum(scaled(count, jobs) for count in CANCELS.values())
        with result.step(f"ticks to {CANCEL_AT:%H:%M} UTC, {cancels:,} cancels"):
            result.runs += drain(conn, CANCEL_AT)
            conn.execute(FINISH_RUNS, {"before": CANCEL_AT})
            for kind, count in CANCELS.items():
                for job_id in picks(ids[kind], scaled(count, jobs), 0):
                    cancel_job(conn, TENANT, job_id, now=CANCEL_AT)
                    result.cancelled += 1
        with result.step("ticks and edits of cron at 12:00 and 12:10 UTC"):
            for at, (kind, cron, count) in zip(EDITS_AT, EDITS, strict=True):
                result.runs += drain(conn, at)
                conn.execute(FINISH_RUNS, {"before": at})
                for job_id in picks(ids[kind], scaled(count, jobs), 1):
                    job = get_job(conn, TENANT, job_id)
                    update_job(conn, TENANT, job_id, {"cron": cron}, version=job.version,
                               now=at)
                    result.edited += 1
        with result.step(f"ticks to {DAY_END:%Y-%m-%d %H:%M} UTC"):
            result.runs += drain(conn, DAY_END)
            conn.execute(FINISH_RUNS, {"before": DAY_END})
        with result.step("VACUUM (ANALYZE), CHECKPOINT"):
            conn.execute("VACUUM (ANALYZE)")
            conn.execute("CHECKPOINT")
        result.sizes = table_sizes(conn)
        row = conn.execute("SELECT count(*) FROM runs").fetchone()
        assert row is not None
        result.runs = int(row[0])
    return result


def table_sizes(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, int]]:
    sizes = {}
    for table in ("jobs", "runs", "job_timetables"):
        row = conn.execute("SELECT pg_table_size(%s), pg_indexes_size(%s)",
                           (table, table)).fetchone()
        assert row is not None
        sizes[table] = (int(row[0]), int(row[1]))
    return sizes


# --------------------------------------------------------------------------- measuring

class TimedConnection:
    """The connection ``verify`` is given: each ``execute`` timed under its query's name
    (execute returns once the rows are fetched: a client-side cursor), in wall seconds and
    in CPU seconds of the server backend."""

    NAMES: ClassVar[dict[str, str]] = {
        Q.ledger_timetables: "timetables", Q.ledger_hashed_jobs: "hashed jobs",
        Q.ledger_fires: "fires"}

    def __init__(self, conn: psycopg.Connection[Any], backend: Any) -> None:
        self.conn = conn
        self.backend = backend
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def transaction(self) -> Any:
        return self.conn.transaction()

    def execute(self, query: Any, params: Any = None) -> Any:
        name = self.NAMES.get(query, "other")
        cpu = cpu_seconds(self.backend)
        started = time.perf_counter()
        cursor = self.conn.execute(query, params)
        self.seconds[name] += time.perf_counter() - started
        self.cpu[name] += cpu_seconds(self.backend) - cpu
        return cursor


def cpu_seconds(process: Any) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


@dataclass
class Check:
    report: Report
    seconds: float
    statements: dict[str, float]       # wall seconds by statement
    statements_cpu: dict[str, float]   # server backend CPU seconds by statement
    backend_cpu: float
    client_cpu: float

    @property
    def python(self) -> float:
        return self.seconds - sum(self.statements.values())


def check(conn: psycopg.Connection[Any], backend: Any, window: timedelta,
          listed: int = 0) -> Check:
    timed = TimedConnection(conn, backend)
    cpu_before, client_before = cpu_seconds(backend), time.process_time()
    started = time.perf_counter()
    report = verify(cast(psycopg.Connection[Any], timed), since=DAY_END - window,
                    until=DAY_END, now=DAY_END, listed=listed)
    seconds = time.perf_counter() - started
    return Check(report=report, seconds=seconds, statements=dict(timed.seconds),
                 statements_cpu=dict(timed.cpu), backend_cpu=cpu_seconds(backend) - cpu_before,
                 client_cpu=time.process_time() - client_before)


def rows_in(conn: psycopg.Connection[Any], window: timedelta) -> int:
    row = conn.execute("SELECT count(*) FROM runs WHERE nominal_at BETWEEN %s AND %s",
                       (DAY_END - window, DAY_END)).fetchone()
    assert row is not None
    return int(row[0])


def measure(url: str, repeats: int, serial: bool) -> dict[str, list[Check]]:
    """``repeats`` checks per window; ``serial``: without parallel workers, so that the
    backend's CPU is all the server does for the check."""
    checks: dict[str, list[Check]] = {}
    with psycopg.connect(url, autocommit=True, application_name="bench-ledger") as conn:
        if serial:
            conn.execute("SET max_parallel_workers_per_gather = 0")
        backend = psutil.Process(conn.info.backend_pid)
        warm = check(conn, backend, WINDOWS[-1][1])
        print(f"  warm-up (24 h): {warm.seconds:.2f}s, {warm.report.fires:,} fires", flush=True)
        for name, window in WINDOWS:
            checks[name] = [check(conn, backend, window) for _ in range(repeats)]
            expected = rows_in(conn, window)
            for c in checks[name]:
                r = c.report
                if not r.clean or r.pending or r.fires != expected:
                    raise RuntimeError(f"{name}: expected {expected:,} fires, clean, none "
                                       f"pending; got {r.document()}")
            print(f"  {name}: {', '.join(f'{c.seconds:.2f}s' for c in checks[name])} "
                  f"({checks[name][0].report.fires:,} fires, clean)", flush=True)
    return checks


def tamper(url: str) -> list[str]:
    """Delete 3 rows and add a second row for one fire: the checks must see exactly that.
    The rows are put back afterwards."""
    lines = []
    with psycopg.connect(url, autocommit=True) as conn:
        backend = psutil.Process(conn.info.backend_pid)
        gone = [r[0] for r in conn.execute(
            "SELECT run_id FROM runs WHERE nominal_at = %s ORDER BY run_id LIMIT 3",
            (DAY_END,))]
        conn.execute("CREATE TEMP TABLE gone AS SELECT * FROM runs WHERE run_id = ANY(%s)",
                     (gone,))
        conn.execute("DELETE FROM runs WHERE run_id = ANY(%s)", (gone,))
        twin = conn.execute(
            "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
            "available_at) SELECT run_id || ':twin', job_id, tenant_id, priority, nominal_at, "
            "due_at, available_at FROM runs WHERE nominal_at = %s "
            "ORDER BY run_id DESC LIMIT 1 RETURNING run_id", (DAY_END,)).fetchone()
        assert twin is not None
        try:
            for name, window in (WINDOWS[0], WINDOWS[-1]):
                c = check(conn, backend, window, listed=10)
                r = c.report
                found = sorted(f.run_id for f in r.unaccounted)
                ok = (r.unaccounted_count == 3 and found == sorted(gone)
                      and r.duplicated_count == 1 and r.pending == 0)
                lines.append(f"  {name}: {r.unaccounted_count} unaccounted {found}, "
                             f"{r.duplicated_count} duplicated, {c.seconds:.2f}s: "
                             f"{'as expected' if ok else 'WRONG'}")
                if not ok:
                    raise RuntimeError(f"tampered {name} check: {r.document()}")
        finally:
            conn.execute("DELETE FROM runs WHERE run_id = %s", (twin[0],))
            conn.execute("INSERT INTO runs SELECT * FROM gone")
    return lines


def explain(url: str, window: timedelta) -> list[str]:
    """EXPLAIN (ANALYZE, BUFFERS) of the fires query for one window, in a transaction set
    up as verify sets up its own (fires computed as verify computes them)."""
    from crondepot.scheduler import ledger

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute(Q.repeatable_read)
        conn.execute(Q.ledger_no_jit)
        scope = {"tenant": None, "since": DAY_END - window, "until": DAY_END}
        params = {**scope, **ledger._fires(conn, scope), "limit": 0}
        return [r[0] for r in conn.execute(
            b"EXPLAIN (ANALYZE, BUFFERS) " + Q.ledger_fires.encode(), params)]


# --------------------------------------------------------------------------- report

def print_build(b: Build) -> None:
    print(f"\nData set: {b.jobs:,} jobs ({b.hashed_jobs:,} with H, {b.cancelled:,} cancelled, "
          f"{b.edited:,} edited: as many job_timetables rows), {b.runs:,} runs")
    for table, (heap, index) in b.sizes.items():
        print(f"  {table}: {heap / MB:,.0f} MB + indexes {index / MB:,.0f} MB")
    total = sum(b.seconds.values())
    print(f"  built in {total:.0f}s: " + ", ".join(f"{k} {v:.0f}s" for k, v in b.seconds.items()))


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def median(values: list[float]) -> float:
    return statistics.median(values)


def print_table(checks: dict[str, list[Check]], repeats: int) -> None:
    print(f"\ncrondepot.scheduler.ledger.verify, window ending {DAY_END:%Y-%m-%d %H:%M} UTC "
          f"(09:00 Asia/Kolkata), median of {repeats} (each column its own median):")
    head = (f"{'window':>7} {'fires':>10} {'wall s':>7} {'min s':>6} {'max s':>6} "
            f"{'timetables q':>12} {'H jobs q':>8} {'fires q':>7} {'Python':>6} "
            f"{'PG CPU s':>8} {'py CPU s':>8} {'us/fire':>7}")
    print(head)
    print("-" * len(head))
    for name, cs in checks.items():
        fires = cs[0].report.fires
        wall = median([c.seconds for c in cs])

        def step(key: str, cs: list[Check] = cs) -> float:
            return median([c.statements.get(key, 0.0) for c in cs])

        print(f"{name:>7} {fires:>10,} {wall:>7.2f} {min(c.seconds for c in cs):>6.2f} "
              f"{max(c.seconds for c in cs):>6.2f} {step('timetables'):>12.2f} "
              f"{step('hashed jobs'):>8.2f} {step('fires'):>7.2f} "
              f"{median([c.python for c in cs]):>6.2f} "
              f"{median([c.backend_cpu for c in cs]):>8.2f} "
              f"{median([c.client_cpu for c in cs]):>8.2f} "
              f"{wall / fires * 1e6 if fires else 0:>7.1f}")
    print("  (statement columns: wall seconds of each execute, sending the arrays and "
          "fetching included; Python: the rest of the check; PG CPU: the check's server "
          "backend, parallel workers not included)")


def print_cpu_table(checks: dict[str, list[Check]], repeats: int) -> None:
    print(f"\nThe same checks without parallel workers (max_parallel_workers_per_gather = 0): "
          f"CPU seconds, server backend by statement and this process, median of {repeats}:")
    head = (f"{'window':>7} {'fires':>10} {'wall s':>7} {'timetables q':>12} {'H jobs q':>8} "
            f"{'fires q':>7} {'PG CPU s':>8} {'py CPU s':>8} {'CPU s':>6} {'CPU us/fire':>11}")
    print(head)
    print("-" * len(head))
    for name, cs in checks.items():
        fires = cs[0].report.fires
        total = median([c.backend_cpu + c.client_cpu for c in cs])

        def step(key: str, cs: list[Check] = cs) -> float:
            return median([c.statements_cpu.get(key, 0.0) for c in cs])

        print(f"{name:>7} {fires:>10,} {median([c.seconds for c in cs]):>7.2f} "
              f"{step('timetables'):>12.2f} {step('hashed jobs'):>8.2f} {step('fires'):>7.2f} "
              f"{median([c.backend_cpu for c in cs]):>8.2f} "
              f"{median([c.client_cpu for c in cs]):>8.2f} {total:>6.2f} "
              f"{total / fires * 1e6 if fires else 0:>11.1f}")


def server_report(admin_url: str) -> list[str]:
    lines = server_lines(admin_url, ["shared_buffers", "work_mem",
                                     "max_parallel_workers_per_gather", "jit"])
    model = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    lines.append(f"CPU: {psutil.cpu_count()} x {model}, "
                 f"{psutil.virtual_memory().total / 1024**3:.0f} GB RAM, "
                 f"python {sys.version.split()[0]}")
    return lines


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help=f"admin URL that may CREATE DATABASE (default {DEFAULT_ADMIN_URL})")
    parser.add_argument("--jobs", type=int, default=FULL_JOBS,
                        help=f"jobs in the set (default {FULL_JOBS:,})")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_JOBS:,} jobs (smoke check)")
    parser.add_argument("--repeats", type=int, default=3, help="checks per window (default 3)")
    parser.add_argument("--keep", action="store_true",
                        help=f"build into {KEEP_NAME} and leave it there")
    parser.add_argument("--reuse", action="store_true",
                        help=f"measure {KEEP_NAME} (built by --keep) without building")
    parser.add_argument("--drop", action="store_true", help=f"drop {KEEP_NAME} and exit")
    return parser.parse_args(argv)


def measure_all(url: str, repeats: int) -> None:
    print(f"\nMeasuring (load average {load()}):", flush=True)
    checks = measure(url, repeats, serial=False)
    print("Measuring again without parallel workers:", flush=True)
    serial = measure(url, repeats, serial=True)
    print(f"(load average {load()})")
    print_table(checks, repeats)
    print_cpu_table(serial, repeats)
    print("\nCorrectness on the big set (3 rows deleted, one fire given a second row):")
    for line in tamper(url):
        print(line)
    print("\nEXPLAIN (ANALYZE, BUFFERS) of the fires query, 1 h window:")
    for line in explain(url, timedelta(hours=1)):
        print(f"    {line}")


@contextlib.contextmanager
def kept_database(admin_url: str, reuse: bool) -> Iterator[str]:
    url = make_conninfo(admin_url, dbname=KEEP_NAME)
    if not reuse:
        with admin_connect(admin_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{KEEP_NAME}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{KEEP_NAME}"')
        with admin_connect(url) as conn:
            migrate(conn)
            conn.execute("INSERT INTO tenants (name, signing_secret) "
                         "VALUES ('bank42', 'whsec_bench')")
    yield url


def run(args: argparse.Namespace) -> None:
    if args.drop:
        with admin_connect(args.db) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{KEEP_NAME}" WITH (FORCE)')
        return
    jobs = QUICK_JOBS if args.quick else args.jobs
    for line in server_report(args.db):
        print(line)
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n", flush=True)
    databases = BenchDatabases(args.db, "crondepot_lbench_")
    keep = args.keep or args.reuse
    with kept_database(args.db, args.reuse) if keep else databases.fresh() as url:
        if not args.reuse:
            print("Building:", flush=True)
            print_build(build(url, jobs))
        measure_all(url, args.repeats)
    if keep:
        print(f"\nkept {KEEP_NAME} (python bench/ledger.py --drop to drop it)")


def main(argv: list[str] | None = None) -> int:
    return run_interruptibly(lambda: run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
