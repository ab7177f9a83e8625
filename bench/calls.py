"""What one claim and one success write cost: a fixed part per call and a part per run.

docs/performance.md ("Fixed and per-run cost of a claim and a success") explains the
worker's throughput with these two figures; this prints them.

- **Timed from Python.** In a fresh database (``crondepot_callbench_<n>``, migrated and
  dropped afterwards) ``--queued`` runs (default 100,000) of one-run jobs are queued and
  ready, as ``bench/workers.py`` queues its drains (then VACUUM (ANALYZE) and a CHECKPOINT).
  For each size n (1, 10, 100): ``--calls`` claims of n runs through
  ``crondepot.queue.claim_runs`` (the worker's own call: binary results decoded into
  ``ClaimedRun``), then as many success writes of the runs each claim took, through
  ``crondepot.queue.record_successes`` (the outcome writer's call). Autocommit, as the
  worker runs them. Median wall time per call, and the client's CPU per call
  (``time.thread_time``: the worker's Python to send the call and decode its result).
  Per run: (median at 100 − median at 1) / 99.
- **The server's CPU of a call with nothing to do**, the fixed part alone: the backend's CPU
  time (psutil) over ``--empty-calls`` calls (default 5,000) of ``SELECT 1``, of a claim
  that finds no run ready (a second fresh database with no run), and of a success write of
  an empty batch.

Figures are printed, never asserted. One command:

    python bench/calls.py [--db ADMIN_URL] [--queued 100000] [--calls 30] [--passes 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from common import DEFAULT_ADMIN_URL, BenchDatabases, backend_cpu, server_lines
from crondepot.db import Q
from crondepot.queue import Success, claim_runs, record_successes
from crondepot.worker.loop import _configure_connection
from workers import load

SIZES = (1, 10, 100)


def _timed(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, float, Any]:
    """(wall seconds, this thread's CPU seconds, the call's result)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    result = call(*args, **kwargs)
    return time.perf_counter() - wall, time.thread_time() - cpu, result


def sizes_pass(conn: psycopg.Connection[Any], calls: int) -> dict[int, dict[str, float]]:
    """For each size: median wall and client CPU per claim and per success write, in ms."""
    figures: dict[int, dict[str, float]] = {}
    for n in SIZES:
        claims: list[tuple[float, float]] = []
        writes: list[tuple[float, float]] = []
        taken = []
        for _ in range(calls):
            wall, cpu, runs = _timed(claim_runs, conn, owner="calls", shares={"normal": n})
            if len(runs) != n:
                raise RuntimeError(f"claim of {n} took {len(runs)} runs: too few queued "
                                   "(raise --queued)")
            claims.append((wall, cpu))
            taken.append([Success(r.run_id, r.lease_token, r.attempt, None) for r in runs])
        for batch in taken:
            wall, cpu, recorded = _timed(record_successes, conn, batch)
            if len(recorded) != len(batch):
                raise RuntimeError(f"{len(batch) - len(recorded)} successes not recorded")
            writes.append((wall, cpu))
        figures[n] = {
            "claim": statistics.median(w for w, _ in claims) * 1e3,
            "claim_cpu": statistics.median(c for _, c in claims) * 1e3,
            "success": statistics.median(w for w, _ in writes) * 1e3,
            "success_cpu": statistics.median(c for _, c in writes) * 1e3,
        }
    return figures


def empty_calls(conn: psycopg.Connection[Any], calls: int) -> dict[str, float]:
    """The server's CPU µs per call of each kind, with nothing to claim or record."""
    kinds: dict[str, Callable[[], Any]] = {
        "SELECT 1": lambda: conn.execute("SELECT 1").fetchone(),
        "claim, no run ready": lambda: claim_runs(conn, owner="calls",
                                                  shares={"normal": 100}),
        # (record_successes returns early on an empty batch: its statement, sent directly)
        "success write, empty batch": lambda: conn.execute(
            Q.record_successes, {"successes": Jsonb([])}).fetchall(),
    }
    used = backend_cpu(conn)
    out: dict[str, float] = {}
    for name, call in kinds.items():
        for _ in range(50):               # plans made and statements prepared first
            call()
        before = used()
        for _ in range(calls):
            call()
        out[name] = (used() - before) / calls * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help="an admin URL that may CREATE DATABASE")
    parser.add_argument("--queued", type=int, default=100_000, help="ready runs (100000)")
    parser.add_argument("--calls", type=int, default=30, help="calls per size (30)")
    parser.add_argument("--passes", type=int, default=2, help="passes, each on a fresh "
                        "database (2)")
    parser.add_argument("--empty-calls", type=int, default=5000,
                        help="calls for the server's fixed CPU (5000; CPU time is counted "
                        "in 10 ms ticks)")
    args = parser.parse_args()
    needed = args.calls * sum(SIZES)
    if args.queued < needed:
        parser.error(f"--queued must be at least {needed} (calls x {sum(SIZES)})")
    for line in server_lines(args.db, ["synchronous_commit", "shared_buffers"]):
        print(line)
    print(f"command: python bench/calls.py --queued {args.queued} --calls {args.calls} "
          f"--passes {args.passes} --empty-calls {args.empty_calls}\n")
    databases = BenchDatabases(args.db, "crondepot_callbench_")
    for number in range(1, args.passes + 1):
        with databases.fresh() as url:
            load("crondepot", url, args.queued)
            with psycopg.connect(url, autocommit=True) as conn:
                _configure_connection(conn)   # the worker's JSON reader, its time zone
                figures = sizes_pass(conn, args.calls)
        print(f"pass {number}: medians of {args.calls} calls, ms per call "
              "(client CPU in brackets)")
        print(f"  {'n':>4} {'claim':>16} {'success write':>16}")
        for n, f in figures.items():
            print(f"  {n:>4} {f['claim']:7.2f} ({f['claim_cpu']:5.2f}) "
                  f"{f['success']:7.2f} ({f['success_cpu']:5.2f})")
        last = SIZES[-1] - SIZES[0]
        for kind in ("claim", "success"):
            per_run = (figures[SIZES[-1]][kind] - figures[SIZES[0]][kind]) / last * 1e3
            cpu = (figures[SIZES[-1]][f"{kind}_cpu"]
                   - figures[SIZES[0]][f"{kind}_cpu"]) / last * 1e3
            print(f"  {kind}: about {figures[SIZES[0]][kind]:.2f} ms a call, plus "
                  f"{per_run:.1f} us a run (client CPU {cpu:.1f} us a run)")
    with databases.fresh() as url, psycopg.connect(url, autocommit=True) as conn:
        _configure_connection(conn)
        fixed = empty_calls(conn, args.empty_calls)
    print(f"\nthe server's CPU per call with nothing to do ({args.empty_calls} calls, "
          "the backend's CPU time):")
    for name, us in fixed.items():
        print(f"  {name}: {us:.0f} us")


if __name__ == "__main__":
    main()
