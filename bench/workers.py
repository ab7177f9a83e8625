"""Worker benchmark: end-to-end runs/s (claim → no-op target → record) against two peers, and
start lag under a steady every-second load through the real scheduler → worker pipeline.

What it measures, each in a fresh database (``crondepot_wbench_<n>``, created, migrated with
``crondepot.db.migrate`` and dropped afterwards) on the machine's PostgreSQL:

- **Drains.** ``size`` runs (default 20,000) queued and ready in one ``INSERT … SELECT`` (as
  ``tests/support/jobs.py:queued_runs`` does), each a job whose target is the no-op Python
  handler ``bench.noop`` registered by this module; then ``P`` real
  ``python -m crondepot worker --concurrency 20 --urgent-only 0 --import workers`` processes
  (P = 1, 2, 4). Done when no run is queued or running; every run must be ``succeeded`` at
  attempt 1. Wall time runs from the first process start; first→last is
  ``min(started_at)`` → ``max(finished_at)`` on the database clock (no start-up).
- **Peers, same machine, same server, same ``size``, same P.** pgqueuer (its schema installed
  with ``Queries.install()`` in a fresh, crondepot-migrated database; ``size`` jobs enqueued
  with ``Queries.enqueue``; each process one ``PgQueuer`` on a psycopg ``AsyncConnection``
  (the same driver crondepot uses), ``batch_size=10`` (its default), ``max_concurrent_tasks=20``,
  an ``async`` no-op entrypoint, uvloop as its CLI uses) and procrastinate (its schema applied
  with ``SchemaManager.apply_schema_async()``; ``size`` jobs deferred with
  ``batch_defer_async``; ``run_worker_async(concurrency=20)``, an ``async`` no-op task, LISTEN/
  NOTIFY on, jobs kept, a ``PsycopgConnector`` pool of 12 connections like crondepot's).
  Their first→last spans come from their own tables (pgqueuer's log ``picked`` →
  ``successful``; procrastinate's events ``started`` → ``succeeded``). A peer that is not
  installed is skipped with a message (``pip install pgqueuer procrastinate``).
- **Lag.** ``rate × 60`` jobs (default 8,400) ``* * * * *`` with ``spread.seconds: 60`` and a
  distinct key each, created with ``crondepot.job.create_jobs`` (so the hash spreads them
  over the minute: about ``rate`` runs due each second), ``schedulers`` real
  ``crondepot scheduler`` processes (default 3) and one worker with 20 slots. It runs until
  ``warmup + seconds`` after the first run is due (defaults 30 s + 120 s); lag =
  ``first_claimed_at − due_at`` (both on the database clock; the claim sets ``started_at`` to
  the same instant on attempt 1) over runs due after the warm-up, p50/p99/max, split into
  the scheduler's share (``created_at − due_at``) and the worker's. Peak RSS of the worker
  and of each scheduler are sampled every 50 ms.

For every drain: CPU seconds of the measured processes (psutil) and of all the PostgreSQL
server's processes, and server transactions per run (``pg_stat_database.xact_commit``, read
after the processes exit, less the benchmark's own probes: in autocommit mode that is about
the number of statements per run). The worker CPU per run is given twice: as measured, and
net of start-up ("net": less the CPU one process of that system uses to start and sit idle
for 3 s, measured once per system before the drains, times P), since the processes start
with the drain and a short drain at P = 4 carries four start-ups.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    pip install pgqueuer procrastinate          # the peers; only for this benchmark
    python bench/workers.py                     # full: 20k x P=1,2,4 x 3 systems + lag
    python bench/workers.py --quick             # 2,000 runs x P=1,4, 40 s of lag
    python bench/workers.py --rounds 3 --no-lag # drains 3 times, interleaved; medians compared
    python bench/workers.py --wait-quiet 1800   # first wait for other busy benchmarks/tests
    python bench/workers.py --db postgresql://postgres@127.0.0.1:5432/postgres \\
        --size 20000 --processes 1,2,4 --systems crondepot,pgqueuer --no-lag

Figures are printed, never asserted; docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import logging
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import psycopg

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

if TYPE_CHECKING:
    import psutil  # type: ignore[import-untyped]

# crondepot worker processes import this file as the module ``workers`` (``--import workers``
# with this folder on PYTHONPATH) to register the handler below. Module-level imports are kept
# to what every process here loads anyway (psycopg), so the worker's RSS figure is crondepot's,
# not the benchmark's, and the peers' workers (this file run as a script) load no crondepot:
# crondepot, psutil, pgqueuer and procrastinate are imported inside the functions using them.

HANDLER = "bench.noop"

if __name__ != "__main__":
    from crondepot import RunContext, handler

    @handler(HANDLER)
    def noop(run: RunContext) -> None:
        """The no-op target: the run costs only its claim and its record."""


BENCH_DIR = Path(__file__).resolve().parent
# Each system twice: at its defaults (the peers with the same 20 slots as crondepot) and at
# its fastest documented setting. crondepot's one knob is ``--concurrency`` (slots per
# process, and so the largest claim): 20 by default, 100 at its best (docs/worker.md).
# pgqueuer's ``batch_size`` (jobs per dequeue, default 10) is its throughput knob; at 100 it
# needs ``max_concurrent_tasks`` of at least twice the batch (it refuses less), hence 200.
# procrastinate fetches one job per query whatever the setting, so its one knob is
# ``concurrency``: 20 (crondepot's slots) and 100.
SYSTEMS = ("crondepot", "crondepot-best", "pgqueuer", "pgqueuer-best", "procrastinate",
           "procrastinate-best")
BEST_CONCURRENCY = 100         # crondepot-best's slots per process
PEER_SETTINGS: dict[str, dict[str, int]] = {
    "pgqueuer": {"batch_size": 10, "max_concurrent_tasks": 20},
    "pgqueuer-best": {"batch_size": 100, "max_concurrent_tasks": 200},
    "procrastinate": {"concurrency": 20},
    "procrastinate-best": {"concurrency": 100},
}
PGQ_ENTRYPOINT = "bench_noop"
PROC_TASK = "bench_noop"
PEER_POOL_SIZE = 12            # crondepot's worker pool: min(concurrency, 10) + 2
POLL_SECONDS = 0.05
RSS_SAMPLE_SECONDS = 0.05
STOP_TIMEOUT = 20.0
LOAD_CHUNK = 5000
MB = 1024 * 1024
# A statement run in a drain's database before the load: SQL text, or a query and its
# parameters (bench/worker_ab.py's variants).
SchemaChange = str | tuple[str, dict[str, Any]]


# --------------------------------------------------------------------------- peer workers

def family(system: str) -> str:
    """The package a system variant runs: ``pgqueuer-best`` -> ``pgqueuer``."""
    return system.removesuffix("-best")


def peer_worker(system: str, url: str) -> int:
    """Child mode: one pgqueuer or procrastinate worker process until SIGTERM."""
    logging.basicConfig(level=logging.WARNING)
    settings = PEER_SETTINGS[system]
    if family(system) == "pgqueuer":
        return _pgqueuer_worker(url, settings["batch_size"], settings["max_concurrent_tasks"])
    return _procrastinate_worker(url, settings["concurrency"])


def _pgqueuer_worker(url: str, batch_size: int, concurrency: int) -> int:
    from pgqueuer import PgQueuer
    from pgqueuer.models import Job

    async def main() -> None:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            pgq = PgQueuer.from_psycopg_connection(conn)

            @pgq.entrypoint(PGQ_ENTRYPOINT)
            async def bench_noop(job: Job) -> None:
                return None

            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, pgq.shutdown.set)
            await pgq.run(batch_size=batch_size, max_concurrent_tasks=concurrency)
        finally:
            await conn.close()

    try:
        import uvloop  # pgqueuer's CLI runs on uvloop when it is installed (it depends on it)
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())
    return 0


def procrastinate_app(url: str) -> Any:
    import procrastinate

    # It warns that an app made in ``__main__`` cannot be found by import path; ours is
    # found by task name, in the worker and in the deferring process alike.
    logging.getLogger("procrastinate.blueprints").setLevel(logging.ERROR)
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=url, min_size=4, max_size=PEER_POOL_SIZE))

    @app.task(name=PROC_TASK)
    async def bench_noop() -> None:
        return None

    return app


def _procrastinate_worker(url: str, concurrency: int) -> int:
    async def main() -> None:
        app = procrastinate_app(url)
        async with app.open_async():
            await app.run_worker_async(concurrency=concurrency, install_signal_handlers=True,
                                       shutdown_graceful_timeout=10)

    asyncio.run(main())
    return 0


def missing_peers(systems: list[str]) -> list[str]:
    missing = [s for s in systems
               if family(s) != "crondepot" and importlib.util.find_spec(family(s)) is None]
    for peer in sorted({family(s) for s in missing}):
        print(f"  {peer} is not installed: skipping it (pip install {peer}, into this venv only; "
              "it is not a crondepot dependency)", flush=True)
    return missing


# --------------------------------------------------------------------------- databases

QUEUED_RUNS = """
    WITH j AS (
        INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, payload, active)
        SELECT 1, 'b' || g, '0 9 * * *', 'UTC', 'normal',
               jsonb_build_object('type', 'python', 'handler', %(handler)s::text), '{}', false
        FROM generate_series(1, %(count)s) AS g
        RETURNING id, tenant_id, priority
    )
    INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
    SELECT j.id || ':1791171000', j.id, j.tenant_id, j.priority, now(), now(), now() FROM j
