"""Server connections of workers, a scheduler and the API, direct and through PgBouncer in
transaction mode (``--pooled-db``), idle and while draining runs to a slow target under API
load.

In a fresh database per mode (``crondepot_pgbbench_<mode>``, migrated, dropped after), one
``crondepot scheduler`` and ``--workers`` real ``crondepot worker`` processes (default 4,
``--concurrency 20 --urgent-only 0``) start with nothing to do; the idle count is taken once
every worker's LISTEN session is up and the count has not changed for 2 s. Then ``--runs``
queued runs (default 4,000) of the handler ``bench.sleep`` (registered by this module, sleeps
``--call-ms``, default 50 ms: a slow target, where slots and connections matter) are
inserted, and PostgreSQL's sessions on the database are counted every 20 ms until none is
queued or running; every run must be ``succeeded``. One ``crondepot api`` process (its
default pool of 10) serves ``--api-clients`` threads (default 16) that ask, back to back,
``GET /v1/jobs?limit=10`` and ``POST /v1/jobs/{id}/pause`` meanwhile (each a real request
with its token, its tenant and, for the pause, its audit entry); every answer must be 2xx.

Modes: ``direct`` (``--db`` only, as before); ``pgbouncer-N``: a private PgBouncer 1.18+
(deploy/pgbouncer/pgbouncer.ini with ``default_pool_size = N``, for N in ``--pool-sizes``,
default 20 and 4) with the workers' and scheduler's ``--pooled-db`` as a role with
``crondepot.tenant_id = 'all'``, and the API's ``--pooled-db`` as its own role
(``crondepot_api``, the runtime role's privileges, no tenant setting; ``--api-direct``: the
API on ``--db`` as before); LISTEN and maintenance direct. Counted: every backend of the
database but the sampler's, split into direct sessions (the runtime role), the workers'
and scheduler's pooled ones (the pooled role) and the API's (its role, direct or pooled).

    python bench/pgbouncer_connections.py [--db postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg

HANDLER = "bench.sleep"

if __name__ != "__main__":
    # Worker processes import this file (``--import pgbouncer_connections``) for the handler.
    from crondepot import RunContext, handler

    @handler(HANDLER)
    def sleep(run: RunContext) -> None:
        """A target that answers in ``ms`` milliseconds."""
        time.sleep(float(run.payload.get("ms", 0)) / 1000)


BENCH_DIR = Path(__file__).resolve().parent

QUEUED_RUNS = """
    WITH j AS (
        INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, payload, active)
        SELECT %(tenant)s, 'b' || g, '0 9 * * *', 'UTC', 'normal',
               jsonb_build_object('type', 'python', 'handler', %(handler)s::text),
               jsonb_build_object('ms', %(ms)s::int), false
        FROM generate_series(1, %(count)s) AS g
        RETURNING id, tenant_id, priority
    )
    INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
    SELECT j.id || ':1791171000', j.id, j.tenant_id, j.priority, now(), now(), now() FROM j
"""

# Jobs the API's clients pause (again and again: pausing a paused job changes nothing, and
# is still a request with its transaction); due in a year, so the scheduler never runs them.
API_JOBS = """
    INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, next_run_at, next_nominal_at)
    SELECT %(tenant)s, 'api' || g, '0 9 * * *', 'UTC', 'normal',
           jsonb_build_object('type', 'python', 'handler', %(handler)s::text),
           date_trunc('day', now()) + interval '366 days 9 hours',
           date_trunc('day', now()) + interval '366 days 9 hours'
    FROM generate_series(1, 200) AS g
"""

SESSIONS = """
    SELECT usename, count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type =
          'client backend'
    GROUP BY usename
