"""What row-level security (migration 0021) costs: the claim, the tick's claim of due jobs and
two API reads, each timed with the policies on and off, in the same database.

In a fresh database (``crondepot_rlsbench``, migrated, dropped after): ``--tenants`` tenants
(default 20); tenant 1 has ``--jobs`` jobs (default 40,000) labelled ``{"team": "tN"}`` with
N = id mod 100 (so a label selects 1 %), each other tenant 2,000; ``--due`` jobs (default
2,000, spread over the tenants) are due now, the rest in 30 days; tenant 1 has 100,000
finished runs, and ``--queued`` runs (default 100,000) are queued across all the tenants.

Each statement runs as the runtime role, the role the processes connect as (a superuser is
never bound by a policy), on a new connection per mode (the claim function's statements are
planned once per session), 2 calls to warm up, then the median of ``--calls``; every call in
a transaction rolled back, so each meets the same rows:

- claim: ``crondepot_claim_runs`` for 20 normal turns (as queue/claim.py calls it), with
  ``crondepot.tenant_id = 'all'`` (the worker's connections);
- tick: ``Q.claim_due_jobs``, batch 2,000 (the scheduler's), with ``'all'``;
- API reads, tenant 1's id set (as the API sets it per request): ``Q.list_tenant_jobs``
  (first page of 100: no filter; a label 1 % of the jobs carry; a label none carries, which
  only the jobs_labelled GIN index answers fast), and ``Q.list_runs`` (first page of 100
  across jobs).

"off" is the same database with ``ALTER TABLE … DISABLE ROW LEVEL SECURITY`` on every table
the migration enabled it on (the schema before 0021, for these statements, with today's
queries); "on" as migrated. The modes alternate for ``--rounds`` rounds (default 3), and each
figure is the median of its rounds' medians, so a neighbour's load falls on both alike.
EXPLAIN of the rare-label query is printed in both modes of the first round.

    python bench/row_security.py --db postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from common import DEFAULT_ADMIN_URL, admin_connect, fresh_database
from crondepot.db import ALL_TENANTS, Q, connect, roles
from crondepot.runs.reads import listed_statuses

TABLES = ("api_tokens", "audit_log", "handler_grants", "holds", "job_timetables", "jobs",
          "limit_grants", "rate_limits", "runs", "run_attempts", "tenants")

CLAIM = ("SELECT count(*) FROM crondepot_claim_runs('bench', ARRAY[0, 20, 0], "
         "ARRAY[0, 0, 0], NULL)")


def _fill(conn: psycopg.Connection[Any], args: argparse.Namespace) -> None:
    conn.execute("INSERT INTO tenants (name, signing_secret) SELECT 't' || g, 'whsec_x' "
                 "FROM generate_series(1, %s) AS g", (args.tenants,))
    conn.execute(
        """
        INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
                          target, labels)
        SELECT t, 'k' || g, '0 9 * * *', 'UTC', now() + interval '30 days',
               now() + interval '30 days', 'normal',
               '{"type": "python", "handler": "bench.noop"}',
               jsonb_build_object('team', 't' || (g %% 100))
        FROM (SELECT 1 AS t, g FROM generate_series(1, %(jobs)s) AS g
              UNION ALL
              SELECT t, g FROM generate_series(2, %(tenants)s) AS t,
                               generate_series(1, 2000) AS g) AS s
        """, {"jobs": args.jobs, "tenants": args.tenants})
    conn.execute("UPDATE jobs SET next_run_at = now() - interval '1 minute', "
                 "next_nominal_at = now() - interval '1 minute' "
                 "WHERE id IN (SELECT id FROM jobs ORDER BY random() LIMIT %s)", (args.due,))
    conn.execute(
        """
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,
                          available_at, status, finished_at, attempt)
        SELECT j.id || ':' || g, j.id, 1, 'normal', now() - make_interval(mins => g),
               now() - make_interval(mins => g), now() - make_interval(mins => g),
               'succeeded', now() - make_interval(mins => g), 1
        FROM (SELECT id FROM jobs WHERE tenant_id = 1 ORDER BY id LIMIT 1000) AS j,
             generate_series(1, 100) AS g
        """)
    conn.execute(
        """
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
        SELECT 'q' || j.id || ':' || g, j.id, j.tenant_id, 'normal',
               now() - make_interval(secs => g), now() - make_interval(secs => g),
               now() - make_interval(secs => g)
        FROM (SELECT DISTINCT ON (tenant_id) id, tenant_id FROM jobs
              ORDER BY tenant_id, id DESC) AS j,
             generate_series(1, %s) AS g
        """, (args.queued // args.tenants,))
    conn.execute("VACUUM ANALYZE")


def _median(conn: psycopg.Connection[Any], statement: Any, params: Any, calls: int) -> float:
    times = []
    for n in range(calls + 2):
        with conn.transaction(force_rollback=True):
            start = time.perf_counter()
            conn.execute(statement, params).fetchall()
            if n >= 2:
                times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _jobs_params(labels: dict[str, str] | None) -> dict[str, Any]:
    return {"tenant_id": 1, "after": 0, "limit": 100, "priority": None, "paused": None,
            "active": None, "key_prefix": None, "labels": Jsonb(labels) if labels else None}


RUNS_PARAMS = {"tenant_id": 1, "status": None, "statuses": listed_statuses(None),
               "job_id": None, "error": None, "since": None, "until": None,
               "before_at": None, "before_run_id": None, "limit": 100}


def _measure(url: str, calls: int, *, explain: bool) -> dict[str, float]:
    runtime = roles.runtime_url(url, roles.DEFAULT_RUNTIME_ROLE)
    found: dict[str, float] = {}
    with connect(runtime, tenants=ALL_TENANTS) as conn:
        found["claim (20 runs, 20 tenants ready)"] = _median(conn, CLAIM, None, calls)
    with connect(runtime, tenants=ALL_TENANTS) as conn:
        found["tick claim_due_jobs (batch 2000)"] = _median(
            conn, Q.claim_due_jobs, {"now": None, "batch": 2000}, calls)
    with connect(runtime) as conn:
        conn.execute("SELECT set_config('crondepot.tenant_id', '1', false)")
        found["API list jobs, first page"] = _median(
            conn, Q.list_tenant_jobs, _jobs_params(None), calls)
        found["API list jobs, label of 1 %"] = _median(
            conn, Q.list_tenant_jobs, _jobs_params({"team": "t7"}), calls)
        found["API list jobs, label of none"] = _median(
            conn, Q.list_tenant_jobs, _jobs_params({"team": "nobody"}), calls)
        found["API list runs, first page"] = _median(conn, Q.list_runs, RUNS_PARAMS, calls)
        if explain:
            plan = conn.execute("EXPLAIN " + Q.list_tenant_jobs,
                                _jobs_params({"team": "nobody"})).fetchall()
            print("\n".join("    " + row[0] for row in plan))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL, help="an admin URL")
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=40_000, help="tenant 1's jobs")
    parser.add_argument("--due", type=int, default=2000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with fresh_database(args.db, "crondepot_rlsbench") as url, admin_connect(url) as owner:
        _fill(owner, args)
        rounds: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        for n in range(args.rounds):
            for mode in ("off", "on"):
                verb = "DISABLE" if mode == "off" else "ENABLE"
                for table in TABLES:
                    owner.execute(f"ALTER TABLE {table} {verb} ROW LEVEL SECURITY")
                if n == 0:
                    print(f"row-level security {mode}; EXPLAIN of the rare-label query:")
                rounds[mode].append(_measure(url, args.calls, explain=n == 0))
        print(f"\nload average {os.getloadavg()[0]:.1f}; median over {args.rounds} rounds of "
              f"the median of {args.calls} calls, ms:")
        print(f"  {'':<36} {'off':>7} {'on':>7}")
        for name in rounds["off"][0]:
            off = statistics.median(r[name] for r in rounds["off"])
            on = statistics.median(r[name] for r in rounds["on"])
            print(f"  {name:<36} {off:7.2f} {on:7.2f}")


if __name__ == "__main__":
    main()
