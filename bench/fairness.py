"""Fairness benchmark: one tenant's burst against another tenant's steady runs.

Two measurements, each in a fresh database (``crondepot_fbench_<n>``, created, migrated with
``crondepot.db.migrate`` and dropped afterwards) on the machine's PostgreSQL, with ``P`` real
``python -m crondepot worker --concurrency 20 --urgent-only 0 --import workers`` processes
(default P = 2) running the no-op Python handler ``bench.noop`` (bench/workers.py):

- **Burst and steady.** Tenant A (``bank42``) has ``--a-runs`` runs (default 200,000) queued
  and due at once, written in one ``INSERT … SELECT`` as ``tests/support/jobs.py:queued_runs``
  does (one job per run). Tenant B (``bank7``) has ``--b-rate`` jobs (default 100) firing
  every second: a feeder thread, on the second, writes their 100 runs due at that instant
  (``due_at = available_at = now()``, one ``INSERT`` per second, then the scheduler's
  ``NOTIFY``), as the scheduler does for 100 ``* * * * * *``-like jobs. It feeds until A has
  drained. Every run is normal priority. Reported: B's start lag, ``first_claimed_at −
  due_at`` on the database clock, p50/p99/max, over B's runs due while A drains (from A's
  first claim to A's last claim); and A's drain rate beside B.
- **A alone.** The same ``--a-runs`` runs of tenant A and nothing else: the drain rate
  first→last (``min(started_at)`` → ``max(finished_at)``, database clock) and wall (from the
  first worker's start), and CPU per run (psutil): of the workers' own backends (this
  database's client backends, read just before the workers stop), of the worker processes,
  and of all the server's processes. On a machine shared with other work the CPU per run
  moves far less than the rate does.

- **Claim cost** (``--only cost``). The server CPU of one claim (``crondepot_claim_runs``,
  shares 12:6:2, all turns ending up on normal) in one backend, read from /proc through
  psutil: ``--cost-runs`` normal runs (default 40,000) ready and spread over 1, 2, 20 and
  200 tenants (``--cost-tenants``), 1,000 claims of 20 each committed, after 20 claims of
  warm-up. The queue drains as it is measured, as it does under workers; no worker runs.

``--rounds N`` repeats the measurements, interleaved (burst, alone, burst, alone, …);
medians are printed.
To compare two versions of the code, run this once per version with that version's ``src``
first on ``PYTHONPATH`` (the worker processes inherit it), alternating.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/fairness.py                       # 200,000 + 100/s, 2 workers, one round
    python bench/fairness.py --rounds 3 --wait-quiet 1800
    python bench/fairness.py --quick               # 20,000 runs of A (smoke check)
    python bench/fairness.py --only alone --rounds 3
    python bench/fairness.py --only cost --cost-tenants 1 --rounds 5

Figures are printed, never asserted; docs/performance.md records a run.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from common import DEFAULT_ADMIN_URL, BenchDatabases, admin_connect, run_interruptibly, server_cpu
from workers import HANDLER, Children, cpu_since, load_line, pct, server_report, wait_quiet
from workers import worker_argv as crondepot_worker_argv

TENANT_B = "bank7"
POLL_SECONDS = 0.1

# Tenant A's burst: ``count`` jobs, one queued run each, ready now (tests/support/jobs.py).
A_RUNS = """
    WITH j AS (
        INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, payload, active)
        SELECT 1, 'a' || g, '0 9 * * *', 'UTC', 'normal',
               jsonb_build_object('type', 'python', 'handler', %(handler)s::text), '{}', false
        FROM generate_series(1, %(count)s) AS g
        RETURNING id, tenant_id, priority
    )
    INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
    SELECT j.id || ':1791171000', j.id, j.tenant_id, j.priority, now(), now(), now() FROM j
"""
B_JOBS = """
    INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, payload, active)
    SELECT %(tenant)s, 'b' || g, '* * * * *', 'UTC', 'normal',
           jsonb_build_object('type', 'python', 'handler', %(handler)s::text), '{}', false
    FROM generate_series(1, %(count)s) AS g
"""
# One second's runs of tenant B, due now (the run id is the job and the second, as the
# scheduler makes it), and the scheduler's wake-up call for idle workers.
B_SECOND = """
    INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
    SELECT id || ':' || extract(epoch FROM date_trunc('second', now()))::bigint, id,
           tenant_id, 'normal', date_trunc('second', now()), now(), now()
    FROM jobs WHERE tenant_id = %(tenant)s
    ON CONFLICT DO NOTHING
"""
NOTIFY = "SELECT pg_notify('crondepot_runs', 'normal')"
A_LEFT = """
    SELECT EXISTS (SELECT 1 FROM runs WHERE status = 'queued' AND tenant_id = 1)
        OR EXISTS (SELECT 1 FROM runs WHERE status = 'running' AND tenant_id = 1)
