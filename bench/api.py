"""API benchmark: bulk import of 2.7 million jobs, the size of the jobs table, create latency.

What it measures, each in a fresh database (``crondepot_abench_<n>``, migrated with
``crondepot.db.migrate``, with one tenant made by ``crondepot.tenancy.tenants.create_tenant``,
dropped afterwards) on the machine's PostgreSQL:

- **Import.** An NDJSON file of ``--jobs`` reminder-service job documents (written to a
  temporary file before any timing starts; about 450 bytes a line) is imported two ways:

  * ``http``: a real ``python -m crondepot api`` process (uvicorn), and ``--http-concurrency``
    client threads each POSTing chunks of ``--chunk-lines`` lines to ``/v1/import``
    (``application/x-ndjson``; the route stores 1,000 lines to a statement).
  * ``library``: ``--processes`` processes of this file, each taking a contiguous part of the
    file and calling ``JobSpec.from_document`` per line and
    ``crondepot.job.store.create_jobs`` per ``--batch`` (5,000) specs.

  Wall time runs from the first request (or process start) until the last response (or
  process exit); jobs/s = jobs / wall. Every line must come back ``created``. CPU seconds
  (psutil) of the API process, of this benchmark's client, of the library processes and of
  every process of the PostgreSQL server, and WAL bytes, say where the time went.
- **Size.** After the library import (or the HTTP one): ``pg_total_relation_size('jobs')``
  and each index, after ``VACUUM (ANALYZE)``. Then, from the same rows, the source
  document's narrow table (``id bigint PRIMARY KEY, cron, tz, next_run_at, priority,
  active`` and ``jobs_due ON (next_run_at) WHERE active``), loaded like ours (indexes present,
  rows in id order), and the same table plus our ``payload`` column, to price the payload
  alone. Both are also shown after ``REINDEX`` (indexes built in one go, as a bulk load
  would). ``sum(pg_column_size(col))`` over ``jobs`` splits the rest by column.
- **Create latency.** ``POST /v1/jobs`` offered open-loop at ``--rate`` requests/s for
  ``--seconds`` s (after a 2 s warm-up at the same rate, not counted) against the API
  process of the HTTP import, whose database then holds the imported jobs. Each send is
  scheduled on a fixed timetable (``t0 + i / rate``) and its latency is measured from that
  scheduled time to the response, so a slow response never lowers the offered rate and
  queueing in the client counts as latency (no coordinated omission). Every document has
  a new key; anything but 201 is an error.

The API runs with ``CRONDEPOT_API_RATE=--api-rate`` (default 100,000/s): the default
per-token budget (50/s, burst 100) would answer 429 to three of four requests at 200/s
from one token. ``--api-rate 0`` keeps the API's defaults.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/api.py                  # full: 2.7 M jobs both ways, sizes, 30 s at 200/s
    python bench/api.py --quick          # smoke check: 20,000 jobs, 10 s of load, < 1 minute
    python bench/api.py --paths library --no-latency --jobs 500000
    python bench/api.py --db postgresql://postgres@127.0.0.1:5432/postgres --rate 200 \\
        --seconds 30 --http-concurrency 3 --processes 2 --batch 5000

Figures are printed, never asserted; docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import psutil  # type: ignore[import-untyped]
import psycopg

from common import (
    DEFAULT_ADMIN_URL,
    BenchDatabases,
    admin_connect,
    die_with_parent,
    run_interruptibly,
    server_cpu,
    server_lines,
    wal_lsn,
)
from crondepot.job.spec import JobSpec
from crondepot.job.store import create_jobs
from crondepot.tenancy.tenants import create_tenant
from crondepot_testkit.processes import free_port

FULL_JOBS = 2_700_000
QUICK_JOBS = 20_000
IMPORT_TARGET_S = 120.0
SOURCE_NARROW_MB = 280
STOP_TIMEOUT = 15.0
API_START_TIMEOUT = 30.0
WARMUP_SECONDS = 2.0
MB = 1024 * 1024
TENANT = "bank42"

# --------------------------------------------------------------------------- documents

# The reminder service's mix, by i % 100: (first bucket, kind, cron, zone, template,
# priority, spread seconds, misfire). Spread keys are the customer number.
KINDS: list[tuple[int, str, str, str, str, str, int, str | None]] = [
    (0, "bill", "0 9 * * *", "Asia/Kolkata", "bill_due", "normal", 1800, None),
    (80, "emi", "0 9 5 * *", "Asia/Kolkata", "emi_due", "normal", 1800, "20:00"),
    (88, "renewal", "30 10 * * 1-5", "Asia/Kolkata", "renewal_offer", "bulk", 3600, None),
    (93, "bill-ae", "0 9 * * *", "Asia/Dubai", "bill_due", "normal", 1800, None),
    (97, "statement", "0 8 1 * *", "Europe/London", "statement_ready", "bulk", 0, None),
]
_KIND_OF = [next(k for k in reversed(KINDS) if k[0] <= b) for b in range(100)]
TARGET = ('{"type": "http", "url": "https://notify.bank42.example/v1/reminders", '
          '"timeout_s": 10, "dedupes": true}')


def document_line(i: int, prefix: str = "") -> str:
    """One job document as a JSON line (built from a template: the values need no escaping)."""
    _, kind, cron, tz, template, priority, spread, until = _KIND_OF[i % 100]
    extra = ""
    if spread and i % 10 != 9:       # nine in ten are spread over a window
        extra += f', "spread": {{"seconds": {spread}, "key": "{i}"}}'
    if until:
        extra += f', "misfire": {{"policy": "skip_after_local_time", "until": "{until}"}}'
    phone = 9_800_000_000 + (i * 7_919) % 199_999_999
    payload = (f'{{"phone": "+91{phone}", "template": "{template}", '
               f'"amount": {1_000 + (i * 37) % 90_000}, "currency": "INR", '
               f'"account": "XXXX{i % 10_000:04d}", "lang": "{"hi" if i % 3 else "en"}"}}')
    return (f'{{"key": "{TENANT}:{prefix}{i}:{kind}", "cron": "{cron}", "tz": "{tz}", '
            f'"priority": "{priority}", "target": {TARGET}, "payload": {payload}{extra}}}')


@dataclass
class NdjsonFile:
    path: Path
    lines: int
    size: int
    chunks: list[tuple[int, int, int]]     # (byte offset, byte length, lines)

    def read(self, chunk: int) -> bytes:
        offset, length, _ = self.chunks[chunk]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)


def write_ndjson(directory: str, count: int, chunk_lines: int) -> NdjsonFile:
    path = Path(directory) / "jobs.ndjson"
    chunks: list[tuple[int, int, int]] = []
    offset = 0
    with path.open("wb") as out:
        for start in range(0, count, chunk_lines):
            stop = min(count, start + chunk_lines)
            data = ("\n".join(document_line(i) for i in range(start, stop)) + "\n").encode()
            out.write(data)
            chunks.append((offset, len(data), stop - start))
            offset += len(data)
    return NdjsonFile(path=path, lines=count, size=offset, chunks=chunks)


# --------------------------------------------------------------------------- databases

@dataclass(frozen=True)
class BenchDb:
    url: str
    tenant_id: int
    token: str


@contextlib.contextmanager
def fresh_bench_db(databases: BenchDatabases) -> Iterator[BenchDb]:
    """A fresh database ``crondepot_abench_<n>``, migrated, with the benchmark's tenant and
    its API token; dropped afterwards."""
    with databases.empty() as url:
        with admin_connect(url) as conn:
            tenant = create_tenant(conn, TENANT)
        yield BenchDb(url=url, tenant_id=tenant.id, token=tenant.token)


@dataclass
class Meter:
    """CPU of the server, of chosen processes and of this process, and WAL, over a span."""

    conn: psycopg.Connection[Any]
    pids: list[int]
    started: float = 0.0
    wall: float = 0.0
    server: float = 0.0
    procs: float = 0.0
    client: float = 0.0
    wal_bytes: int = 0
    _server0: dict[tuple[int, float], float] = field(default_factory=dict)
    _procs0: float = 0.0
    _client0: float = 0.0
    _lsn0: str = ""
    _seen: dict[tuple[int, float], float] = field(default_factory=dict)
    _halt: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    def start(self) -> None:
        self._server0, self._lsn0 = server_cpu(self.conn), wal_lsn(self.conn)
        self._procs0, self._client0 = self._proc_cpu(), _own_cpu()
        self._seen = dict(self._server0)
        self._halt = threading.Event()
        # Backends that end before stop() (a library worker's connection) are counted at
        # their last sample: the server is sampled every 0.25 s.
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self.started = time.monotonic()

    def _sample(self) -> None:
        with psycopg.connect(self.conn.info.dsn, autocommit=True) as conn:
            while not self._halt.wait(0.25):
                self._seen.update(server_cpu(conn))

    def stop(self) -> None:
        self.wall = time.monotonic() - self.started
        self.client = _own_cpu() - self._client0
        self.procs = self._proc_cpu() - self._procs0
        self._halt.set()
        if self._sampler is not None:
            self._sampler.join(timeout=10)
        self._seen.update(server_cpu(self.conn))
        self.server = sum(t - self._server0.get(k, 0.0) for k, t in self._seen.items())
        row = self.conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)"
                                "::bigint", (self._lsn0,)).fetchone()
        assert row is not None
        self.wal_bytes = int(row[0])

    def _proc_cpu(self) -> float:
        total = 0.0
        for pid in self.pids:
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                total += times.user + times.system + times.children_user + times.children_system
        return total


def _own_cpu() -> float:
    times = psutil.Process().cpu_times()
    return float(times.user + times.system)


def count_jobs(url: str) -> int:
    with admin_connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM jobs").fetchone()
        assert row is not None
        return int(row[0])


# --------------------------------------------------------------------------- processes

class Child:
    """A child process with its output in a temporary log; stopped with SIGTERM, then KILL."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 stdout_pipe: bool = False) -> None:
        self.log: IO[bytes] = tempfile.NamedTemporaryFile(  # noqa: SIM115
            prefix="crondepot-abench-", suffix=".log")
        self.popen = subprocess.Popen(
            argv, stdout=subprocess.PIPE if stdout_pipe else self.log,
            stderr=self.log if stdout_pipe else subprocess.STDOUT,
            env={**os.environ, **(env or {})}, preexec_fn=die_with_parent)

    def tail(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-3000:]

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(f"{self.popen.args!r} exited with {self.popen.returncode}:\n"
                               f"{self.tail()}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=STOP_TIMEOUT)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        self.log.close()


def api_pids(api: Child) -> list[int]:
    """The API process and, with ``--workers N``, its N serving processes (whose CPU psutil
    counts only once they exit, so each is metered on its own)."""
    with contextlib.suppress(psutil.Error):
        return [api.popen.pid] + [c.pid for c in psutil.Process(api.popen.pid).children(
            recursive=True)]
    return [api.popen.pid]


@contextlib.contextmanager
def api_server(url: str, api_rate: float, pool_size: int,
               workers: int = 1) -> Iterator[tuple[str, Child]]:
    """``python -m crondepot api --workers N`` on a free port, ready (``/readyz`` 200) when
    yielded. ``--api-rate`` is the total over the N processes (each gets 1/N)."""
    port = free_port()
    env = {"CRONDEPOT_API_POOL_SIZE": str(pool_size)}
    if api_rate > 0:
        env |= {"CRONDEPOT_API_RATE": str(api_rate), "CRONDEPOT_API_BURST": str(int(api_rate))}
    child = Child([sys.executable, "-m", "crondepot", "api", "--db", url, "--port", str(port),
                   "--workers", str(workers)], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + API_START_TIMEOUT
        while True:
            child.check_alive()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"the API was not ready in {API_START_TIMEOUT:.0f}s:\n"
                                   f"{child.tail()}")
            time.sleep(0.1)
        yield base, child
    finally:
        child.stop()


# --------------------------------------------------------------------------- import

@dataclass
class Import:
    path: str
    jobs: int
    how: str
    wall: float = 0.0
    created: int = 0
    other: dict[str, int] = field(default_factory=dict)
    py_cpu: float = 0.0          # API process, or the library processes
    client_cpu: float = 0.0      # this benchmark (HTTP client; file reads)
    pg_cpu: float = 0.0
    wal_bytes: int = 0
    peak_rss: int = 0
    split: dict[str, float] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.jobs / self.wall if self.wall else 0.0


def import_http(file: NdjsonFile, db: BenchDb, base: str, api: Child,
                concurrency: int) -> Import:
    result = Import(path="http", jobs=file.lines,
                    how=f"{concurrency} concurrent POST /v1/import of "
                        f"{file.chunks[0][2]:,} lines")
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for k in range(len(file.chunks)):
        todo.put(k)
    counts: dict[str, int] = {}
    failures: list[str] = []
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=base, timeout=3600,
                          headers={"Authorization": f"Bearer {db.token}",
                                   "Content-Type": "application/x-ndjson"}) as http:
            while not failures:
                try:
                    k = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    response = http.post("/v1/import", content=file.read(k))
                except httpx.HTTPError as exc:
                    failures.append(f"chunk {k}: {type(exc).__name__}: {exc}")
                    return
                if response.status_code != 200:
                    failures.append(f"chunk {k}: {response.status_code} {response.text[:500]}")
                    return
                with lock:
                    for name, value in response.json().items():
                        if isinstance(value, int):
                            counts[name] = counts.get(name, 0) + value

    with admin_connect(db.url) as conn:
        pids = api_pids(api)
        meter = Meter(conn, pids)
        rss = RssSampler(pids)
        meter.start()
        threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        meter.stop()
        result.peak_rss = rss.stop()
    if failures:
        raise RuntimeError("HTTP import failed: " + "; ".join(failures[:3]))
    _finish(result, meter, counts)
    return result