"""


def grant_handler(conn: psycopg.Connection[Any]) -> None:
    """Let the benchmark's tenant (id 1) name HANDLER: a worker refuses the runs of a handler
    that is not granted to the run's tenant."""
    from crondepot.tenancy.grants import grant

    grant(conn, 1, handlers=[HANDLER])


def load(system: str, url: str, size: int) -> None:
    """``size`` ready runs/jobs for ``system``, then VACUUM (ANALYZE) and a CHECKPOINT."""
    if family(system) == "crondepot":
        with admin_connect(url) as conn:
            grant_handler(conn)
            conn.execute(QUEUED_RUNS, {"handler": HANDLER, "count": size})
    elif family(system) == "pgqueuer":
        asyncio.run(_load_pgqueuer(url, size))
    else:
        asyncio.run(_load_procrastinate(url, size))
    with admin_connect(url) as conn:
        conn.execute("VACUUM (ANALYZE)")
        conn.execute("CHECKPOINT")


async def _load_pgqueuer(url: str, size: int) -> None:
    from pgqueuer import PsycopgDriver, Queries

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        queries = Queries(PsycopgDriver(conn))
        await queries.install()
        for start in range(0, size, LOAD_CHUNK):
            n = min(LOAD_CHUNK, size - start)
            await queries.enqueue([PGQ_ENTRYPOINT] * n, [b"{}"] * n, [0] * n)
    finally:
        await conn.close()