"""
B_UNCLAIMED = "SELECT EXISTS (SELECT 1 FROM runs WHERE tenant_id = %(tenant)s " \
              "AND status IN ('queued', 'running'))"
A_SPAN = """
    SELECT count(*) FILTER (WHERE status = 'succeeded' AND attempt = 1),
           min(started_at), max(first_claimed_at), max(finished_at)
    FROM runs WHERE tenant_id = 1
"""
BACKENDS = """
    SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend'
      AND pid <> pg_backend_pid()
"""
B_LAGS = """
    SELECT extract(epoch FROM first_claimed_at - due_at)::float8 * 1000
    FROM runs
    WHERE tenant_id = %(tenant)s AND due_at >= %(start)s AND due_at <= %(stop)s
"""


COST_TENANTS = "INSERT INTO tenants (name, signing_secret) " \
               "SELECT 'cost' || g, 'whsec_bench' FROM generate_series(2, %(tenants)s) AS g"
# ``count`` normal runs, ready, dealt to the tenants in turn, each tenant's oldest first.
COST_RUNS = """
    WITH j AS (
        INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, payload, active)
        SELECT 1 + g %% %(tenants)s, 'c' || g, '0 9 * * *', 'UTC', 'normal',
               jsonb_build_object('type', 'python', 'handler', %(handler)s::text), '{}', false
        FROM generate_series(1, %(count)s) AS g
        RETURNING id, tenant_id, priority
    )
    INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
    SELECT j.id || ':1791171000', j.id, j.tenant_id, j.priority, now(), now(),
           now() - make_interval(secs => (%(count)s - j.id) / 1000.0) FROM j
