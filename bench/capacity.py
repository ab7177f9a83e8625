"""Capacity model: what one job and one run cost the PostgreSQL primary, measured through
crondepot's own code paths on a private cluster (its own port, so every pg_stat_* and WAL
figure is this benchmark's alone).

- **Per job.** ``--jobs`` (100,000) reminder jobs (``bench/ledger.py``'s mix of timetables
  and its http target; a ~140-byte payload) written with ``crondepot.job.create_jobs`` in
  batches of 5,000, as an import does. Bytes per job of every table that grew (heap, indexes,
  TOAST: ``pg_relation_size`` / ``pg_indexes_size`` / ``pg_total_relation_size``), after a
  VACUUM; the WAL and server CPU of writing them.
- **Per run**, ``--rounds`` times (3) in a fresh database each: ``--runs`` (20,000) daily
  reminder jobs whose fire was two hours ago (one fire each, all at the same instant, in four
  zones: a 9:00 burst), created with ``create_jobs``; then its whole life, stage by stage,
  each stage on its own connection configured as the process configures it:
  **tick** ``crondepot.scheduler.tick.tick`` (batch 2000, the scheduler's default) until
  nothing is due; **claim** ``crondepot.queue.claim.claim_runs`` with the worker's weighted
  shares, ``--claim`` (20) runs a call, until nothing is ready; **record**
  ``crondepot.queue.record_successes`` (the outcome writer's statement) ``--record`` (20)
  successes a call; **vacuum** ``VACUUM`` of ``runs`` and ``jobs`` (autovacuum is off during
  the stages so its work lands here, where it is counted). Per stage: WAL bytes
  (``pg_current_wal_lsn()`` difference; records and full-page images from ``pg_stat_wal``),
  CPU of the stage's backend (``/proc/<pid>/stat`` through psutil) and of all the server's
  processes (``common.server_cpu``, the method ``bench/workers.py`` uses), wall time.
  Then bytes per run of each table that grew. Medians over the rounds are printed.
- **Connections.** A real ``crondepot scheduler``, ``crondepot worker --concurrency 20`` and
  ``crondepot api`` against the cluster: ``pg_stat_activity`` counted by ``application_name``
  every 100 ms while idle, then while the scheduler and the worker drain ``--drain``
  (20,000) due runs of a no-op Python handler; the peak per process. That drain's server CPU
  and WAL per run are printed too: the same life end to end through the real processes,
  with everything else they do meanwhile (reaping, heartbeats, their probes). Then the
  API's connections under load: 32 clients listing jobs back to back for 5 s.
- **Model.** From the medians: runs/s and runs/day per core of server CPU, WAL per day, the
  size of a 9:00 burst drained in 1, 5 and 15 minutes, jobs per core; the arithmetic is
  printed. docs/availability.md ("Capacity model") records a run.

Run it (pgserver's PostgreSQL binaries, as ``testkit/crondepot_testkit/cluster.py`` uses them):

    python bench/capacity.py               # 100k jobs, 3 x 20k runs
    python bench/capacity.py --quick       # 10k jobs, 3 x 2k runs

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psutil  # type: ignore[import-untyped]
import psycopg

from common import BenchDatabases, admin_connect, run_interruptibly, server_cpu, wal_lsn
from crondepot.db import connect
from crondepot.job import JobSpec, create_jobs
from crondepot.queue import Success, record_successes
from crondepot.queue.claim import WeightedOrder, claim_runs
from crondepot.runs.retention import DEFAULT_RETENTION
from crondepot.scheduler.tick import tick
from crondepot.worker.loop import _configure_connection
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.processes import free_port
from ledger import MIX, TARGET
from workers import HANDLER, Children, grant_handler, scheduler_argv, worker_argv

CREATE_BATCH = 5000
TICK_BATCH = 2000                   # SchedulerConfig.batch
BURST_ZONES = ("Asia/Kolkata", "Asia/Kolkata", "Asia/Dubai", "Europe/London")
SAMPLE_SECONDS = 0.1
API_CLIENTS = 32
API_SECONDS = 5.0
DAY = 86400
RETENTION_DAYS = DEFAULT_RETENTION.days


class FlushingCluster(PrivateCluster):
    """The tests' private cluster, started as a primary runs: with fsync (the tests turn it
    off on the command line, where no ALTER SYSTEM can turn it back on). Autovacuum is off,
    so VACUUM's work lands in the stage that measures it, not inside another one."""

    def start(self) -> None:
        self._ctl("-o", f"-p {self.port} -h 127.0.0.1 -k {self.root} -c max_connections=200 "
                  "-c autovacuum=off", "start")


