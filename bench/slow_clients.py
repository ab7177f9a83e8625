"""Slow clients: GET /v1/jobs latency while 50 clients trickle bodies and 50 trickle heads.

A real ``crondepot api`` process (its default settings, or ``--api-option`` ones) on a fresh
database (``crondepot_slowbench``, dropped afterwards). 25 clients trickle the body of
``POST /console/login``, 25 the body of ``POST /v1/jobs`` with a valid token, and
``--heads`` trickle a request head, one byte each every 0.2 s, each reopened when the API
cuts it off (crondepot_testkit.slow_clients). After 1 s for them to connect, one client sends
``GET /v1/jobs`` with the token ``--reads`` times, 0.1 s apart, each waiting at most
``--read-timeout`` s; the median and worst latency are printed, with the timeouts counted.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/slow_clients.py
    # the code of another commit, e.g. before the intake (issue 30):
    git archive b81b390 src | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before/src python bench/slow_clients.py --reads 3

Figures: docs/operations.md, "Slow clients and overload".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import httpx

from common import DEFAULT_ADMIN_URL, fresh_database
from crondepot.db import connect
from crondepot.tenancy.tenants import create_tenant
from crondepot_testkit.processes import Proc, free_port, wait_until
from crondepot_testkit.slow_clients import Trickle, slow_requests


def measure(args: argparse.Namespace, url: str) -> tuple[list[float], int]:
    with connect(url) as conn:
        token = create_tenant(conn, "slowbench").token
    port = free_port()
    api = Proc("api", "--db", url, "--port", str(port), *args.api_option,
               env={"CRONDEPOT_API_RATE": "1000", "CRONDEPOT_API_BURST": "1000"})
    base = f"http://127.0.0.1:{port}"
    timings: list[float] = []
    timeouts = 0
    try:
        wait_until(lambda: _up(base), timeout=60, interval=0.1, message="the API to start")
        kinds = slow_requests(token)
        with Trickle(port, {k: v for k, v in kinds.items() if k != "head"}, per_kind=25), \
                Trickle(port, {"head": kinds["head"]}, per_kind=args.heads), \
                httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                             timeout=args.read_timeout) as client:
            time.sleep(1.0)       # the slow clients connect and send their heads
            for _ in range(args.reads):
                started = time.monotonic()
                try:
                    status = client.get("/v1/jobs").status_code
                    if status != 200:
                        raise SystemExit(f"GET /v1/jobs answered {status}")
                except httpx.TimeoutException:
                    timeouts += 1
                timings.append(time.monotonic() - started)
                time.sleep(0.1)
    finally:
        api.stop()
    return timings, timeouts


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--admin-url", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--reads", type=int, default=100)
    parser.add_argument("--heads", type=int, default=50, help="head tricklers (default 50)")
    parser.add_argument("--read-timeout", type=float, default=30.0)
    parser.add_argument("--api-option", action="append", default=[],
                        help="an option of crondepot api, e.g. --api-option=--pool-wait=1s")
    args = parser.parse_args(argv)
    with fresh_database(args.admin_url, "crondepot_slowbench") as url:
        timings, timeouts = measure(args, url)
    print(f"GET /v1/jobs under 50 body + {args.heads} head tricklers: {len(timings)} "
          f"requests, median {statistics.median(timings) * 1000:.0f} ms, worst "
          f"{max(timings) * 1000:.0f} ms, {timeouts} timed out (after "
          f"{args.read_timeout:g} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
