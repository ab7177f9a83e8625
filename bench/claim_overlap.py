"""What overlap rules cost the claim (docs/worker.md, "Overlap rules in the claim"): one client
drains N queued runs (default 20,000) through ``crondepot.queue.claim_runs`` (20 normal
turns a call, the worker's own call) and ``record_successes``, in a fresh database
(``crondepot_overlapbench``, migrated, dropped after), in three shapes:

* ``allow``: N one-run jobs, all `allow` (the claim finds no queued run with a rule: one
  index descent, then today's claim);
* ``allow+1 rule``: the same, plus one `skip` run queued for tomorrow, so every claim takes
  the rules path while no ready run has a rule (what `allow` runs pay once any job has one);
* ``all skip``: N one-run jobs, all `skip`: every run leased goes through the rules (the
  job's lock, "is one running?", primary-key probes), none is skipped;
* ``mix``: half the runs are of `allow` one-run jobs, half of `skip` jobs with 5 ready runs
  each: a claim leases the oldest of each and writes the rest skipped 'overlap' (settled in
  the claim, with no success write: more runs settled a second, not a cheaper claim);
* ``mix buffer_one``: half the runs of `allow` one-run jobs, a tenth of `buffer_one` jobs
  each with a run already running (leased by another worker, never ending here) and 5
  ready runs, interleaved in time with the allow runs: the first claim that meets a job's
  ready runs leaves one waiting and writes the other four skipped 'overlap' (the waiting
  runs are left queued when the drain ends);
* ``mix replace``: the same with `replace` jobs, whose claims also ask the running run to
  give way (its ``replace_requested_at``: the one write `replace` adds to the claim). The
  difference from ``mix buffer_one`` is what that write costs.

Runs/s counts the runs settled (succeeded, or skipped by the rule) per second of the drain;
the claim's median ms per call and its p99 beside it; and the PostgreSQL backend's CPU µs
per run settled (psutil: less moved by a busy machine than the wall clock). Interleaved
rounds, medians.

    python bench/claim_overlap.py --db postgresql://postgres@127.0.0.1:5432/postgres [-n N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import psycopg

from common import admin_connect, backend_cpu, fresh_database
from crondepot.queue import Success, claim_runs, record_successes
from crondepot.tenancy.tenants import create_tenant

SHAPES = ("allow", "allow+1 rule", "all skip", "mix", "mix buffer_one", "mix replace")
ASKED: list[int] = []      # each drain's running runs asked to give way (mix replace's only)


def _jobs(conn: psycopg.Connection[Any], tenant_id: int, count: int, overlap: str,
          per_job: int, tag: str) -> None:
    """``count`` jobs of ``overlap`` with ``per_job`` ready queued runs each, oldest first."""
    conn.execute(
        """
        WITH j AS (
            INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, overlap, active)
            SELECT %(tenant)s, %(tag)s || g, '0 9 * * *', 'UTC', 'normal',
                   '{"type": "python", "handler": "bench.noop"}', %(overlap)s, false
            FROM generate_series(1, %(count)s) AS g
            RETURNING id, tenant_id, overlap
        )
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,
                          available_at, overlap)
        SELECT j.id || ':' || k, j.id, j.tenant_id, 'normal', t, t, t, j.overlap
        FROM j, generate_series(1, %(per_job)s) AS k,
             LATERAL (SELECT now() - interval '1 hour' + make_interval(secs => k)) AS x(t)
        """, {"tenant": tenant_id, "tag": tag, "count": count, "overlap": overlap,
              "per_job": per_job})


def _load(conn: psycopg.Connection[Any], tenant_id: int, shape: str, n: int) -> None:
    conn.execute("DELETE FROM runs")
    conn.execute("DELETE FROM jobs")
    if shape == "mix":
        _jobs(conn, tenant_id, n // 2, "allow", 1, "a")
        _jobs(conn, tenant_id, n // 10, "skip", 5, "s")
    elif shape in ("mix buffer_one", "mix replace"):
        overlap = shape.split()[1]
        _jobs(conn, tenant_id, n // 2, "allow", 1, "a")
        _jobs(conn, tenant_id, n // 10, overlap, 6, "r")
        # each ruled job's oldest run is running, leased elsewhere for a day
        conn.execute("UPDATE runs SET status = 'running', attempt = 1, lease_owner = 'other', "
                     "lease_token = gen_random_uuid(), started_at = now(), "
                     "lease_expires_at = now() + interval '1 day' "
                     "WHERE overlap = %s AND run_id LIKE '%%:1'", (overlap,))
        # interleaved with the allow runs, so the claims meet them as they drain (at the
        # end, the waiting ones are left queued and the drain stops)
        conn.execute("UPDATE runs SET available_at = now() - interval '1 hour' "
                     "+ make_interval(secs => random() * 600) WHERE status = 'queued'")
    else:
        _jobs(conn, tenant_id, n, "skip" if shape == "all skip" else "allow", 1, "a")
    if shape == "allow+1 rule":
        _jobs(conn, tenant_id, 1, "skip", 1, "tomorrow")
        conn.execute("UPDATE runs SET available_at = now() + interval '1 day' "
                     "WHERE overlap = 'skip'")
    conn.execute("VACUUM ANALYZE runs")
    conn.execute("VACUUM ANALYZE jobs")


def _drain(conn: psycopg.Connection[Any]) -> tuple[float, float, float, float]:
    """(runs settled per second, median claim ms, p99 claim ms, server CPU µs per run)."""
    claims: list[float] = []
    cpu = backend_cpu(conn)()
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        runs = claim_runs(conn, owner="bench", shares={"normal": 20})
        claims.append(time.perf_counter() - t0)
        if not runs:
            break
        record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt, None)
                                for r in runs])
    elapsed = time.perf_counter() - start
    cpu = backend_cpu(conn)() - cpu
    row = conn.execute("SELECT count(*) FROM runs WHERE status IN ('succeeded', 'skipped') "
                       "AND available_at < now()").fetchone()
    asked = conn.execute("SELECT count(*) FROM runs WHERE replace_requested_at IS NOT NULL"
                         ).fetchone()
    ASKED.append(asked[0] if asked else 0)
    settled = row[0] if row else 0
    claims.sort()
    return (settled / elapsed, statistics.median(claims) * 1e3,
            claims[int(len(claims) * 0.99)] * 1e3, cpu / settled * 1e6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="an admin URL (a database is created)")
    parser.add_argument("-n", type=int, default=20_000, help="queued runs per drain")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float, float, float]]] = {s: [] for s in SHAPES}
    with fresh_database(args.db, "crondepot_overlapbench") as url, admin_connect(url) as conn:
        tenant_id = create_tenant(conn, "bank42").id
        for _ in range(args.rounds):
            for shape in SHAPES:
                _load(conn, tenant_id, shape, args.n)
                results[shape].append(_drain(conn))
    print(f"{args.n} runs a drain, claims of 20, median of {args.rounds} rounds")
    print(f"  {'shape':<14} {'runs/s':>8} {'claim ms':>9} {'p99 ms':>8} {'pg µs/run':>10}"
          "   (each round's runs/s)")
    # (claim ms: a claim of up to 20 runs, its round trip and commit included)
    for shape in SHAPES:
        rows = results[shape]
        print(f"  {shape:<14} {statistics.median(r[0] for r in rows):8.0f} "
              f"{statistics.median(r[1] for r in rows):9.2f} "
              f"{statistics.median(r[2] for r in rows):8.2f} "
              f"{statistics.median(r[3] for r in rows):10.0f}   "
              f"({', '.join(f'{r[0]:.0f}' for r in rows)})")
    print(f"  running runs asked to give way, each mix replace drain: "
          f"{[a for a in ASKED if a]} (of {args.n // 10})")


if __name__ == "__main__":
    main()