async def _load_procrastinate(url: str, size: int) -> None:
    app = procrastinate_app(url)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()
        task = app.tasks[PROC_TASK]
        for start in range(0, size, LOAD_CHUNK):
            await task.batch_defer_async(*({} for _ in range(min(LOAD_CHUNK, size - start))))


# Per system: "is anything left?" (index probes, cheap enough every 50 ms), then, once it
# says no: runs done, the first→last span, and the claims that returned runs (distinct claim
# timestamps: each claim statement has its own now()).
PENDING_BY_FAMILY = {
    "crondepot": "SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'queued') "
                 "OR EXISTS (SELECT 1 FROM runs WHERE status = 'running')",
    "pgqueuer": "SELECT EXISTS (SELECT 1 FROM pgqueuer)",
    "procrastinate": "SELECT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status = 'todo') "
                     "OR EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status = 'doing')",
}
FINISHED_BY_FAMILY = {
    "crondepot": """
        SELECT count(*) FILTER (WHERE status = 'succeeded' AND attempt = 1),
               extract(epoch FROM max(finished_at) - min(started_at))::float8,
               count(DISTINCT started_at) FROM runs""",
    "pgqueuer": """
        SELECT count(*) FILTER (WHERE status = 'successful'),
               extract(epoch FROM max(created) FILTER (WHERE status = 'successful')
                                - min(created) FILTER (WHERE status = 'picked'))::float8,
               count(DISTINCT created) FILTER (WHERE status = 'picked')
        FROM pgqueuer_log""",
    "procrastinate": """
        SELECT (SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'),
               extract(epoch FROM max(at) FILTER (WHERE type = 'succeeded')
                                - min(at) FILTER (WHERE type = 'started'))::float8,
               count(DISTINCT at) FILTER (WHERE type = 'started')
        FROM procrastinate_events""",
}
PENDING = {s: PENDING_BY_FAMILY[family(s)] for s in SYSTEMS}
FINISHED = {s: FINISHED_BY_FAMILY[family(s)] for s in SYSTEMS}


# --------------------------------------------------------------------------- processes

def child_env(source: str | None = None) -> dict[str, str]:
    """The children's environment; ``source``, a folder holding another version's
    ``crondepot`` package, is put before the installed one (bench/worker_ab.py --baseline)."""
    path = os.pathsep.join(p for p in (str(BENCH_DIR), source, os.environ.get("PYTHONPATH"))
                           if p)
    return {**os.environ, "PYTHONPATH": path, "CRONDEPOT_LOG_LEVEL": "WARNING",
            "CRONDEPOT_LOG_FORMAT": "text"}


@dataclass
class Children:
    """Processes started for one measurement, their logs, and a peak-RSS sampler by role."""

    popens: list[subprocess.Popen[bytes]] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    logs: list[IO[bytes]] = field(default_factory=list)
    peak_rss: dict[int, int] = field(default_factory=dict)    # pid -> peak bytes
    source: str | None = None                                 # see child_env
    _stop: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    def start(self, argv: list[str], role: str) -> None:
        log = tempfile.NamedTemporaryFile(prefix="crondepot-wbench-", suffix=".log")  # noqa: SIM115
        self.logs.append(log)
        self.roles.append(role)
        self.popens.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            env=child_env(self.source), cwd=BENCH_DIR,
                                            preexec_fn=die_with_parent))

    def sample_rss(self) -> None:
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        import psutil

        procs = [psutil.Process(p.pid) for p in self.popens]
        while not self._stop.wait(RSS_SAMPLE_SECONDS):
            for proc in procs:
                with contextlib.suppress(psutil.Error):
                    rss = proc.memory_info().rss
                    self.peak_rss[proc.pid] = max(self.peak_rss.get(proc.pid, 0), rss)

    def peak(self, role: str) -> int:
        return max((self.peak_rss.get(p.pid, 0) for p, r in zip(self.popens, self.roles,
                                                                 strict=True) if r == role),
                   default=0)

    def rss_now(self, role: str) -> int:
        import psutil

        values = [0]
        for popen, r in zip(self.popens, self.roles, strict=True):
            if r == role:
                with contextlib.suppress(psutil.Error):
                    values.append(psutil.Process(popen.pid).memory_info().rss)
        return max(values)

    def check_alive(self) -> None:
        for popen, log in zip(self.popens, self.logs, strict=True):
            if popen.poll() is not None:
                tail = Path(log.name).read_text(errors="replace")[-3000:]
                raise RuntimeError(f"process {popen.args!r} exited with {popen.returncode}:\n"
                                   f"{tail}")

    def cpu_seconds(self, role: str | None = None) -> float:
        import psutil

        total = 0.0
        for popen, r in zip(self.popens, self.roles, strict=True):
            if role is None or r == role:
                with contextlib.suppress(psutil.Error):
                    times = psutil.Process(popen.pid).cpu_times()
                    total += times.user + times.system
        return total

    def log_tail(self, limit: int = 2000) -> str:
        text = ""
        for log in self.logs:
            with contextlib.suppress(OSError):
                text += Path(log.name).read_text(errors="replace")
        return text[-limit:]

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