def reminder_doc(n: int, kind: str, cron: str, tz: str, target: dict[str, Any]) -> dict[str, Any]:
    """One reminder job's document: ``bench/ledger.py``'s key and payload, as Python."""
    return {"key": f"bank42:{n}:{kind}", "cron": cron, "tz": tz, "target": target,
            "payload": {"phone": f"+91{9800000000 + (n * 7919) % 199999999}", "template": kind,
                        "amount": 1000 + (n * 37) % 90000, "currency": "INR",
                        "account": f"XXXX{n % 10000:04d}", "lang": "en" if n % 3 == 0 else "hi"}}


def mix_specs(count: int) -> list[JobSpec]:
    target = json.loads(TARGET)
    specs: list[JobSpec] = []
    for i, (kind, cron, tz, share) in enumerate(MIX):
        n = count - len(specs) if i == len(MIX) - 1 else round(count * share)
        specs += [JobSpec.from_document(reminder_doc(len(specs) + k, kind, cron, tz, target))
                  for k in range(n)]
    return specs


def burst_specs(count: int, fire: datetime, target: dict[str, Any],
                kind: str = "bill") -> list[JobSpec]:
    """Daily jobs that all fire at ``fire`` (their local wall time there, in four zones)."""
    crons = {}
    for tz in set(BURST_ZONES):
        local = fire.astimezone(ZoneInfo(tz))
        crons[tz] = f"{local.minute} {local.hour} * * *"
    return [JobSpec.from_document(reminder_doc(n, kind, crons[tz], tz, target))
            for n in range(count) for tz in (BURST_ZONES[n % len(BURST_ZONES)],)]


# --------------------------------------------------------------------------- measuring

@dataclass
class Cost:
    wal: int = 0
    wal_records: int = 0
    wal_fpi: int = 0
    backend_cpu: float = 0.0
    server_cpu: float = 0.0
    seconds: float = 0.0
    calls: int = 0


def stat_wal(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    row = conn.execute("SELECT wal_records, wal_fpi FROM pg_stat_wal").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def backend_cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


@contextlib.contextmanager
def measured(probe: psycopg.Connection[Any], work: psycopg.Connection[Any]) -> Iterator[Cost]:
    """The WAL and CPU of what runs inside, ``work``'s backend and the whole server."""
    cost = Cost()
    pid = work.info.backend_pid
    lsn0, (rec0, fpi0) = wal_lsn(probe), stat_wal(probe)
    cpu0, own0, t0 = server_cpu(probe), backend_cpu(pid), time.perf_counter()
    yield cost
    cost.seconds = time.perf_counter() - t0
    # A backend sends its WAL statistics when idle, at most once a second: ask for them now.
    work.execute("SELECT pg_stat_force_next_flush()")
    work.execute("SELECT 1")
    time.sleep(0.05)
    cost.backend_cpu = backend_cpu(pid) - own0
    cost.server_cpu = sum(t - cpu0.get(k, 0.0) for k, t in server_cpu(probe).items())
    row = probe.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)", (lsn0,)).fetchone()
    assert row is not None
    rec1, fpi1 = stat_wal(probe)
    cost.wal, cost.wal_records, cost.wal_fpi = int(row[0]), rec1 - rec0, fpi1 - fpi0


SIZES = """
    SELECT c.relname, pg_relation_size(c.oid), pg_indexes_size(c.oid),
           pg_total_relation_size(c.oid)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind = 'r'
"""


def sizes(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, int, int]]:
    return {r[0]: (r[1], r[2], r[3]) for r in conn.execute(SIZES)}


def grown(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]],
          per: int) -> list[tuple[str, float, float, float]]:
    """(table, heap, indexes, total incl. TOAST) bytes per unit of every table that grew."""
    rows = []
    for name, (heap, idx, total) in sorted(after.items()):
        h0, i0, t0 = before.get(name, (0, 0, 0))
        if total > t0:
            rows.append((name, (heap - h0) / per, (idx - i0) / per, (total - t0) / per))
    return rows


