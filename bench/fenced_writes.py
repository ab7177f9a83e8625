"""What a worker's fenced writes cost by the number of runs running.

A fenced write finds the run it holds by run id, lease token and status (queries/queue.sql,
"The fence"). One fresh database: ``--queued`` jobs with a run each, analyzed while nothing
runs (statistics from a quiet night, as autovacuum leaves them before a burst). Then, for
each count of ``--running``, runs are claimed until that many run, and one worker session
(psycopg's defaults: prepared after five calls, the server's plan cache choosing) times:

- ``release``: ``queue.release_run`` of one held run, a single-row fenced update (each in
  a transaction rolled back, so the count running stays put);
- ``heartbeat of 20``: ``queue.extend_acquired_leases`` of twenty held leases.

Prints p50 and p99 in ms.

    PYTHONPATH=src:bench python bench/fenced_writes.py \
        [--db postgresql://postgres@127.0.0.1:5432/postgres] [--running 100,1000,6000]
"""

from __future__ import annotations

import argparse
from typing import Any

import psycopg

from common import admin_connect, fresh_database, timed_calls
from crondepot.queue import ClaimedRun, claim_runs, extend_acquired_leases, release_run
from crondepot.queue.lease import HeldLease
from crondepot.tenancy.tenants import create_tenant

QUEUED = """
WITH j AS (
    INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, target)
    SELECT %(tenant)s, 'k' || g, '0 9 * * *', 'UTC', now() + interval '1 day',
           now() + interval '1 day', 'normal',
           jsonb_build_object('type', 'python', 'handler', 'test.noop')
    FROM generate_series(1, %(queued)s) AS g
    RETURNING id
)
INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at)
SELECT j.id || ':1791171000', j.id, %(tenant)s, 'normal', now(), now(), now() FROM j"""


def measure(conn: psycopg.Connection[Any], held: list[ClaimedRun], calls: int) -> dict[str, str]:
    def release(i: int) -> None:
        run = held[i % len(held)]
        with conn.transaction(force_rollback=True):
            release_run(conn, run.run_id, run.lease_token)

    leases = [HeldLease(r.run_id, r.lease_token, 60) for r in held]
    return {
        "release": timed_calls(calls, release),
        "heartbeat of 20": timed_calls(calls, lambda i: extend_acquired_leases(
            conn, leases[(i * 20) % len(leases):][:20])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--running", default="100,1000,6000")
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    with fresh_database(args.db, "crondepot_fenced") as url:
        with admin_connect(url) as setup:
            tenant = create_tenant(setup, "bank").id
            setup.execute(QUEUED, {"tenant": tenant, "queued": args.queued})
            setup.execute("VACUUM ANALYZE runs")              # nothing running yet
        with psycopg.connect(url, autocommit=True) as conn:
            held: list[ClaimedRun] = []
            for running in sorted(int(n) for n in args.running.split(",")):
                while len(held) < running:
                    held += claim_runs(conn, owner="bench",
                                       shares={"normal": min(100, running - len(held))})
                print(f"{len(held)} running:", flush=True)
                for what, figures in measure(conn, held, args.calls).items():
                    print(f"  {what:<16} {figures}", flush=True)


if __name__ == "__main__":
    main()