def worker_argv(system: str, url: str, name: str, concurrency: int) -> list[str]:
    if system == "crondepot-best":
        concurrency = BEST_CONCURRENCY
    if family(system) == "crondepot":
        return [sys.executable, "-m", "crondepot", "worker", "--db", url,
                "--concurrency", str(concurrency), "--urgent-only", "0",
                "--import", "workers", "--name", name]
    return [sys.executable, str(Path(__file__).resolve()), "--peer-worker", system, "--db", url]


def scheduler_argv(url: str, name: str, batch: int | None = None) -> list[str]:
    return [sys.executable, "-m", "crondepot", "scheduler", "--db", url, "--name", name,
            *(["--batch", str(batch)] if batch else [])]


# --------------------------------------------------------------------------- server figures

def cpu_since(conn: psycopg.Connection[Any], before: dict[tuple[int, float], float]) -> float:
    return sum(t - before.get(k, 0.0) for k, t in server_cpu(conn).items())


def wal_since(conn: psycopg.Connection[Any], before: str) -> int:
    """WAL bytes written by the whole server since ``before`` (the drain has it to itself)."""
    row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint",
                       (before,)).fetchone()
    assert row is not None
    return int(row[0])


def xact_commits(conn: psycopg.Connection[Any]) -> int:
    """Committed transactions of this database so far (flushed stats, PostgreSQL 15+)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    row = conn.execute("SELECT xact_commit FROM pg_stat_database "
                       "WHERE datname = current_database()").fetchone()
    assert row is not None
    return int(row[0])


# --------------------------------------------------------------------------- drains

@dataclass
class Drain:
    system: str
    processes: int
    size: int
    wall: float = 0.0
    first_to_last: float = 0.0
    done: int = 0
    peak_rss: int = 0
    worker_cpu: float = 0.0
    postgres_cpu: float = 0.0
    xacts: int = 0
    claims: int = 0
    wal_bytes: int = 0
    startup_cpu: float = 0.0          # one idle process's start-up CPU (startup_cpu)

    @property
    def net_worker_us(self) -> float:
        """Worker CPU µs per run without the processes' start-up."""
        # Not clamped: a negative figure says the machine's speed moved between the two.
        return (self.worker_cpu - self.processes * self.startup_cpu) / self.size * 1e6

    @property
    def rate(self) -> float:
        return self.size / self.wall if self.wall else 0.0

    @property
    def rate_f2l(self) -> float:
        return self.size / self.first_to_last if self.first_to_last else 0.0


def drain(databases: BenchDatabases, system: str, size: int, processes: int,
          concurrency: int, schema_changes: Sequence[SchemaChange] = (),
          source: str | None = None) -> Drain:
    """One drain; ``schema_changes`` run in the fresh database before the load, and the
    workers run the ``crondepot`` package found in ``source`` when given (the variants of
    bench/worker_ab.py)."""
    result = Drain(system=system, processes=processes, size=size)
    with databases.fresh() as url:
        _change_schema(url, schema_changes)
        load(system, url, size)
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            children = Children(source=source)
            xacts_before = xact_commits(conn)
            wal_before = wal_lsn(conn)
            cpu_before = server_cpu(conn)
            probes = 0
            try:
                probes = _measure(conn, url, result, children, concurrency)
                result.worker_cpu = children.cpu_seconds()
                result.postgres_cpu = cpu_since(conn, cpu_before)
                result.wal_bytes = wal_since(conn, wal_before)
            finally:
                children.stop()
            result.peak_rss = children.peak("worker")
            # Backends flush their statistics when they exit: read after the stop. Subtract
            # the benchmark's own probes and the statements around them on this connection.
            result.xacts = xact_commits(conn) - xacts_before - probes - 3
            row = conn.execute(FINISHED[system]).fetchone()
            assert row is not None
            result.done, result.first_to_last = int(row[0]), float(row[1] or 0.0)
            result.claims = int(row[2])
        if result.done != size:
            raise RuntimeError(f"{system}: expected {size} runs succeeded at the first attempt, "
                               f"found {result.done}")
    return result


