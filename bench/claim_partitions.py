"""What day partitions cost the claim and a worker's fenced write, by the number of days.

Three fresh databases hold the same rows: ``--per-day`` finished runs a day for ``--days``
days of history, and ``--queued`` runs queued today (of as many jobs, one tenant):

- ``one table``: migrated through 0039, filled, then migrated on: migration 0040 leaves a
  ``runs`` that holds runs as one table (the layout of a database not yet converted);
- ``N partitions``: the fresh layout, a partition a day of the history, today's and the
  seven made ahead (as the maintenance leader keeps them), and the default;
- ``few partitions``: the same with ``--few-days`` days of history.

Then, per database: ``--claims`` calls of ``crondepot_claim_runs`` taking 20 normal runs
(each commits: the queue shrinks as in a drain), then the workers' success batches of 20,
``crondepot_record_successes``, over the runs leased (both statements find runs by
``run_id``, the claim's reads of the queue by its indexes, in every partition). Prints p50
and p99 in ms.

    PYTHONPATH=src:bench python bench/claim_partitions.py \
        --db postgresql://postgres@127.0.0.1:5432/postgres [--days 32] [--few-days 4]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb

from common import admin_connect, timed_calls
from crondepot.db import migrations
from crondepot.tenancy.tenants import create_tenant

HISTORY = """
INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at,
                  status, finished_at)
SELECT g || ':' || extract(epoch FROM n)::bigint, g, %(tenant)s, 'normal', n, n, n,
       'succeeded', n
FROM generate_series(1, %(per_day)s) AS g, generate_series(1, %(days)s) AS d,
     LATERAL (SELECT date_trunc('day', now()) - make_interval(days => d)
                     + make_interval(secs => g %% 86400)) AS x(n)"""
JOBS = """
INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, target)
SELECT %(tenant)s, 'k' || g, '0 9 * * *', 'UTC', now() + interval '1 day',
       now() + interval '1 day', 'normal',
       jsonb_build_object('type', 'python', 'handler', 'test.noop')
FROM generate_series(1, %(queued)s) AS g"""
QUEUED = """
INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, available_at,
                  status)
SELECT g || ':' || extract(epoch FROM n)::bigint, g, %(tenant)s, 'normal', n, n, n, 'queued'
FROM generate_series(1, %(queued)s) AS g,
     LATERAL (SELECT date_trunc('day', now()) + make_interval(secs => g %% 3600)) AS x(n)"""
CLAIM = "SELECT * FROM crondepot_claim_runs('bench', ARRAY[0, 20, 0], ARRAY[0, 0, 0], NULL)"
RECORD = "SELECT run_id FROM crondepot_record_successes(%s)"


@contextmanager
def database(admin_url: str, name: str, args: argparse.Namespace,
             days: int | None) -> Iterator[str]:
    """``days`` None: one table; else that many days of history in day partitions."""
    with admin_connect(admin_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(admin_url, dbname=name)
    every = migrations.available
    rows = {"per_day": args.per_day, "days": args.days if days is None else days,
            "queued": args.queued}
    try:
        with admin_connect(url) as conn:
            if days is None:
                # As a database the previous release migrated: 0040 then finds runs in it.
                migrations.available = lambda: [m for m in every() if m.version < 40]
                migrations.migrate(conn)
                migrations.available = every
                rows["tenant"] = create_tenant(conn, "bank").id
                conn.execute(HISTORY, rows)
                migrations.migrate(conn)
            else:
                migrations.migrate(conn)
                conn.execute("SELECT crondepot_runs_partitions_ahead("
                             "now() - make_interval(days => %s), %s)", (days, days + 7))
                rows["tenant"] = create_tenant(conn, "bank").id
                conn.execute(HISTORY, rows)
            conn.execute(JOBS, rows)
            conn.execute(QUEUED, rows)
            conn.execute("VACUUM ANALYZE")
        yield url
    finally:
        migrations.available = every
        with admin_connect(admin_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def measure(url: str, claims: int) -> dict[str, str]:
    out = {}
    with psycopg.connect(url, autocommit=True) as conn:
        out["claim of 20"] = timed_calls(claims, lambda _: conn.execute(CLAIM).fetchall())
        leased: list[tuple[Any, ...]] = conn.execute(
            "SELECT run_id, lease_token, attempt FROM runs WHERE status = 'running'"
        ).fetchall()
        batches = [Jsonb([{"run_id": run_id, "token": str(token), "attempt": attempt,
                           "result": None} for run_id, token, attempt in leased[i:i + 20]])
                   for i in range(0, len(leased), 20)]
        out["success batch of 20"] = timed_calls(len(batches), lambda i: conn.execute(
            RECORD, (batches[i],)).fetchall())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--days", type=int, default=32)
    parser.add_argument("--few-days", type=int, default=4)
    parser.add_argument("--per-day", type=int, default=20_000)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=600)
    args = parser.parse_args()
    layouts = (("one table", None), (f"{args.days} days", args.days),
               (f"{args.few_days} days", args.few_days))
    for label, days in layouts:
        with database(args.db, "crondepot_claimparts", args, days) as url:
            with admin_connect(url) as conn:
                parts = conn.execute("SELECT count(*) FROM pg_inherits "
                                     "WHERE inhparent = 'runs'::regclass").fetchone()
            print(f"{label} ({parts[0] if parts else 0} partitions):", flush=True)
            for what, figures in measure(url, args.claims).items():
                print(f"  {what:<20} {figures}", flush=True)


if __name__ == "__main__":
    main()