"""
CLAIM = "SELECT count(*) FROM crondepot_claim_runs('bench', '{12,6,2}', '{12,6,2}')"
COST_CLAIMS = 1000
COST_WARMUP = 20


@dataclass
class Cost:
    tenants: int
    us_per_claim: float = 0.0
    runs_per_claim: float = 0.0


@dataclass
class Burst:
    """Tenant B's start lag while tenant A's burst drains."""

    a_runs: int
    b_rate: int
    b_runs: int = 0                      # B's runs due while A drained
    lags_ms: list[float] = field(default_factory=list)
    a_seconds: float = 0.0               # A's first claim -> A's last record
    b_written: int = 0


@dataclass
class Alone:
    a_runs: int
    wall: float = 0.0
    first_to_last: float = 0.0
    postgres_cpu: float = 0.0            # every server process (other databases' work too)
    backend_cpu: float = 0.0             # the workers' own backends only
    worker_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.a_runs / self.first_to_last if self.first_to_last else 0.0

    @property
    def wall_rate(self) -> float:
        return self.a_runs / self.wall if self.wall else 0.0


def load_a(url: str, count: int) -> None:
    with admin_connect(url) as conn:
        conn.execute(A_RUNS, {"handler": HANDLER, "count": count})


def settle(url: str) -> None:
    with admin_connect(url) as conn:
        conn.execute("VACUUM (ANALYZE)")
        conn.execute("CHECKPOINT")


def start_workers(children: Children, url: str, processes: int, concurrency: int) -> None:
    for i in range(processes):
        children.start(crondepot_worker_argv("crondepot", url, f"w{i + 1}", concurrency),
                       "worker")


def wait_while(conn: psycopg.Connection[Any], query: str, params: dict[str, Any],
               children: Children, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        row = conn.execute(query, params).fetchone()
        if row is not None and not row[0]:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not done after {timeout:.0f}s:\n{children.log_tail()}")
        children.check_alive()
        time.sleep(POLL_SECONDS)


class Feeder:
    """Tenant B's every-second runs, written on the second until stopped."""

    def __init__(self, url: str, tenant: int) -> None:
        self.url = url
        self.tenant = tenant
        self.written = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._stop.set()
        self._thread.join(timeout=10)
        if self.error is not None:
            raise RuntimeError("the feeder of tenant B failed") from self.error

    def _run(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                while not self._stop.wait(1.0 - time.time() % 1.0):
                    with conn.transaction():
                        cur = conn.execute(B_SECOND, {"tenant": self.tenant})
                        self.written += cur.rowcount
                        conn.execute(NOTIFY)
        except BaseException as exc:   # reported by stop()
            self.error = exc


def burst(databases: BenchDatabases, a_runs: int, b_rate: int, processes: int,
          concurrency: int) -> Burst:
    result = Burst(a_runs=a_runs, b_rate=b_rate)
    with databases.fresh() as url:
        load_a(url, a_runs)
        with admin_connect(url) as conn:
            row = conn.execute("INSERT INTO tenants (name, signing_secret) "
                               "VALUES (%s, 'whsec_bench') RETURNING id", (TENANT_B,)).fetchone()
            assert row is not None
            tenant_b = int(row[0])
            conn.execute(B_JOBS, {"tenant": tenant_b, "handler": HANDLER, "count": b_rate})
        settle(url)
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            children = Children()
            feeder = Feeder(url, tenant_b)
            try:
                feeder.start()
                start_workers(children, url, processes, concurrency)
                wait_while(conn, A_LEFT, {}, children, 120 + a_runs / 100, "tenant A's drain")
                feeder.stop()
                wait_while(conn, B_UNCLAIMED, {"tenant": tenant_b}, children, 120,
                           "tenant B's last runs")
            finally:
                feeder.stop()
                children.stop()
            result.b_written = feeder.written
            row = conn.execute(A_SPAN).fetchone()
            assert row is not None
            done, first_claim, last_claim, last_record = row
            if done != a_runs:
                raise RuntimeError(f"expected {a_runs} runs of A succeeded at the first "
                                   f"attempt, found {done}")
            result.a_seconds = (last_record - first_claim).total_seconds()
            result.lags_ms = [lag for (lag,) in conn.execute(
                B_LAGS, {"tenant": tenant_b, "start": first_claim, "stop": last_claim})]
            result.b_runs = len(result.lags_ms)
    return result


def backends_cpu(conn: psycopg.Connection[Any]) -> float:
    """CPU seconds of this database's other client backends (the workers' connections, all
    opened for the drain): unlike the whole server's CPU, not swollen by other work on a
    shared machine. Read before the workers stop, as their backends exit with them."""
    import psutil

    total = 0.0
    for (pid,) in conn.execute(BACKENDS).fetchall():
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(pid).cpu_times()
            total += times.user + times.system
    return total


def alone(databases: BenchDatabases, a_runs: int, processes: int, concurrency: int) -> Alone:
    result = Alone(a_runs=a_runs)
    with databases.fresh() as url:
        load_a(url, a_runs)
        settle(url)
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            children = Children()
            cpu_before = server_cpu(conn)
            started = time.monotonic()
            try:
                start_workers(children, url, processes, concurrency)
                wait_while(conn, A_LEFT, {}, children, 120 + a_runs / 100, "tenant A's drain")
                result.wall = time.monotonic() - started
                result.postgres_cpu = cpu_since(conn, cpu_before)
                result.backend_cpu = backends_cpu(conn)
                result.worker_cpu = children.cpu_seconds("worker")
            finally:
                children.stop()
            row = conn.execute(A_SPAN).fetchone()
            assert row is not None
            done, first_claim, _, last_record = row
            if done != a_runs:
                raise RuntimeError(f"expected {a_runs} runs succeeded at the first attempt, "
                                   f"found {done}")
            result.first_to_last = (last_record - first_claim).total_seconds()
    return result


def cost(databases: BenchDatabases, tenants: int, runs: int) -> Cost:
    """Server CPU per claim in one backend, ``runs`` ready runs over ``tenants`` tenants."""
    import psutil

    result = Cost(tenants=tenants)
    with databases.fresh() as url:
        with admin_connect(url) as conn:
            conn.execute(COST_TENANTS, {"tenants": tenants})
            conn.execute(COST_RUNS, {"tenants": tenants, "count": runs, "handler": HANDLER})
        settle(url)
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SELECT pg_backend_pid()").fetchone()
            assert row is not None
            backend = psutil.Process(row[0])
            for _ in range(COST_WARMUP):
                conn.execute(CLAIM)
            before = backend.cpu_times()
            claimed = 0
            for _ in range(COST_CLAIMS):
                row = conn.execute(CLAIM).fetchone()
                claimed += row[0] if row else 0
            after = backend.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    result.us_per_claim = used / COST_CLAIMS * 1e6
    result.runs_per_claim = claimed / COST_CLAIMS
    return result


def print_costs(costs: list[Cost]) -> None:
    print(f"\nClaim cost: server CPU per claim of 20 (12:6:2, all on normal), one backend, "
          f"{COST_CLAIMS:,} claims committed:")
    for tenants in sorted({c.tenants for c in costs}):
        mine = [c for c in costs if c.tenants == tenants]
        print(f"  {tenants:>4} tenant{'s' if tenants > 1 else ' '} ready: median "
              f"{statistics.median(c.us_per_claim for c in mine):,.0f} us per claim "
              f"({', '.join(f'{c.us_per_claim:,.0f}' for c in mine)}), "
              f"{mine[0].runs_per_claim:.1f} runs per claim")


def print_bursts(bursts: list[Burst]) -> None:
    print(f"\nBurst and steady: tenant A {bursts[0].a_runs:,} runs due at once, tenant B "
          f"{bursts[0].b_rate} runs due every second; B's start lag (first claim - due) over "
          "its runs due while A drains:")
    for b in bursts:
        print(f"  B: {b.b_runs:,} runs, p50 {pct(b.lags_ms, 0.5):,.0f} ms, "
              f"p99 {pct(b.lags_ms, 0.99):,.0f} ms, max {max(b.lags_ms, default=0):,.0f} ms; "
              f"A drained in {b.a_seconds:.1f} s ({b.a_runs / b.a_seconds:,.0f} runs/s "
              f"first->last beside B)")
    if len(bursts) > 1:
        print(f"  medians: B p50 {statistics.median(pct(b.lags_ms, 0.5) for b in bursts):,.0f} "
              f"ms, p99 {statistics.median(pct(b.lags_ms, 0.99) for b in bursts):,.0f} ms")


def print_alones(alones: list[Alone]) -> None:
    print(f"\nTenant A alone: {alones[0].a_runs:,} runs due at once:")
    for a in alones:
        print(f"  first->last {a.first_to_last:.2f} s = {a.rate:,.0f} runs/s; wall {a.wall:.2f} s "
              f"= {a.wall_rate:,.0f} runs/s; CPU per run: the workers' backends "
              f"{a.backend_cpu / a.a_runs * 1e6:.0f} us, the workers "
              f"{a.worker_cpu / a.a_runs * 1e6:.0f} us (all of PostgreSQL "
              f"{a.postgres_cpu / a.a_runs * 1e6:.0f} us)")
    if len(alones) > 1:
        print(f"  medians: first->last {statistics.median(a.rate for a in alones):,.0f} runs/s, "
              f"wall {statistics.median(a.wall_rate for a in alones):,.0f} runs/s, backends "
              f"{statistics.median(a.backend_cpu / a.a_runs for a in alones) * 1e6:.0f} us "
              "CPU per run")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help=f"admin URL that may CREATE DATABASE (default {DEFAULT_ADMIN_URL})")
    parser.add_argument("--a-runs", type=int, default=200_000,
                        help="tenant A's runs due at once (200000)")
    parser.add_argument("--b-rate", type=int, default=100,
                        help="tenant B's runs due every second (100)")
    parser.add_argument("--processes", type=int, default=2, help="worker processes (2)")
    parser.add_argument("--concurrency", type=int, default=20, help="slots per process (20)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat the measurements, interleaved; medians printed (1)")
    parser.add_argument("--only", choices=("burst", "alone", "cost"),
                        help="only this measurement (default: burst and alone)")
    parser.add_argument("--cost-tenants", default="1,2,20,200",
                        help="claim cost: tenants the ready runs are spread over (1,2,20,200)")
    parser.add_argument("--cost-runs", type=int, default=40_000,
                        help="claim cost: ready runs (40000)")
    parser.add_argument("--quick", action="store_true", help="20,000 runs of A (smoke check)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to SECONDS for other busy benchmarks/test runs")
    args = parser.parse_args(argv)
    if args.quick:
        args.a_runs = 20_000
    return args


