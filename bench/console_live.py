"""The console's live refresh: what N open consoles cost the API and PostgreSQL.

A real ``crondepot api`` process on a fresh database (``crondepot_consolebench``, dropped
afterwards) holding the 9:00 wave: ``--jobs`` jobs behind a 25/s shared rate limit, each with
a queued run of the same 9:00 fire. Each of N consoles logs in with its own session and asks
``/console/live`` for every part of the overview (tiles, queues, limits, system) every
``--interval`` seconds, as console.js does, their polls spread over the interval. For each N
it prints the polls served per second, their median and p99 latency, and the CPU the API
process and its own database sessions (application_name ``crondepot-api``, read with
psutil: the server's other sessions are not counted) used, as a share of one core, over
``--seconds``.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/console_live.py                      # N = 0, 1, 10, 50; 20 s each
    python bench/console_live.py --consoles 1 10 --seconds 10

Figures: docs/records/performance-runs.md, "Console live refresh".
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import statistics
import sys
import threading
import time
from typing import Any

import httpx
import psutil  # type: ignore[import-untyped]

from common import DEFAULT_ADMIN_URL, fresh_database
from crondepot.db import connect
from crondepot.job import JobSpec, create_jobs
from crondepot.limits.buckets import set_limit
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant
from crondepot_testkit.processes import Proc, free_port, wait_until

PARTS = "tiles,queues,limits,system"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def seed(url: str, jobs: int) -> str:
    """The 9:00 wave; returns the tenant's admin token."""
    with connect(url) as conn:
        tenant = create_tenant(conn, "consolebench")
        set_limit(conn, "sms-gateway", 25.0, 50)
        grant(conn, tenant.id, limits=["sms-gateway"])
        specs = [JobSpec.from_document({
            "key": f"reminder:{i}", "cron": "0 9 * * *", "tz": "UTC", "rate_limit":
            "sms-gateway", "target": {"type": "http", "url": "https://sms.example.com/send"}})
            for i in range(jobs)]
        ids = [job.id for job in create_jobs(conn, tenant.id, specs)]
        conn.execute(
            """
            INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                              attempt, available_at, created_at)
            SELECT j.id || ':1767603600', j.id, j.tenant_id, j.priority,
                   '2026-01-05T09:00:00Z', '2026-01-05T09:00:00Z', 'queued', 1,
                   '2026-01-05T09:00:00Z', now()
            FROM jobs AS j WHERE j.id = ANY(%s)
            """, (ids,))
        conn.execute("INSERT INTO workers (name, host, pid, concurrency, busy) "
                     "VALUES ('worker-1', 'bench', 1, 20, 20)")
        conn.execute("ANALYZE")
        return tenant.token


def console(base: str, token: str) -> httpx.Client:
    """A logged-in console session (its cookies kept by the client)."""
    client = httpx.Client(base_url=base, timeout=30)
    page = client.get("/console/login")
    found = CSRF.search(page.text)
    assert found, page.text
    done = client.post("/console/login", data={"csrf": found.group(1), "token": token})
    assert done.status_code == 303, done.text
    return client


def api_cpu(api: psutil.Process, url: str) -> float:
    """CPU seconds of the API process and of its database sessions (they stay open: the
    API's pool)."""
    total = sum(api.cpu_times()[:2])
    with connect(url) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'crondepot-api'")]
    for pid in pids:
        with contextlib.suppress(psutil.Error):      # a session that just ended
            total += sum(psutil.Process(pid).cpu_times()[:2])
    return total


def measure(base: str, url: str, api: psutil.Process, token: str, consoles: int,
            seconds: float, interval: float) -> dict[str, Any]:
    clients = [console(base, token) for _ in range(consoles)]
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    stop = threading.Event()

    def poll(client: httpx.Client, offset: float) -> None:
        nonlocal errors
        if stop.wait(offset):
            return
        while not stop.is_set():
            started = time.monotonic()
            response = client.get("/console/live", params={"parts": PARTS})
            took = time.monotonic() - started
            with lock:
                latencies.append(took)
                errors += response.status_code != 200
            stop.wait(max(0.0, interval - took))

    cpu0, t0 = api_cpu(api, url), time.monotonic()
    threads = [threading.Thread(target=poll, args=(c, interval * i / max(1, consoles)),
                                daemon=True) for i, c in enumerate(clients)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    wall, cpu = time.monotonic() - t0, api_cpu(api, url) - cpu0
    for client in clients:
        client.close()
    ordered = sorted(latencies)
    return {"consoles": consoles, "polls_per_s": len(latencies) / wall, "errors": errors,
            "median_ms": statistics.median(ordered) * 1000 if ordered else 0.0,
            "p99_ms": ordered[max(0, math.ceil(len(ordered) * 0.99) - 1)] * 1000
            if ordered else 0.0,
            "cpu_share": cpu / wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--consoles", type=int, nargs="+", default=[0, 1, 10, 50])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--interval", type=float, default=3.0)
    args = parser.parse_args(argv)
    with fresh_database(args.admin_url, "crondepot_consolebench") as url:
        token = seed(url, args.jobs)
        port = free_port()
        proc = Proc("api", "--db", url, "--port", str(port),
                    env={"CRONDEPOT_API_RATE": "1000", "CRONDEPOT_API_BURST": "1000"})
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until(lambda: _up(base), timeout=60, interval=0.1,
                       message="the API to start")
            api = psutil.Process(proc.popen.pid)
            print(f"{args.jobs} jobs, {args.jobs} queued runs behind 25/s; each console "
                  f"polls /console/live?parts={PARTS} every {args.interval:g} s; "
                  f"{args.seconds:g} s each")
            print("| consoles | polls/s | median ms | p99 ms | errors | API + its sessions, "
                  "CPU % of one core |")
            print("|---|---|---|---|---|---|")
            for consoles in args.consoles:
                row = measure(base, url, api, token, consoles, args.seconds, args.interval)
                print(f"| {row['consoles']} | {row['polls_per_s']:.2f} | "
                      f"{row['median_ms']:.1f} | {row['p99_ms']:.1f} | {row['errors']} | "
                      f"{row['cpu_share'] * 100:.1f} |", flush=True)
        finally:
            proc.stop()
    return 0


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