def import_library(file: NdjsonFile, db: BenchDb, processes: int, batch: int) -> Import:
    result = Import(path="library", jobs=file.lines,
                    how=f"{processes} processes, create_jobs per {batch:,}")
    n = len(file.chunks)
    parts = [file.chunks[k * n // processes:(k + 1) * n // processes]
             for k in range(processes)]
    with admin_connect(db.url) as conn:
        meter = Meter(conn, [])
        meter.start()
        children = []
        for part in parts:
            if not part:
                continue
            start, stop = part[0][0], part[-1][0] + part[-1][1]
            children.append(Child([sys.executable, str(Path(__file__).resolve()),
                                   "--import-worker", "--db", db.url, "--file", str(file.path),
                                   "--range", f"{start}:{stop}", "--tenant-id",
                                   str(db.tenant_id), "--batch", str(batch)],
                                  stdout_pipe=True))
        meter.pids = [c.popen.pid for c in children]
        rss = RssSampler(meter.pids)
        reports = []
        try:
            for child in children:
                assert child.popen.stdout is not None
                out = child.popen.stdout.read()
                if child.popen.wait() != 0:
                    raise RuntimeError(f"import worker exited with {child.popen.returncode}:\n"
                                       f"{child.tail()}")
                reports.append(json.loads(out))
            meter.stop()
            result.peak_rss = rss.stop()
        finally:
            for child in children:
                child.stop()
    # The worker processes have exited: their CPU is what they reported.
    meter.procs = sum(r["cpu"] for r in reports)
    counts: dict[str, int] = {}
    for report in reports:
        for name in ("lines", "created", "existing", "failed"):
            counts[name] = counts.get(name, 0) + report[name]
    result.split = {"parse + validate s": sum(r["parse_s"] for r in reports),
                    "create_jobs s": sum(r["store_s"] for r in reports),
                    "first batch -> last commit s":
                        max(r["end"] for r in reports) - min(r["start"] for r in reports)}
    _finish(result, meter, counts)
    return result


def _finish(result: Import, meter: Meter, counts: dict[str, int]) -> None:
    result.wall, result.py_cpu, result.client_cpu = meter.wall, meter.procs, meter.client
    result.pg_cpu, result.wal_bytes = meter.server, meter.wal_bytes
    result.created = counts.get("created", 0)
    result.other = {k: v for k, v in counts.items() if k not in ("created", "lines") and v}
    if result.created != result.jobs:
        raise RuntimeError(f"{result.path} import: expected {result.jobs:,} created, got "
                           f"{counts}")


class RssSampler:
    """Peak RSS of some processes, sampled every 100 ms in a thread."""

    def __init__(self, pids: list[int]) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._procs = [psutil.Process(p) for p in pids]
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            total = 0
            for proc in self._procs:
                with contextlib.suppress(psutil.Error):
                    total += proc.memory_info().rss
            self.peak = max(self.peak, total)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.peak


def import_worker(args: argparse.Namespace) -> int:
    """Worker mode: import one byte range of the file with the library; report JSON."""
    start, stop = (int(x) for x in args.range.split(":"))
    report = {"lines": 0, "created": 0, "existing": 0, "failed": 0,
              "parse_s": 0.0, "store_s": 0.0}
    batch: list[JobSpec] = []

    def store(conn: psycopg.Connection[Any]) -> None:
        began = time.perf_counter()
        for job in create_jobs(conn, args.tenant_id, batch):
            report["created" if job.created else "existing"] += 1
        report["store_s"] += time.perf_counter() - began
        batch.clear()

    with psycopg.connect(args.db, autocommit=True, application_name="abench-import") as conn, \
            open(args.file, "rb") as source:
        source.seek(start)
        left = stop - start
        report["start"] = time.time()
        began = time.perf_counter()
        for line in source:
            left -= len(line)
            if left < 0:
                break
            report["lines"] += 1
            try:
                batch.append(JobSpec.from_document(json.loads(line)))
            except Exception:
                report["failed"] += 1
            if len(batch) == args.batch:
                report["parse_s"] += time.perf_counter() - began
                store(conn)
                began = time.perf_counter()
            if left == 0:
                break
        report["parse_s"] += time.perf_counter() - began
        store(conn)
        report["end"] = time.time()
    report["cpu"] = _own_cpu()
    print(json.dumps(report))
    return 0


# --------------------------------------------------------------------------- sizes

NARROW_DDL = """
    CREATE TABLE {name} (
      id          bigint PRIMARY KEY,
      cron        text NOT NULL,
      tz          text NOT NULL,
      next_run_at timestamptz NOT NULL,
      priority    text NOT NULL,
      active      boolean NOT NULL DEFAULT true{extra}
    );
    CREATE INDEX {name}_due ON {name} (next_run_at) WHERE active;
"""


@dataclass
class Relation:
    name: str
    total: int = 0
    heap: int = 0                       # main fork + TOAST + FSM/VM, without indexes
    indexes: dict[str, int] = field(default_factory=dict)
    reindexed_total: int = 0
    reindexed_indexes: dict[str, int] = field(default_factory=dict)


@dataclass
class Sizes:
    rows: int
    relations: list[Relation]
    columns: dict[str, int]            # sum(pg_column_size(col)) over jobs


def _relation(conn: psycopg.Connection[Any], name: str) -> tuple[int, int, dict[str, int]]:
    row = conn.execute("SELECT pg_total_relation_size(%s::regclass), "
                       "pg_table_size(%s::regclass)", (name, name)).fetchone()
    assert row is not None
    indexes = {str(r[0]): int(r[1]) for r in conn.execute(
        "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
        "WHERE indrelid = %s::regclass ORDER BY 1", (name,))}
    return int(row[0]), int(row[1]), indexes


def measure_sizes(url: str) -> Sizes:
    with admin_connect(url) as conn:
        conn.execute("VACUUM (ANALYZE) jobs")
        names = [str(r[0]) for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'jobs'::regclass AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum")]
        sums = ", ".join(f"coalesce(sum(pg_column_size({n})), 0)" for n in names)
        row = conn.execute(f"SELECT count(*), {sums} FROM jobs").fetchone()  # type: ignore[arg-type]
        assert row is not None
        sizes = Sizes(rows=int(row[0]), relations=[],
                      columns={n: int(v) for n, v in zip(names, row[1:], strict=True)})
        tables = [("jobs", None), ("narrow_jobs", ""),
                  ("narrow_payload", ",\n      payload jsonb NOT NULL")]
        for name, extra in tables:
            if extra is not None:
                columns = "id, cron, tz, next_run_at, priority, active" + \
                          (", payload" if "payload" in extra else "")
                conn.execute(NARROW_DDL.format(name=name, extra=extra).encode())
                conn.execute(f"INSERT INTO {name} SELECT {columns} FROM jobs "  # type: ignore[arg-type]
                             "ORDER BY id")
                conn.execute(f"VACUUM (ANALYZE) {name}")  # type: ignore[arg-type]
            rel = Relation(name=name)
            rel.total, rel.heap, rel.indexes = _relation(conn, name)
            conn.execute(f"REINDEX TABLE {name}")  # type: ignore[arg-type]
            rel.reindexed_total, _, rel.reindexed_indexes = _relation(conn, name)
            sizes.relations.append(rel)
        conn.execute("DROP TABLE narrow_jobs, narrow_payload")
    return sizes


# --------------------------------------------------------------------------- latency

@dataclass
class Latency:
    rate: float
    seconds: float
    latencies: list[float] = field(default_factory=list)     # s, scheduled send -> response
    send_lag: list[float] = field(default_factory=list)      # s, scheduled -> actually sent
    statuses: dict[str, int] = field(default_factory=dict)
    api_cpu: float = 0.0
    pg_cpu: float = 0.0
    client_cpu: float = 0.0
    wall: float = 0.0
    jobs_before: int = 0
    connections: int = 0

    def pct(self, q: float, values: list[float] | None = None) -> float:
        ordered = sorted(self.latencies if values is None else values)
        if not ordered:
            return float("nan")
        return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]

    @property
    def errors(self) -> int:
        return sum(v for k, v in self.statuses.items() if k != "201")


class _Stale(Exception):
    """An idle keep-alive connection turned out closed before any response byte."""


class RawHttp:
    """A minimal HTTP/1.1 keep-alive client on asyncio streams, for the load generator.

    httpx's async pool scans its queue of waiting requests on every change, which costs
    quadratic CPU once a few hundred requests are in flight: the client, not the API, then
    sets the latency. This client keeps a stack of idle connections and opens another when
    none is idle, so every scheduled request is sent at once.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.opened = 0

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        while self.idle:
            reader, writer = self.idle.pop()
            if not reader.at_eof() and not writer.is_closing():
                try:
                    return await self._send(reader, writer, path, body, headers)
                except _Stale:
                    pass    # the server closed it while idle (keep-alive timeout): next one
            writer.close()
        reader, writer = await asyncio.open_connection(self.host, self.port)
        self.opened += 1
        return await self._send(reader, writer, path, body, headers)

    async def _send(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    path: str, body: bytes, headers: dict[str, str]) -> int:
        lines = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}",
                 f"Content-Length: {len(body)}",
                 *(f"{k}: {v}" for k, v in headers.items())]
        try:
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
            first = await reader.readline()
            if not first:
                raise _Stale
            status = int(first.split(b" ", 2)[1])
            length, keep = 0, True
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
                elif name.strip().lower() == "connection" and "close" in value.lower():
                    keep = False
            await reader.readexactly(length)
        except BaseException:
            writer.close()
            raise
        if keep:
            self.idle.append((reader, writer))
        else:
            writer.close()
        return status

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


async def _offer(base: str, token: str, rate: float, seconds: float, first: int,
                 result: Latency | None) -> None:
    """Send ``rate * seconds`` creates on a fixed timetable; record into ``result``."""
    count = int(rate * seconds)
    bodies = [document_line(first + i, prefix="live").encode() for i in range(count)]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    host, port = base.removeprefix("http://").split(":")
    http = RawHttp(host, int(port))
    loop = asyncio.get_running_loop()

    async def one(i: int, scheduled: float) -> None:
        sent = loop.time()
        try:
            status = str(await http.post("/v1/jobs", bodies[i], headers))
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, _Stale) as exc:
            status = type(exc).__name__
        done = loop.time()
        if result is not None:
            result.latencies.append(done - scheduled)
            result.send_lag.append(sent - scheduled)
            result.statuses[status] = result.statuses.get(status, 0) + 1
            result.connections = http.opened

    tasks = []
    t0 = loop.time() + 0.05
    try:
        for i in range(count):
            scheduled = t0 + i / rate
            delay = scheduled - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, scheduled)))
        await asyncio.gather(*tasks)
    finally:
        http.close()


def measure_latency(db: BenchDb, base: str, api: Child, rate: float,
                    seconds: float) -> Latency:
    result = Latency(rate=rate, seconds=seconds, jobs_before=count_jobs(db.url))
    asyncio.run(_offer(base, db.token, rate, WARMUP_SECONDS, 10_000_000, None))
    with admin_connect(db.url) as conn:
        meter = Meter(conn, api_pids(api))
        meter.start()
        asyncio.run(_offer(base, db.token, rate, seconds, 20_000_000, result))
        meter.stop()
    result.api_cpu, result.pg_cpu, result.client_cpu = meter.procs, meter.server, meter.client
    result.wall = meter.wall
    return result


# --------------------------------------------------------------------------- report

def server_report(admin_url: str) -> list[str]:
    lines = server_lines(admin_url, ["fsync", "synchronous_commit", "shared_buffers",
                                     "wal_level", "full_page_writes", "max_wal_size",
                                     "checkpoint_timeout"])
    lines.append(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}, "
                 f"httpx {httpx.__version__}, psycopg {psycopg.__version__}")
    return lines


def other_benchmarks() -> list[str]:
    """Command lines of other bench/ processes on this machine (they share the cores)."""
    mine = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(proc.info.get("cmdline") or [])
        if proc.info["pid"] not in mine and "bench/" in cmd and "python" in cmd:
            found.append(f"{proc.info['pid']} {cmd[:120]}")
    return found


def wait_quiet(limit: float) -> None:
    waited = 0.0
    while (others := other_benchmarks()) and waited < limit:
        print(f"  waiting for {len(others)} other benchmark process(es), e.g. {others[0]} "
              f"({waited:.0f}s so far)", flush=True)
        time.sleep(30)
        waited += 30


def print_imports(imports: list[Import]) -> None:
    print("\nImport (wall = first request or process start -> last response or exit)")
    head = (f"{'path':>8} {'jobs':>10} {'wall s':>8} {'jobs/s':>8} {'target 120 s':>12} "
            f"{'py CPU s':>9} {'client CPU s':>12} {'PG CPU s':>9} {'py us/job':>9} "
            f"{'PG us/job':>9} {'WAL B/job':>9} {'CPU busy':>8} {'peak RSS MB':>11}")
    print(head)
    print("-" * len(head))
    cores = os.cpu_count() or 1
    for r in imports:
        scaled = r.wall * FULL_JOBS / r.jobs
        verdict = ("met" if r.wall <= IMPORT_TARGET_S else "NOT met") if r.jobs == FULL_JOBS \
            else f"~{scaled:.0f}s@2.7M"
        busy = (r.py_cpu + r.client_cpu + r.pg_cpu) / (r.wall * cores) * 100
        print(f"{r.path:>8} {r.jobs:>10,} {r.wall:>8.1f} {r.rate:>8,.0f} {verdict:>12} "
              f"{r.py_cpu:>9.1f} {r.client_cpu:>12.1f} {r.pg_cpu:>9.1f} "
              f"{r.py_cpu / r.jobs * 1e6:>9.0f} {r.pg_cpu / r.jobs * 1e6:>9.0f} "
              f"{r.wal_bytes / r.jobs:>9.0f} {busy:>7.0f}% {r.peak_rss / MB:>11.0f}")
    for r in imports:
        extra = ", ".join(f"{k} {v:.1f}" for k, v in r.split.items())
        print(f"  {r.path}: {r.how}" + (f"; {extra}" if extra else "")
              + (f"; other counts {r.other}" if r.other else ""))


def print_sizes(sizes: Sizes) -> None:
    print(f"\nSize of the jobs table, {sizes.rows:,} rows, after VACUUM (ANALYZE) "
          f"(as loaded; after REINDEX)")
    head = (f"{'table':>15} {'total MB':>9} {'heap MB':>8} {'indexes MB':>10} "
            f"{'B/row':>6} {'reindexed total MB':>18}  indexes (as loaded -> reindexed, MB)")
    print(head)
    print("-" * len(head))
    for rel in sizes.relations:
        idx = sum(rel.indexes.values())
        each = ", ".join(f"{n} {v / MB:.0f}->{rel.reindexed_indexes.get(n, 0) / MB:.0f}"
                         for n, v in rel.indexes.items())
        print(f"{rel.name:>15} {rel.total / MB:>9.0f} {rel.heap / MB:>8.0f} {idx / MB:>10.0f} "
              f"{rel.total / sizes.rows:>6.0f} {rel.reindexed_total / MB:>18.0f}  {each}")
    by_name = {r.name: r for r in sizes.relations}
    narrow, with_payload = by_name["narrow_jobs"], by_name["narrow_payload"]
    print(f"  source document: {SOURCE_NARROW_MB} MB for its narrow table; ours for the same "
          f"columns: {narrow.total / MB:.0f} MB ({narrow.reindexed_total / MB:.0f} MB "
          f"reindexed)")
    print(f"  cost of the payload column alone: "
          f"{(with_payload.total - narrow.total) / MB:.0f} MB "
          f"({(with_payload.total - narrow.total) / sizes.rows:.0f} B/job)")
    print(f"  cost of everything else in jobs over the narrow table: "
          f"{(by_name['jobs'].total - narrow.total) / MB:.0f} MB")
    total = sum(sizes.columns.values())
    print("  column bytes in jobs, sum(pg_column_size) (heap also has a 24 B row header + "
          "4 B line pointer + padding per row):")
    parts = sorted(sizes.columns.items(), key=lambda kv: -kv[1])
    for name, value in parts:
        print(f"    {name:>16} {value / MB:>7.1f} MB {value / sizes.rows:>6.1f} B/row "
              f"{value / total * 100:>5.1f}%")


def print_latency(lat: Latency) -> None:
    ms = 1000.0
    sent = len(lat.latencies)
    print(f"\nCreate latency: POST /v1/jobs offered open-loop at {lat.rate:g}/s for "
          f"{lat.seconds:g} s ({sent:,} requests, {lat.jobs_before:,} jobs in the table "
          f"before), measured from each request's scheduled send time")
    head = (f"{'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8} "
            f"{'errors':>7} {'done/s':>7} {'max send lag ms':>15} {'API CPU':>8} "
            f"{'PG CPU':>7} {'client CPU':>10} {'API us/req':>10} {'PG us/req':>9}")
    print(head)
    print("-" * len(head))
    print(f"{lat.pct(0.50) * ms:>8.1f} {lat.pct(0.95) * ms:>8.1f} {lat.pct(0.99) * ms:>8.1f} "
          f"{lat.pct(0.999) * ms:>9.1f} {max(lat.latencies) * ms:>8.1f} {lat.errors:>7} "
          f"{sent / lat.wall:>7.0f} {max(lat.send_lag) * ms:>15.1f} "
          f"{lat.api_cpu / lat.wall * 100:>7.0f}% {lat.pg_cpu / lat.wall * 100:>6.0f}% "
          f"{lat.client_cpu / lat.wall * 100:>9.0f}% {lat.api_cpu / sent * 1e6:>10.0f} "
          f"{lat.pg_cpu / sent * 1e6:>9.0f}")
    print(f"  statuses: {dict(sorted(lat.statuses.items()))}; {lat.connections} connections "
          "opened; CPU columns are % of one core")


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help=f"admin URL that may CREATE DATABASE (default {DEFAULT_ADMIN_URL})")
    parser.add_argument("--jobs", type=int, default=FULL_JOBS, help="jobs to import")
    parser.add_argument("--quick", action="store_true",
                        help=f"{QUICK_JOBS:,} jobs and 10 s of load (smoke check)")
    parser.add_argument("--paths", default="library,http",
                        help="import paths to measure, comma-separated: library,http")
    parser.add_argument("--chunk-lines", type=int, default=50_000,
                        help="NDJSON lines per import request (default 50,000)")
    parser.add_argument("--http-concurrency", type=int, default=3,
                        help="concurrent import requests (default 3)")
    parser.add_argument("--processes", type=int, default=2,
                        help="library import processes (default 2)")
    parser.add_argument("--batch", type=int, default=5000,
                        help="library create_jobs batch (default 5,000)")
    parser.add_argument("--rate", type=float, default=200.0, help="creates/s (default 200)")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="seconds of create load (default 30)")
    parser.add_argument("--api-workers", type=int, default=2,
                        help="API processes (crondepot api --workers; default 2, the cores)")
    parser.add_argument("--api-rate", type=float, default=100_000.0,
                        help="CRONDEPOT_API_RATE and _BURST for the API; 0 keeps the defaults")
    parser.add_argument("--pool-size", type=int, default=10,
                        help="CRONDEPOT_API_POOL_SIZE (default 10, the API's default)")
    parser.add_argument("--no-sizes", action="store_true", help="skip the size measurement")
    parser.add_argument("--no-latency", action="store_true", help="skip the create latency")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to this long for other bench/ processes to end")
    parser.add_argument("--import-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--range", help=argparse.SUPPRESS)
    parser.add_argument("--tenant-id", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.jobs, args.seconds = QUICK_JOBS, 10.0
    return args


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet > 0:
        wait_quiet(args.wait_quiet)
    for line in server_report(args.db):
        print(line)
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}", flush=True)
    others = other_benchmarks()
    print(f"other benchmark processes at start: {len(others)}"
          + "".join(f"\n  {o}" for o in others[:5]), flush=True)
    databases = BenchDatabases(args.db, "crondepot_abench_")
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    imports: list[Import] = []
    sizes: Sizes | None = None
    latency: Latency | None = None
    with tempfile.TemporaryDirectory(prefix="crondepot-abench-") as directory:
        began = time.monotonic()
        file = write_ndjson(directory, args.jobs, args.chunk_lines)
        print(f"\n  wrote {file.lines:,} job documents, {file.size / MB:,.0f} MB "
              f"({file.size / file.lines:.0f} B/line), in {time.monotonic() - began:.1f}s",
              flush=True)
        if "library" in paths:
            with fresh_bench_db(databases) as db:
                print("  library import ...", end=" ", flush=True)
                imports.append(import_library(file, db, args.processes, args.batch))
                print(f"{imports[-1].wall:.1f}s, {imports[-1].rate:,.0f} jobs/s", flush=True)
                if not args.no_sizes:
                    print("  sizes ...", flush=True)
                    sizes = measure_sizes(db.url)
        if "http" in paths or not args.no_latency:
            with fresh_bench_db(databases) as db, api_server(
                    db.url, args.api_rate, args.pool_size, args.api_workers) as (base, api):
                if "http" in paths:
                    print("  HTTP import ...", end=" ", flush=True)
                    imports.append(import_http(file, db, base, api, args.http_concurrency))
                    print(f"{imports[-1].wall:.1f}s, {imports[-1].rate:,.0f} jobs/s",
                          flush=True)
                    if sizes is None and not args.no_sizes:
                        print("  sizes ...", flush=True)
                        sizes = measure_sizes(db.url)
                if not args.no_latency:
                    with admin_connect(db.url) as conn:
                        conn.execute("VACUUM (ANALYZE) jobs")
                        conn.execute("CHECKPOINT")
                    print(f"  create latency, {args.rate:g}/s for {args.seconds:g}s ...",
                          flush=True)
                    latency = measure_latency(db, base, api, args.rate, args.seconds)
    print(f"\nother benchmark processes at the end: {len(other_benchmarks())}")
    if imports:
        print_imports(imports)
    if sizes is not None:
        print_sizes(sizes)
    if latency is not None:
        print_latency(latency)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.import_worker:
        return import_worker(args)
    return run_interruptibly(lambda: run(args))


if __name__ == "__main__":
    sys.exit(main())
