"""The claim's cost with deadline first within a rate limit (docs/worker.md) against the claim
before it, interleaved. Two fresh databases, both migrated (``crondepot_dlbench_new``, and
``crondepot_dlbench_old`` with the takes' previous text, claim_one_tenant.sql and
claim_fair.sql at ``--before``, applied over them: the queue order of before on the same
schema). Each holds the same queues, N runs each (default 480,000, the 9:00 burst):

- normal: N runs of `sms-gateway` with deadlines, later ones earlier (every claim gives
  every turn away: the most work the rule can do), and 200 runs of a second tenant (the
  fair path);
- bulk: N runs of `sms-gateway` with one deadline (20:00: nothing to reorder);
- urgent: N runs with deadlines and no limit (the rule has nothing to do).

Each ``SELECT crondepot_claim_runs(...)`` of 20 turns of one priority is rolled back, so every
call meets the same queue; the two databases are called in turn (which goes first
alternates). Prints p50 and p99 per shape and database, and with ``--explain`` the plan of
the deadline-first range scan (auto_explain, from inside the function).

    python bench/claim_deadline.py --db postgresql://postgres@127.0.0.1:5432/postgres [-n N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg

from common import admin_connect, fresh_database, two_banks

SHAPES = {  # name: (priority slot of p_limits, priority)
    "reversed deadlines, sms-gateway, 2 tenants": (2, "normal"),
    "one deadline, sms-gateway": (3, "bulk"),
    "deadlines, no limit": (1, "urgent"),
}
TAKES = ("claim_one_tenant.sql", "claim_fair.sql")
FUNCTIONS = Path("src/crondepot/db/sql/functions")


def _runs(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, priority: str,
          count: int, limit: str | None, deadline: str) -> None:
    # Run g is queued g ms before now; `deadline` is an expression of g.
    conn.execute(
        f"INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        f"available_at, rate_limit, deadline_at) "
        f"SELECT %s || '-' || g, %s, %s, %s, t.at, t.at, t.at, %s, {deadline} "
        f"FROM generate_series(1, %s) AS g, "
        f"LATERAL (SELECT now() - make_interval(secs => 3600 - g / 1000.0) AS at) AS t",
        (f"{priority}{tenant_id}", job_id, tenant_id, priority, limit, count))


def _fill(url: str, n: int) -> None:
    with admin_connect(url) as conn:
        (a, ja), (b, jb) = two_banks(conn)
        _runs(conn, a, ja, "normal", n, "sms-gateway",
              "now() + make_interval(secs => 7200 - g / 1000.0)")
        _runs(conn, b, jb, "normal", 200, None, "NULL")
        _runs(conn, a, ja, "bulk", n, "sms-gateway", "now() + interval '11 hours'")
        _runs(conn, a, ja, "urgent", n, None,
              "now() + make_interval(secs => 7200 - g / 1000.0)")
        conn.execute("VACUUM ANALYZE runs")


def _take_before(url: str, before: str) -> None:
    with admin_connect(url) as conn:
        for name in TAKES:
            text = subprocess.run(["git", "show", f"{before}:{FUNCTIONS / name}"],
                                  check=True, capture_output=True, text=True).stdout
            conn.execute(text)  # type: ignore[arg-type]


def _claim(conn: psycopg.Connection[Any], slot: int) -> float:
    limits = [0, 0, 0]
    limits[slot - 1] = 20
    start = time.perf_counter()
    row = conn.execute("SELECT count(*) FROM crondepot_claim_runs('bench', %s, "
                       "ARRAY[0, 0, 0], NULL)", (limits,)).fetchone()
    elapsed = time.perf_counter() - start
    conn.rollback()
    assert row is not None and row[0] == 20, row
    return elapsed * 1000


def _pct(times: list[float], q: int) -> float:
    return statistics.quantiles(times, n=100, method="inclusive")[q - 1]


def _explain(url: str) -> None:
    notices: list[str] = []
    with psycopg.connect(url) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        conn.execute("SET auto_explain.log_min_duration = 0")
        conn.execute("SET auto_explain.log_nested_statements = on")
        conn.execute("SET auto_explain.log_analyze = on")
        conn.execute("SET auto_explain.log_buffers = on")
        conn.execute("SET auto_explain.log_level = notice")
        conn.execute("SELECT count(*) FROM crondepot_claim_runs('bench', ARRAY[0, 20, 0], "
                     "ARRAY[0, 0, 0], NULL)")
        conn.rollback()
    for text in notices:
        if "r.rate_limit = g.rate_limit" in text:
            print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="an admin URL (databases are created)")
    parser.add_argument("-n", type=int, default=480_000, help="queued runs per shape")
    parser.add_argument("--calls", type=int, default=300, help="claims per shape and side")
    parser.add_argument("--before", default="07e52f4",
                        help="the commit whose takes are the 'before' side")
    parser.add_argument("--explain", action="store_true")
    args = parser.parse_args()
    with fresh_database(args.db, "crondepot_dlbench_new") as new, \
            fresh_database(args.db, "crondepot_dlbench_old") as old:
        start = time.perf_counter()
        _fill(new, args.n)
        _fill(old, args.n)
        _take_before(old, args.before)
        print(f"{args.n:,} runs per shape in each database, filled in "
              f"{time.perf_counter() - start:.0f} s")
        if args.explain:
            _explain(new)
        with psycopg.connect(new) as cn, psycopg.connect(old) as co:
            for shape, (slot, _) in SHAPES.items():
                for _ in range(20):             # past the switch to kept plans
                    _claim(cn, slot), _claim(co, slot)
                times: dict[str, list[float]] = {"new": [], "old": []}
                for i in range(args.calls):
                    order = (("new", cn), ("old", co)) if i % 2 else (("old", co), ("new", cn))
                    for side, conn in order:
                        times[side].append(_claim(conn, slot))
                print(f"{shape}: claim of 20, deadline first p50 {_pct(times['new'], 50):.2f} "
                      f"p99 {_pct(times['new'], 99):.2f} ms; before p50 "
                      f"{_pct(times['old'], 50):.2f} p99 {_pct(times['old'], 99):.2f} ms")


if __name__ == "__main__":
    main()