"""


API_ROLE = "crondepot_api"


def _api_role(admin_url: str) -> None:
    """The API's own role: the runtime role's privileges, no default tenant (it sees no
    row until a request names its tenant), so its sessions can be counted apart."""
    from psycopg import errors

    with psycopg.connect(admin_url, autocommit=True) as conn, \
            suppress(errors.DuplicateObject, errors.UniqueViolation):
        conn.execute(f"CREATE ROLE {API_ROLE} LOGIN IN ROLE crondepot_runtime")


class ApiLoad:
    """``clients`` threads asking the API back to back until stopped; counts answers."""

    def __init__(self, base: str, token: str, job_ids: list[int], clients: int) -> None:
        import httpx

        self.ok = self.failed = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        headers = {"Authorization": f"Bearer {token}"}

        def loop(n: int) -> None:
            with httpx.Client(base_url=base, headers=headers, timeout=30) as http:
                i = n
                while not self._stop.is_set():
                    i += clients
                    if i % 2:
                        r = http.get("/v1/jobs", params={"limit": 10})
                    else:
                        r = http.post(f"/v1/jobs/{job_ids[i % len(job_ids)]}/pause", json={})
                    with self._lock:
                        if r.status_code < 300:
                            self.ok += 1
                        else:
                            self.failed += 1
                            if len(self.errors) < 5:
                                self.errors.append(f"{r.status_code} {r.text[:200]}")

        self._threads = [threading.Thread(target=loop, args=(n,), daemon=True)
                         for n in range(clients)]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)


def _wait_http(base: str, deadline: float) -> None:
    import httpx

    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the API at {base} did not get ready")


def _counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return {user: int(n) for user, n in conn.execute(SESSIONS).fetchall()}


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(BENCH_DIR), os.environ.get("PYTHONPATH")) if p)
    # The API's per-token budget off the way: its clients are the load, not a client to slow.
    return {**os.environ, "PYTHONPATH": path, "CRONDEPOT_LOG_LEVEL": "WARNING",
            "CRONDEPOT_LOG_FORMAT": "text", "CRONDEPOT_API_RATE": "100000",
            "CRONDEPOT_API_BURST": "100000"}


@contextmanager
def _processes(argvs: list[list[str]]) -> Iterator[None]:
    with tempfile.TemporaryFile() as log:
        popens = [subprocess.Popen([sys.executable, "-m", "crondepot", *argv], stdout=log,
                                   stderr=subprocess.STDOUT, env=_env()) for argv in argvs]
        try:
            yield
            for p in popens:
                if p.poll() is not None:
                    log.seek(0)
                    raise SystemExit(f"a process exited: {log.read().decode()[-3000:]}")
        finally:
            for p in popens:
                p.terminate()
            for p in popens:
                p.wait(timeout=60)


def measure(args: argparse.Namespace, mode: str, pool_size: int | None) -> dict[str, Any]:
    from common import admin_connect, fresh_database
    from crondepot.db import roles
    from crondepot.tenancy.grants import grant
    from crondepot.tenancy.tenants import create_tenant
    from crondepot_testkit.pgbouncer import POOLED_ROLE, PgBouncer, make_pooled_role
    from crondepot_testkit.processes import free_port

    with fresh_database(args.db, f"crondepot_pgbbench_{mode.replace('-', '_')}") as url:
        direct = roles.runtime_url(url, roles.DEFAULT_RUNTIME_ROLE)
        _api_role(url)
        api_direct = roles.runtime_url(url, API_ROLE)
        bouncer = None
        pooled: list[str] = []
        api_pooled: list[str] = []
        if pool_size is not None:
            make_pooled_role(url)
            bouncer = PgBouncer(url, default_pool_size=pool_size,
                                users=("postgres", roles.DEFAULT_RUNTIME_ROLE, POOLED_ROLE,
                                       API_ROLE))
            pooled = ["--pooled-db", bouncer.url(url)]
            if not args.api_direct:
                api_pooled = ["--pooled-db", bouncer.url(url, API_ROLE)]
        api_port = free_port()
        base = f"http://127.0.0.1:{api_port}"
        try:
            with admin_connect(url) as conn:
                made = create_tenant(conn, "bench")
                tenant_id = made.id
                grant(conn, tenant_id, handlers=[HANDLER])
                # Jobs for the API's pauses: never due, so the drain is the queued runs'.
                conn.execute(API_JOBS, {"tenant": tenant_id, "handler": HANDLER})
                job_ids = [r[0] for r in conn.execute("SELECT id FROM jobs ORDER BY id")]
                argvs = [["scheduler", "--db", direct, *pooled]]
                argvs += [["worker", "--db", direct, *pooled, "--import",
                           "pgbouncer_connections", "--concurrency", str(args.concurrency),
                           "--urgent-only", "0", "--name", f"w{i}"]
                          for i in range(args.workers)]
                argvs += [["api", "--db", api_direct, *api_pooled, "--port", str(api_port)]]
                with _processes(argvs):
                    _wait_http(base, time.monotonic() + 120)
                    deadline = time.monotonic() + 120
                    last, since = None, time.monotonic()
                    while True:
                        listeners = conn.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                            "current_database() AND application_name = "
                            "'crondepot-worker-listen'").fetchone()
                        now_counts = _counts(conn)
                        if now_counts != last:
                            last, since = now_counts, time.monotonic()
                        if (listeners and listeners[0] == args.workers
                                and time.monotonic() - since >= 2):
                            break
                        if time.monotonic() > deadline:
                            raise SystemExit(f"{mode}: processes did not settle: {last}")
                        time.sleep(0.1)
                    idle = now_counts
                    conn.execute(QUEUED_RUNS, {"tenant": tenant_id, "handler": HANDLER,
                                               "ms": args.call_ms, "count": args.runs})
                    load = ApiLoad(base, made.token, job_ids, args.api_clients)
                    start = time.monotonic()
                    peak: dict[str, int] = {}
                    peak_total = 0
                    while True:
                        counts = _counts(conn)
                        for user, n in counts.items():
                            peak[user] = max(peak.get(user, 0), n)
                        peak_total = max(peak_total, sum(counts.values()))
                        left = conn.execute("SELECT count(*) FROM runs WHERE status IN "
                                            "('queued', 'running')").fetchone()
                        if left and left[0] == 0:
                            break
                        if time.monotonic() - start > 600:
                            raise SystemExit(f"{mode}: drain did not finish")
                        time.sleep(0.02)
                    seconds = time.monotonic() - start
                    load.stop()
                    if load.failed or not load.ok:
                        raise SystemExit(f"{mode}: API answers: {load.ok} ok, {load.failed} "
                                         f"failed: {load.errors}")
                    ok = conn.execute("SELECT count(*) FROM runs WHERE status = 'succeeded'"
                                      ).fetchone()
                    if not ok or ok[0] != args.runs:
                        raise SystemExit(f"{mode}: {ok} of {args.runs} runs succeeded")
        finally:
            if bouncer is not None:
                bouncer.close()
    runtime = roles.DEFAULT_RUNTIME_ROLE
    return {"mode": mode, "idle_direct": idle.get(runtime, 0),
            "idle_pooled": idle.get(POOLED_ROLE, 0), "peak_direct": peak.get(runtime, 0),
            "peak_pooled": peak.get(POOLED_ROLE, 0), "peak_total": peak_total,
            "idle_api": idle.get(API_ROLE, 0), "peak_api": peak.get(API_ROLE, 0),
            "api_requests": load.ok, "seconds": seconds}


def main() -> None:
    sys.path.insert(0, str(BENCH_DIR))
    from common import DEFAULT_ADMIN_URL

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=os.environ.get("CRONDEPOT_BENCH_ADMIN_URL",
                                                       DEFAULT_ADMIN_URL))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--runs", type=int, default=4000)
    parser.add_argument("--call-ms", type=int, default=50)
    parser.add_argument("--pool-sizes", default="20,4",
                        help="PgBouncer default_pool_size values to try, comma-separated")
    parser.add_argument("--api-clients", type=int, default=16,
                        help="threads asking the API back to back during the drain")
    parser.add_argument("--api-direct", action="store_true",
                        help="the API on --db in every mode (as before the API could go "
                             "through the pooler)")
    args = parser.parse_args()
    modes: list[tuple[str, int | None]] = [("direct", None)]
    modes += [(f"pgbouncer-{n}", int(n)) for n in args.pool_sizes.split(",") if n]
    print(f"{args.workers} workers x {args.concurrency} slots + 1 scheduler + 1 API process "
          f"({args.api_clients} clients, API {'direct' if args.api_direct else 'pooled'} "
          f"in the pgbouncer modes); {args.runs} runs of a {args.call_ms} ms target")
    print("| mode | idle: direct + workers' pooled + API | peak: direct + workers' pooled + "
          "API = total | peak per worker | drain s | runs/s | API req/s |")
    print("|---|---|---|---|---|---|---|")
    for mode, size in modes:
        r = measure(args, mode, size)
        # The scheduler's direct sessions (LISTEN, maintenance) are counted with the
        # workers': "per worker" is the total over the workers, a bound from above.
        per_worker = (r["peak_total"] - r["peak_api"]) / args.workers
        print(f"| {mode} | {r['idle_direct']} + {r['idle_pooled']} + {r['idle_api']} | "
              f"{r['peak_direct']} + {r['peak_pooled']} + {r['peak_api']} = "
              f"{r['peak_total']} | {per_worker:.1f} | {r['seconds']:.1f} | "
              f"{args.runs / r['seconds']:.0f} | {r['api_requests'] / r['seconds']:.0f} |",
              flush=True)


if __name__ == "__main__":
    main()