def _change_schema(url: str, statements: Sequence[SchemaChange]) -> None:
    if statements:
        with admin_connect(url) as conn:
            for statement in statements:
                if isinstance(statement, str):
                    conn.execute(statement)
                else:
                    conn.execute(*statement)


def _measure(conn: psycopg.Connection[Any], url: str, result: Drain, children: Children,
             concurrency: int) -> int:
    timeout = 60 + result.size / 100
    started = time.monotonic()
    for i in range(result.processes):
        children.start(worker_argv(result.system, url, f"w{i + 1}", concurrency), "worker")
    children.sample_rss()
    probes = 0
    while True:
        row = conn.execute(PENDING[result.system]).fetchone()
        probes += 1
        if row is not None and not row[0]:
            break
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{result.system} drain of {result.size} with "
                               f"{result.processes} processes not done after {timeout:.0f}s:\n"
                               f"{children.log_tail()}")
        children.check_alive()
        time.sleep(POLL_SECONDS)
    result.wall = time.monotonic() - started
    return probes


STARTUP_IDLE_SECONDS = 3.0


def startup_cpu(databases: BenchDatabases, system: str, concurrency: int,
                source: str | None = None,
                schema_changes: Sequence[SchemaChange] = ()) -> float:
    """CPU seconds one worker process of ``system`` uses to start (imports, connections,
    threads) and then sit idle for a few seconds with nothing queued. A drain's worker CPU
    includes it once per process: at P = 4 on 20,000 runs, 0.4 s of start-up is 80 µs "per
    run" that no run costs. The table's net column takes it out."""
    with databases.fresh() as url:
        _change_schema(url, schema_changes)
        load(system, url, 0)
        children = Children(source=source)
        try:
            children.start(worker_argv(system, url, "w-idle", concurrency), "worker")
            time.sleep(STARTUP_IDLE_SECONDS)
            children.check_alive()
            return children.cpu_seconds("worker")
        finally:
            children.stop()


# --------------------------------------------------------------------------- lag

@dataclass
class Lag:
    jobs: int
    schedulers: int
    slots: int
    batch: int | None                 # the schedulers' --batch (None: their default)
    window: float = 0.0               # seconds of due times measured
    runs: int = 0                     # runs due in the window
    unstarted: int = 0                # of which not claimed by the end (counted as late)
    lags_ms: list[float] = field(default_factory=list)
    sched_ms: list[float] = field(default_factory=list)   # created_at - due_at
    busiest_second: int = 0
    worker_rss: int = 0
    worker_rss_end: int = 0
    scheduler_rss: int = 0
    worker_cpu: float = 0.0
    scheduler_cpu: float = 0.0
    postgres_cpu: float = 0.0
    measured: float = 0.0              # wall seconds over which CPU was measured


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def create_lag_jobs(url: str, count: int) -> None:
    from crondepot.job import JobSpec, create_jobs

    with admin_connect(url) as conn:
        grant_handler(conn)
        for start in range(0, count, 1000):
            specs = [JobSpec.from_document({
                "key": f"lag-{i}", "cron": "* * * * *", "tz": "UTC",
                "spread": {"seconds": 60},
                "target": {"type": "python", "handler": HANDLER}})
                for i in range(start, min(count, start + 1000))]
            create_jobs(conn, 1, specs)
        conn.execute("VACUUM (ANALYZE)")
        conn.execute("CHECKPOINT")


LAG_ROWS = """
    SELECT extract(epoch FROM coalesce(first_claimed_at, %(end)s) - due_at)::float8 * 1000,
           extract(epoch FROM created_at - due_at)::float8 * 1000,
           first_claimed_at IS NULL, attempt
    FROM runs WHERE due_at >= %(start)s AND due_at <= %(stop)s
"""
BUSIEST_SECOND = """
    SELECT coalesce(max(n), 0) FROM (
        SELECT count(*) AS n FROM runs WHERE due_at >= %(start)s AND due_at <= %(stop)s
        GROUP BY date_trunc('second', due_at)) AS s
"""


def lag(databases: BenchDatabases, rate: int, schedulers: int, concurrency: int,
        warmup: float, seconds: float, batch: int | None = None) -> Lag:
    jobs = rate * 60
    result = Lag(jobs=jobs, schedulers=schedulers, slots=concurrency, batch=batch)
    with databases.fresh() as url:
        create_lag_jobs(url, jobs)
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SELECT min(next_run_at), now() FROM jobs").fetchone()
            assert row is not None
            first_due, db_now = row
            start_at = first_due.timestamp() + warmup
            end_at = start_at + seconds
            children = Children()
            try:
                for i in range(schedulers):
                    children.start(scheduler_argv(url, f"s{i + 1}", batch), "scheduler")
                children.start(worker_argv("crondepot", url, "w1", concurrency), "worker")
                children.sample_rss()
                print(f"({(end_at - db_now.timestamp()):.0f}s)", end=" ", flush=True)
                _run_until(conn, children, start_at, end_at, result)
            finally:
                children.stop()
            result.worker_rss = children.peak("worker")
            result.scheduler_rss = children.peak("scheduler")
            window = {"start": datetime.fromtimestamp(start_at, UTC),
                      "stop": datetime.fromtimestamp(end_at - 2.0, UTC),
                      "end": datetime.fromtimestamp(end_at, UTC)}
            result.window = end_at - 2.0 - start_at
            for lag_ms, sched_ms, unstarted, attempt in conn.execute(LAG_ROWS, window):
                result.runs += 1
                result.unstarted += bool(unstarted)
                if attempt > 1:
                    raise RuntimeError("a no-op run was retried: the lag is not first-attempt")
                result.lags_ms.append(lag_ms)
                result.sched_ms.append(sched_ms)
            row = conn.execute(BUSIEST_SECOND, window).fetchone()
            result.busiest_second = int(row[0]) if row else 0
    return result