def run(args: argparse.Namespace) -> None:
    if args.wait_quiet > 0:
        wait_quiet(args.wait_quiet)
    import crondepot

    for line in server_report(args.db):
        print(line)
    print(f"crondepot from: {Path(crondepot.__file__).resolve().parent}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n", flush=True)
    databases = BenchDatabases(args.db, "crondepot_fbench_")
    bursts: list[Burst] = []
    alones: list[Alone] = []
    costs: list[Cost] = []
    for _ in range(max(1, args.rounds)):
        if args.only == "cost":
            for tenants in (int(t) for t in args.cost_tenants.split(",")):
                print(f"  cost: {args.cost_runs:,} runs over {tenants} tenants ...", end=" ",
                      flush=True)
                c = cost(databases, tenants, args.cost_runs)
                print(f"{c.us_per_claim:,.0f} us per claim", flush=True)
                costs.append(c)
            continue
        if args.only != "alone":
            print(f"  burst: A {args.a_runs:,} + B {args.b_rate}/s, {args.processes} workers ...",
                  end=" ", flush=True)
            b = burst(databases, args.a_runs, args.b_rate, args.processes, args.concurrency)
            print(f"B p99 {pct(b.lags_ms, 0.99):,.0f} ms", flush=True)
            bursts.append(b)
        if args.only != "burst":
            print(f"  alone: A {args.a_runs:,}, {args.processes} workers ...", end=" ", flush=True)
            a = alone(databases, args.a_runs, args.processes, args.concurrency)
            print(f"{a.rate:,.0f} runs/s first->last", flush=True)
            alones.append(a)
    if bursts:
        print_bursts(bursts)
    if alones:
        print_alones(alones)
    if costs:
        print_costs(costs)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_interruptibly(lambda: run(args), load_line)


if __name__ == "__main__":
    sys.exit(main())