def print_sizes(rows: list[tuple[str, float, float, float]], unit: str) -> None:
    print(f"    {'table':<16} {'heap':>8} {'indexes':>8} {'total':>8}   bytes per {unit} "
          "(total includes TOAST and the free-space/visibility maps)")
    for name, heap, idx, total in rows:
        print(f"    {name:<16} {heap:8.1f} {idx:8.1f} {total:8.1f}")
    print(f"    {'all':<16} {sum(r[1] for r in rows):8.1f} {sum(r[2] for r in rows):8.1f} "
          f"{sum(r[3] for r in rows):8.1f}")


def print_cost(name: str, cost: Cost, per: int) -> None:
    print(f"    {name:<8} WAL {cost.wal / per:7.0f} B/run ({cost.wal_records / per:5.2f} records, "
          f"{cost.wal_fpi / per:5.3f} FPI)  backend CPU {cost.backend_cpu / per * 1e6:6.1f} us  "
          f"server CPU {cost.server_cpu / per * 1e6:6.1f} us  ({cost.calls:.0f} calls, "
          f"{cost.seconds:.2f}s)")


def loadavg() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


# --------------------------------------------------------------------------- stages

def per_job(dbs: BenchDatabases, count: int) -> dict[str, Any]:
    print(f"\n== per job: {count:,} reminder jobs (ledger mix) through create_jobs, "
          f"batches of {CREATE_BATCH:,}  [{loadavg()}]", flush=True)
    specs = mix_specs(count)
    with dbs.fresh() as url, admin_connect(url) as probe, \
            connect(url, application_name="capacity-api") as conn:
        probe.execute("VACUUM")
        before = sizes(probe)
        with measured(probe, conn) as cost:
            for start in range(0, count, CREATE_BATCH):
                create_jobs(conn, 1, specs[start:start + CREATE_BATCH])
                cost.calls += 1
        probe.execute("VACUUM (ANALYZE)")
        rows = grown(before, sizes(probe), count)
    print_sizes(rows, "job")
    print(f"    writing them: WAL {cost.wal / count:.0f} B/job, backend CPU "
          f"{cost.backend_cpu / count * 1e6:.1f} us/job, server CPU "
          f"{cost.server_cpu / count * 1e6:.1f} us/job ({cost.seconds:.1f}s)")
    return {"bytes": sum(r[3] for r in rows), "heap": sum(r[1] for r in rows),
            "indexes": sum(r[2] for r in rows), "rows": rows}


@dataclass
class Round:
    stages: dict[str, Cost] = field(default_factory=dict)
    bytes_per_run: list[tuple[str, float, float, float]] = field(default_factory=list)
    load: str = ""


def per_run(dbs: BenchDatabases, count: int, claim: int, record: int) -> Round:
    result = Round(load=loadavg())
    target = json.loads(TARGET)
    with dbs.fresh() as url, admin_connect(url) as probe:
        now = probe.execute("SELECT now()").fetchone()[0]      # type: ignore[index]
        fire = (now - timedelta(hours=2)).replace(second=0, microsecond=0)
        specs = burst_specs(count, fire, target)
        with connect(url, application_name="capacity-api") as api:
            for start in range(0, count, CREATE_BATCH):
                create_jobs(api, 1, specs[start:start + CREATE_BATCH],
                            now=fire - timedelta(hours=1))
        probe.execute("VACUUM (ANALYZE)")
        probe.execute("CHECKPOINT")
        before = sizes(probe)

        with connect(url, application_name="crondepot-scheduler") as conn, \
                measured(probe, conn) as cost:
            written = 0
            while True:
                done = tick(conn, batch=TICK_BATCH)
                written += done.inserted
                cost.calls += 1
                if not done.full:
                    break
        result.stages["tick"] = cost
        assert written == count, f"tick wrote {written} runs, expected {count}"

        claimed: list[Any] = []
        order = WeightedOrder()
        with connect(url, application_name="crondepot-worker") as conn:
            _configure_connection(conn)
            with measured(probe, conn) as cost:
                while True:
                    got = claim_runs(conn, owner="capacity", shares=order.take(claim))
                    cost.calls += 1
                    if not got:
                        break
                    claimed += got
            result.stages["claim"] = cost
            assert len(claimed) == count, f"claimed {len(claimed)} runs, expected {count}"
            with measured(probe, conn) as cost:
                recorded = 0
                for start in range(0, count, record):
                    recorded += len(record_successes(conn, [
                        Success(r.run_id, r.lease_token, r.attempt)
                        for r in claimed[start:start + record]]))
                    cost.calls += 1
            result.stages["record"] = cost
            assert recorded == count, f"recorded {recorded} runs, expected {count}"

        with admin_connect(url) as conn, measured(probe, conn) as cost:
            conn.execute("VACUUM runs")
            conn.execute("VACUUM jobs")
            cost.calls = 2
        result.stages["vacuum"] = cost
        result.bytes_per_run = grown(before, sizes(probe), count)
    return result