def _run_until(conn: psycopg.Connection[Any], children: Children, start_at: float,
               end_at: float, result: Lag) -> None:
    """Wait (bounded) until the database clock passes ``end_at``; CPU over the window."""
    def db_time() -> float:
        row = conn.execute("SELECT extract(epoch FROM now())::float8").fetchone()
        assert row is not None
        return float(row[0])

    bound = time.monotonic() + (end_at - db_time()) + 60
    cpu_before: dict[tuple[int, float], float] | None = None
    marks = (0.0, 0.0, 0.0)
    while (now := db_time()) < end_at:
        if time.monotonic() > bound:
            raise TimeoutError("lag run did not reach its end time")
        children.check_alive()
        if cpu_before is None and now >= start_at:
            cpu_before = server_cpu(conn)
            marks = (time.monotonic(), children.cpu_seconds("worker"),
                     children.cpu_seconds("scheduler"))
        time.sleep(min(1.0, max(0.05, end_at - now)))
    if cpu_before is not None:
        result.postgres_cpu = cpu_since(conn, cpu_before)
        result.measured = time.monotonic() - marks[0]
        result.worker_cpu = children.cpu_seconds("worker") - marks[1]
        result.scheduler_cpu = children.cpu_seconds("scheduler") - marks[2]
    result.worker_rss_end = children.rss_now("worker")


# --------------------------------------------------------------------------- report

def server_report(admin_url: str) -> list[str]:
    lines = server_lines(admin_url, ["fsync", "synchronous_commit", "shared_buffers",
                                     "max_connections"])
    versions = []
    for name in ("psycopg", "pgqueuer", "procrastinate"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version
            versions.append(f"{name} {version(name)}")
    lines.append(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}, "
                 + ", ".join(versions))
    lines.append(load_line())
    return lines


def load_line() -> str:
    """Other work on the machine skews every figure here: say how busy it was."""
    one, five, fifteen = os.getloadavg()
    return f"load average: {one:.2f} {five:.2f} {fifteen:.2f}"


def busy_neighbours(sample: float = 2.0) -> list[str]:
    """Other benchmarks or test runs on this machine that are using CPU now (they share the
    two cores and the disk). A process that is itself only waiting uses none and is ignored."""
    import psutil

    mine = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    found: list[tuple[psutil.Process, list[psutil.Process], str]] = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if proc.info["pid"] in mine or "python" not in cmd:
            continue
        if "bench/" in cmd or "pytest" in cmd:
            with contextlib.suppress(psutil.Error):
                tree = [proc, *proc.children(recursive=True)]
                for member in tree:
                    member.cpu_percent(None)
                found.append((proc, tree, cmd[:100]))
    if not found:
        return []
    time.sleep(sample)
    busy = []
    for proc, tree, cmd in found:
        used = 0.0
        for member in tree:
            with contextlib.suppress(psutil.Error):
                used += member.cpu_percent(None)
        if used > 5.0:
            busy.append(f"{proc.pid} {cmd} ({used:.0f}% CPU)")
    return busy


def wait_quiet(limit: float) -> None:
    """Wait (at most ``limit`` seconds) until no other benchmark or test run is busy."""
    deadline = time.monotonic() + limit
    while (busy := busy_neighbours()) and time.monotonic() < deadline:
        print(f"  waiting for {len(busy)} busy process(es), e.g. {busy[0]}", flush=True)
        time.sleep(15)


def print_drains(drains: list[Drain]) -> None:
    cores = os.cpu_count() or 1
    head = (f"{'system':>18} {'procs':>5} {'runs':>7} {'wall s':>7} {'runs/s':>7} "
            f"{'f->l s':>7} {'runs/s f->l':>11} {'RSS MB':>7} {'wkr us/run':>10} {'net':>5} "
            f"{'PG us/run':>9} {'WAL B/run':>9} {'xacts/run':>9} {'runs/claim':>10} "
            f"{'CPU busy':>8}")
    print(head)
    print("-" * len(head))
    for d in drains:
        busy = (d.worker_cpu + d.postgres_cpu) / (d.wall * cores) * 100 if d.wall else 0
        print(f"{d.system:>18} {d.processes:>5} {d.size:>7,} {d.wall:>7.2f} {d.rate:>7,.0f} "
              f"{d.first_to_last:>7.2f} {d.rate_f2l:>11,.0f} {d.peak_rss / MB:>7.1f} "
              f"{d.worker_cpu / d.size * 1e6:>10.0f} {d.net_worker_us:>5.0f} "
              f"{d.postgres_cpu / d.size * 1e6:>9.0f} "
              f"{d.wal_bytes / d.size:>9.0f} {d.xacts / d.size:>9.2f} "
              f"{d.size / max(1, d.claims):>10.1f} {busy:>7.0f}%")


