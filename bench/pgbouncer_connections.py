"""Server connections of workers and a scheduler, direct and through PgBouncer in transaction
mode (``--pooled-db``), idle and while draining runs to a slow target.

In a fresh database per mode (``crondepot_pgbbench_<mode>``, migrated, dropped after), one
``crondepot scheduler`` and ``--workers`` real ``crondepot worker`` processes (default 4,
``--concurrency 20 --urgent-only 0``) start with nothing to do; the idle count is taken once
every worker's LISTEN session is up and the count has not changed for 2 s. Then ``--runs``
queued runs (default 4,000) of the handler ``bench.sleep`` (registered by this module, sleeps
``--call-ms``, default 50 ms: a slow target, where slots and connections matter) are
inserted, and PostgreSQL's sessions on the database are counted every 20 ms until none is
queued or running; every run must be ``succeeded``.

Modes: ``direct`` (``--db`` only, as before); ``pgbouncer-N``: a private PgBouncer 1.18+
(deploy/pgbouncer/pgbouncer.ini with ``default_pool_size = N``, for N in ``--pool-sizes``,
default 20 and 4) with the workers' and scheduler's ``--pooled-db`` as a role with
``crondepot.tenant_id = 'all'``; LISTEN and maintenance direct. Counted: every backend of the
database but the sampler's, split into direct sessions (the runtime role) and the pooler's
server connections (the pooled role).

    python bench/pgbouncer_connections.py [--db postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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

SESSIONS = """
    SELECT usename, count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type =
          'client backend'
    GROUP BY usename
"""


def _counts(conn: psycopg.Connection[Any]) -> dict[str, int]:
    return {user: int(n) for user, n in conn.execute(SESSIONS).fetchall()}


def _env() -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(BENCH_DIR), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "CRONDEPOT_LOG_LEVEL": "WARNING",
            "CRONDEPOT_LOG_FORMAT": "text"}


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

    with fresh_database(args.db, f"crondepot_pgbbench_{mode.replace('-', '_')}") as url:
        direct = roles.runtime_url(url, roles.DEFAULT_RUNTIME_ROLE)
        bouncer = None
        pooled: list[str] = []
        if pool_size is not None:
            make_pooled_role(url)
            bouncer = PgBouncer(url, default_pool_size=pool_size)
            pooled = ["--pooled-db", bouncer.url(url)]
        try:
            with admin_connect(url) as conn:
                tenant_id = create_tenant(conn, "bench").id
                grant(conn, tenant_id, handlers=[HANDLER])
                argvs = [["scheduler", "--db", direct, *pooled]]
                argvs += [["worker", "--db", direct, *pooled, "--import",
                           "pgbouncer_connections", "--concurrency", str(args.concurrency),
                           "--urgent-only", "0", "--name", f"w{i}"]
                          for i in range(args.workers)]
                with _processes(argvs):
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
            "seconds": seconds}


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
    args = parser.parse_args()
    modes: list[tuple[str, int | None]] = [("direct", None)]
    modes += [(f"pgbouncer-{n}", int(n)) for n in args.pool_sizes.split(",") if n]
    print(f"{args.workers} workers x {args.concurrency} slots + 1 scheduler; {args.runs} runs "
          f"of a {args.call_ms} ms target")
    print("| mode | idle: direct + pooler's | peak: direct + pooler's = total | "
          "peak per worker | drain s | runs/s |")
    print("|---|---|---|---|---|---|")
    for mode, size in modes:
        r = measure(args, mode, size)
        # The scheduler's direct sessions (LISTEN, maintenance) are counted with the
        # workers': "per worker" is the total over the workers, a bound from above.
        per_worker = r["peak_total"] / args.workers
        print(f"| {mode} | {r['idle_direct']} + {r['idle_pooled']} | {r['peak_direct']} + "
              f"{r['peak_pooled']} = {r['peak_total']} | {per_worker:.1f} | "
              f"{r['seconds']:.1f} | {args.runs / r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