# --------------------------------------------------------------------------- connections

PENDING = ("SELECT EXISTS (SELECT 1 FROM jobs WHERE active AND NOT paused "
           "AND next_run_at <= now()) "
           "OR EXISTS (SELECT 1 FROM runs WHERE status = 'queued') "
           "OR EXISTS (SELECT 1 FROM runs WHERE status = 'running')")

ACTIVITY = """
    SELECT application_name, count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() GROUP BY 1
"""


class Sampler(threading.Thread):
    """Peak connections per application_name, every SAMPLE_SECONDS."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.peak: dict[str, int] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        with admin_connect(self.url) as conn:
            while not self.stop.wait(SAMPLE_SECONDS):
                for name, n in conn.execute(ACTIVITY):
                    if not name or name.startswith("capacity"):   # the benchmark's own
                        continue
                    self.peak[name] = max(self.peak.get(name, 0), n)

    def result(self) -> dict[str, int]:
        self.stop.set()
        self.join(timeout=5)
        return dict(sorted(self.peak.items()))


def connections(dbs: BenchDatabases, drain: int, idle_seconds: float,
                rounds: int) -> tuple[float, float]:
    """Connections per process, idle and draining; and each drain's server CPU and WAL per
    run. Returns the medians over the drains (server seconds per run, WAL bytes per run)."""
    print(f"\n== connections: a real scheduler, worker --concurrency 20 and api; peak "
          f"pg_stat_activity per application_name  [{loadavg()}]", flush=True)
    per_run: list[tuple[float, float]] = []
    with dbs.fresh() as url:
        with admin_connect(url) as conn:
            grant_handler(conn)
        children = Children()
        try:
            children.start(scheduler_argv(url, "scheduler"), "scheduler")
            children.start(worker_argv("crondepot", url, "worker", 20), "worker")
            port = free_port()
            # The per-token request budget high enough that api_load's requests reach the
            # database rather than a 429.
            os.environ.update(CRONDEPOT_API_RATE="1000000", CRONDEPOT_API_BURST="1000000")
            children.start([sys.executable, "-m", "crondepot", "api", "--db", url,
                            "--port", str(port)], "api")
            time.sleep(5)                         # start-up: imports, pools opened
            children.check_alive()
            idle = Sampler(url)
            idle.start()
            time.sleep(idle_seconds)
            print(f"    idle {idle_seconds:.0f}s: {idle.result()}")
            target = {"type": "python", "handler": HANDLER}
            for i in range(rounds):
                busy = Sampler(url)
                busy.start()
                with admin_connect(url) as conn:
                    now = conn.execute("SELECT now()").fetchone()[0]     # type: ignore[index]
                    fire = (now - timedelta(minutes=2)).replace(second=0, microsecond=0)
                    with connect(url, application_name="capacity-api") as api:
                        create_jobs(api, 1, burst_specs(drain, fire, target, f"d{i}"),
                                    now=fire - timedelta(hours=1))
                    # The drain's server cost, end to end through the real processes (tick,
                    # claim, record, and what else they do meanwhile: reaping, heartbeats),
                    # less this probe's own backend.
                    client0 = {r: children.cpu_seconds(r) for r in ("scheduler", "worker")}
                    load = loadavg()
                    with measured(conn, conn) as cost:
                        started = time.monotonic()
                        while time.monotonic() - started < 600:
                            children.check_alive()
                            if not conn.execute(PENDING).fetchone()[0]:  # type: ignore[index]
                                break
                            time.sleep(0.2)
                    client = {r: children.cpu_seconds(r) - t for r, t in client0.items()}
                    row = conn.execute("SELECT count(*) FILTER (WHERE status = 'succeeded' "
                                       "AND attempt = 1), count(*) FROM runs").fetchone()
                    assert row is not None
                server = (cost.server_cpu - cost.backend_cpu) / drain
                per_run.append((server, cost.wal / drain))
                print(f"    drain {i + 1}: {drain:,} runs due at once ({row[0]:,} of {row[1]:,} "
                      f"runs so far succeeded at attempt 1) in {cost.seconds:.1f}s  [{load}]")
                print(f"      peak connections: {busy.result()}")
                print(f"      server CPU {server * 1e6:.1f} us/run (less the probe's "
                      f"{cost.backend_cpu / drain * 1e6:.1f}), WAL {cost.wal / drain:.0f} B/run "
                      f"({cost.wal_fpi / drain:.3f} FPI); client CPU: scheduler "
                      f"{client['scheduler'] / drain * 1e6:.0f} us/run, worker "
                      f"{client['worker'] / drain * 1e6:.0f} us/run")
            api_load(url, port, children)
        finally:
            children.stop()
    return (statistics.median(x[0] for x in per_run), statistics.median(x[1] for x in per_run))


def api_load(url: str, port: int, children: Children) -> None:
    """The API's connections under load: API_CLIENTS clients listing jobs back to back."""
    import httpx

    from crondepot.tenancy.tokens import create_token

    with admin_connect(url) as conn:
        token = create_token(conn, 1, label="capacity").token
    sampler = Sampler(url)
    sampler.start()
    stop = time.monotonic() + API_SECONDS
    answers: dict[int, int] = {}
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            while time.monotonic() < stop:
                code = http.get("/v1/jobs", params={"limit": 100}).status_code
                with lock:
                    answers[code] = answers.get(code, 0) + 1

    threads = [threading.Thread(target=client, daemon=True) for _ in range(API_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=API_SECONDS + 60)
    children.check_alive()
    print(f"    api under load ({API_CLIENTS} clients listing jobs for {API_SECONDS:.0f}s, "
          f"answers {dict(sorted(answers.items()))}): peak connections {sampler.result()}")


# --------------------------------------------------------------------------- model

def model(rounds: list[Round]) -> dict[str, float]:
    names = ("tick", "claim", "record", "vacuum")

    def med(stage: str, attr: str) -> float:
        return statistics.median(getattr(r.stages[stage], attr) for r in rounds)

    n = RUNS
    print(f"\n== per run, median of {len(rounds)} rounds of {n:,} runs "
          f"(loads: {'; '.join(r.load for r in rounds)})")
    for stage in names:
        cost = Cost(**{a: med(stage, a) for a in ("wal", "wal_records", "wal_fpi", "backend_cpu",
                                                  "server_cpu", "seconds", "calls")})
        print_cost(stage, cost, n)
    wal = sum(med(s, "wal") for s in names) / n
    backend = sum(med(s, "backend_cpu") for s in names) / n
    server = sum(med(s, "server_cpu") for s in names) / n
    print(f"    whole life: WAL {wal:.0f} B/run, backend CPU {backend * 1e6:.1f} us/run, "
          f"server CPU {server * 1e6:.1f} us/run")
    per_run_rows = rounds[len(rounds) // 2].bytes_per_run
    print("    bytes per run kept (after VACUUM; one round):")
    print_sizes(per_run_rows, "run")
    # The jobs table's growth is the dead versions the tick's updates left, freed by VACUUM
    # and reused by the next fires: not bytes kept per run.
    kept = sum(r[3] for r in per_run_rows if r[0] != "jobs")
    print("    (jobs: the space of the dead row version each fire leaves, freed by VACUUM "
          "and reused by the next fires; kept per run: the other tables, "
          f"{kept:.0f} B)")

    return {"server": server, "wal": wal, "kept": kept, "vacuum": med("vacuum", "server_cpu") / n,
            "vacuum_wal": med("vacuum", "wal") / n}


def capacity(job: dict[str, Any], life: dict[str, float], e2e: tuple[float, float] | None,
             cores: int) -> None:
    """The arithmetic, printed: per core of server CPU, from the end-to-end drains (plus the
    VACUUM their runs will need) when measured, else from the stages."""
    if e2e is not None:
        server, wal = e2e[0] + life["vacuum"], e2e[1] + life["vacuum_wal"]
        basis = (f"end-to-end drains {e2e[0] * 1e6:.1f} us + VACUUM {life['vacuum'] * 1e6:.1f} "
                 f"us = {server * 1e6:.1f} us/run; WAL {e2e[1]:.0f} + "
                 f"{life['vacuum_wal']:.0f} = {wal:.0f} B/run")
    else:
        server, wal = life["server"], life["wal"]
        basis = f"stages {server * 1e6:.1f} us/run; WAL {wal:.0f} B/run"
    rate = 1 / server
    print(f"\n== model, per core of PostgreSQL CPU ({basis})")
    print(f"    one core: 1 / {server * 1e6:.1f} us = {rate:,.0f} runs/s; flat out all day "
          f"{rate * DAY / 1e6:,.0f} M runs/day")
    for minutes in (1, 5, 15):
        print(f"    9:00 burst drained in {minutes:>2} min: {rate * 60 * minutes:,.0f} runs per "
              f"core (x {cores} cores here: {rate * 60 * minutes * cores:,.0f})")
    print(f"    WAL at {rate:,.0f} runs/s: {wal * rate / 1e6:.1f} MB/s per core "
          f"(what a synchronous standby must receive and apply); 1 M runs = "
          f"{wal * 1e6 / 1e9:.2f} GB of WAL")
    print(f"    storage: {job['bytes']:.0f} B/job, {life['kept']:.0f} B/run kept until pruned: "
          f"10 M jobs = {job['bytes'] * 1e7 / 1e9:.1f} GB; 10 M runs/day x {RETENTION_DAYS} days "
          f"of retention (the worker's default) = "
          f"{life['kept'] * 1e7 * RETENTION_DAYS / 1e9:.1f} GB")


RUNS = 20_000


def main() -> int:
    global RUNS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--claim", type=int, default=20, help="runs per claim call")
    parser.add_argument("--record", type=int, default=20, help="successes per record call")
    parser.add_argument("--drain", type=int, default=20_000)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--no-connections", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.runs, args.drain, args.idle_seconds = 10_000, 2_000, 2_000, 3.0
    RUNS = args.runs

    def run() -> None:
        cluster = FlushingCluster()
        try:
            cluster.start()
            with admin_connect(cluster.url) as conn:
                version = conn.execute("SHOW server_version").fetchone()
                settings = [f"{name}={conn.execute(f'SHOW {name}').fetchone()[0]}"  # type: ignore[index]
                            for name in ("shared_buffers", "wal_level", "fsync",
                                         "synchronous_commit", "full_page_writes",
                                         "autovacuum")]
            print(f"private cluster on port {cluster.port}: PostgreSQL "
                  f"{version[0] if version else '?'}; {', '.join(settings)}")
            print(f"machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.1f} "
                  f"GiB; {loadavg()}")
            dbs = BenchDatabases(cluster.url, "crondepot_capacity_")
            job = per_job(dbs, args.jobs)
            rounds = []
            for i in range(args.rounds):
                print(f"\n== per run, round {i + 1}: {args.runs:,} runs, claim {args.claim}, "
                      f"record {args.record}  [{loadavg()}]", flush=True)
                r = per_run(dbs, args.runs, args.claim, args.record)
                for stage, cost in r.stages.items():
                    print_cost(stage, cost, args.runs)
                rounds.append(r)
            life = model(rounds)
            e2e = None
            if not args.no_connections:
                e2e = connections(dbs, args.drain, args.idle_seconds, args.rounds)
            capacity(job, life, e2e, os.cpu_count() or 1)
        finally:
            cluster.destroy()

    return run_interruptibly(run)


if __name__ == "__main__":
    sys.exit(main())