def medians(drains: list[Drain]) -> dict[tuple[str, int], tuple[float, float]]:
    """(system, P) -> median (wall, first->last) runs/s over the rounds: one run of a drain
    moves by ±15 % on this machine, for every system alike."""
    groups: dict[tuple[str, int], list[Drain]] = {}
    for d in drains:
        groups.setdefault((d.system, d.processes), []).append(d)
    return {key: (statistics.median(d.rate for d in ds), statistics.median(d.rate_f2l for d in ds))
            for key, ds in groups.items()}


def pg_us_medians(drains: list[Drain]) -> dict[tuple[str, int], float]:
    """(system, P) -> median PostgreSQL CPU µs per run over the rounds."""
    groups: dict[tuple[str, int], list[float]] = {}
    for d in drains:
        groups.setdefault((d.system, d.processes), []).append(d.postgres_cpu / d.size * 1e6)
    return {key: statistics.median(values) for key, values in groups.items()}


def fastest_peers(drains: list[Drain]) -> dict[int, tuple[str, float]]:
    """P -> (the fastest peer variant at P, its median first->last runs/s)."""
    rates = medians(drains)
    best: dict[int, tuple[str, float]] = {}
    for (system, p), (_, f2l) in rates.items():
        if family(system) != "crondepot" and f2l > best.get(p, ("", 0.0))[1]:
            best[p] = (system, f2l)
    return best


def fastest_ours(drains: list[Drain]) -> dict[int, tuple[str, float]]:
    """P -> (the fastest crondepot variant at P, its median first->last runs/s)."""
    rates = medians(drains)
    best: dict[int, tuple[str, float]] = {}
    for (system, p), (_, f2l) in rates.items():
        if family(system) == "crondepot" and f2l > best.get(p, ("", 0.0))[1]:
            best[p] = (system, f2l)
    return best


def print_ratios(drains: list[Drain], rounds: int) -> None:
    pg_us = pg_us_medians(drains)
    ours = fastest_ours(drains)
    of = f" (medians of {rounds} rounds)" if rounds > 1 else ""
    print(f"\nfastest crondepot / fastest peer at the same process count{of}:")
    for p, (peer, peer_rate) in sorted(fastest_peers(drains).items()):
        if p not in ours:
            continue
        system, rate = ours[p]
        print(f"  P={p}: first->last {rate / peer_rate:.2f}x ({system} / {peer}: "
              f"{rate:,.0f} / {peer_rate:,.0f} runs/s); PostgreSQL us/run "
              f"{pg_us[(system, p)]:.0f} / {pg_us[(peer, p)]:.0f}")


def print_lag(result: Lag) -> None:
    print(f"\nLag: {result.jobs:,} jobs '* * * * *' spread over 60 s, {result.schedulers} "
          f"schedulers{f' (--batch {result.batch})' if result.batch else ''}, 1 worker "
          f"with {result.slots} slots; {result.runs:,} runs due in {result.window:.0f} s "
          f"after warm-up ({result.runs / result.window:.0f} runs/s, busiest second "
          f"{result.busiest_second})")
    for label, values in (("first claim - due", result.lags_ms),
                          ("  of which scheduler (created - due)", result.sched_ms),
                          ("  of which worker (first claim - created)",
                           [a - b for a, b in zip(result.lags_ms, result.sched_ms,
                                                  strict=True)])):
        print(f"  {label}: p50 {pct(values, 0.5):.1f} ms, p99 {pct(values, 0.99):.1f} ms, "
              f"max {max(values, default=float('nan')):.1f} ms")
    print(f"  not claimed by the end: {result.unstarted}")
    m = result.measured or float("nan")
    print(f"  RSS peak: worker {result.worker_rss / MB:.1f} MB (at the end "
          f"{result.worker_rss_end / MB:.1f} MB), scheduler {result.scheduler_rss / MB:.1f} MB")
    print(f"  CPU over {result.measured:.0f} s: worker {result.worker_cpu / m * 100:.0f}% of a "
          f"core, schedulers {result.scheduler_cpu / m * 100:.0f}%, PostgreSQL "
          f"{result.postgres_cpu / m * 100:.0f}%")


def print_targets(drains: list[Drain], lag_result: Lag | None, rate: int) -> None:
    print("\nTargets:")
    ours = [d for d in drains if family(d.system) == "crondepot"]
    pg_us = pg_us_medians(drains)
    fastest = fastest_ours(drains)
    for p, (peer, peer_rate) in sorted(fastest_peers(drains).items()):
        if p not in fastest:
            continue
        system, our_rate = fastest[p]
        ratio = our_rate / peer_rate
        mine, theirs = pg_us[(system, p)], pg_us[(peer, p)]
        print(f"  P={p}: >= 1.5x the fastest peer ({system} / {peer}), first->last: "
              f"{ratio:.2f}x -> "
              f"{'met' if ratio >= 1.5 else 'NOT met'}; PostgreSQL us/run <= its "
              f"{theirs:.0f}: {mine:.0f} -> {'met' if mine <= theirs else 'NOT met'}")
    if lag_result is not None:
        p99 = pct(lag_result.lags_ms, 0.99)
        goal = 50 if rate <= 140 else 100
        print(f"  p99 lag <= {goal} ms at {rate} runs/s: {p99:.1f} ms -> "
              f"{'met' if p99 <= goal and not lag_result.unstarted else 'NOT met'}")
    rss = max([d.peak_rss for d in ours] + ([lag_result.worker_rss] if lag_result else []),
              default=0)
    if rss:
        print(f"  worker RSS <= 80 MB: peak {rss / MB:.1f} MB -> "
              f"{'met' if rss <= 80 * MB else 'NOT met'}")


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help=f"admin URL that may CREATE DATABASE (default {DEFAULT_ADMIN_URL})")
    parser.add_argument("--size", type=int, default=20_000, help="runs per drain (20000)")
    parser.add_argument("--processes", default="1,2,4", help="worker processes, e.g. 1,2,4")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the drains this many times, interleaved; ratios and "
                             "targets use each drain's median (1)")
    parser.add_argument("--concurrency", type=int, default=20, help="slots per process (20)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help=f"which of {','.join(SYSTEMS)} to drain (the -best variants "
                             "run the peer at its fastest documented setting)")
    parser.add_argument("--no-lag", action="store_true", help="skip the lag measurement")
    parser.add_argument("--lag-only", action="store_true", help="only the lag measurement")
    parser.add_argument("--rate", type=int, default=140, help="lag: runs due per second (140)")
    parser.add_argument("--schedulers", type=int, default=3, help="lag: scheduler copies (3)")
    parser.add_argument("--scheduler-batch", type=int, default=None, metavar="N",
                        help="lag: the schedulers' --batch (their default)")
    parser.add_argument("--warmup", type=float, default=30.0,
                        help="lag: seconds after the first due run left out (30)")
    parser.add_argument("--seconds", type=float, default=120.0,
                        help="lag: seconds of due times measured after the warm-up (120)")
    parser.add_argument("--quick", action="store_true",
                        help="2,000 runs with 1 and 4 processes, 40 s of lag (smoke check)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to SECONDS for other busy benchmarks/test runs")
    parser.add_argument("--peer-worker", choices=SYSTEMS[1:], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.processes, args.warmup, args.seconds = 2000, "1,4", 10.0, 30.0
    return args


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet > 0:
        wait_quiet(args.wait_quiet)
    compile_crondepot()
    databases = BenchDatabases(args.db, "crondepot_wbench_")
    for line in server_report(args.db):
        print(line)
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n", flush=True)
    drains: list[Drain] = []
    if not args.lag_only:
        systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        unknown = set(systems) - set(SYSTEMS)
        if unknown:
            raise SystemExit(f"--systems: unknown {sorted(unknown)}; choose from {SYSTEMS}")
        missing = missing_peers(systems)
        systems = [s for s in systems if s not in missing]
        startup: dict[str, float] = {}
        for system in systems:
            startup[system] = startup_cpu(databases, system, args.concurrency)
            print(f"  {system}: one idle worker process, start-up CPU "
                  f"{startup[system]:.2f} s", flush=True)
        for p, system in [(p, system) for _ in range(max(1, args.rounds))
                          for p in [int(x) for x in args.processes.split(",")]
                          for system in systems]:
            print(f"  {system}: {args.size:,} runs, {p} process{'es' if p > 1 else ''} ...",
                  end=" ", flush=True)
            d = drain(databases, system, args.size, p, args.concurrency)
            d.startup_cpu = startup[system]
            print(f"{d.wall:.2f}s, {d.rate:,.0f} runs/s wall, {d.rate_f2l:,.0f} first->last",
                  flush=True)
            drains.append(d)
    lag_result: Lag | None = None
    if not args.no_lag:
        print(f"  lag: {args.rate * 60:,} jobs, {args.schedulers} schedulers, 1 worker ...",
              end=" ", flush=True)
        lag_result = lag(databases, args.rate, args.schedulers, args.concurrency,
                         args.warmup, args.seconds, args.scheduler_batch)
        print("done", flush=True)
    if drains:
        print()
        print_drains(drains)
        print_ratios(drains, args.rounds)
    if lag_result is not None:
        print_lag(lag_result)
    print_targets(drains, lag_result, args.rate)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.peer_worker:
        return peer_worker(args.peer_worker, args.db)
    return run_interruptibly(lambda: run(args), load_line)


if __name__ == "__main__":
    sys.exit(main())
