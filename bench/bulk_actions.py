"""Bulk actions at scale: pause, resume and cancel of N jobs of one tenant matched
by a label, in a fresh database (``crondepot_bulkbench_<hex>``, migrated, dropped after).

N jobs (default 100,000) ``0 9 * * *`` on Asia/Kolkata, each with a spread key, an http
target and ``{"bank": "42"}``; 1,000 like them for a second tenant, which must stay
untouched. The session names an actor, so every job change is audited as from the CLI
(``--no-audit``: names none; since migration 0020 the changes are audited all the same, as
``role:<user>``). Prints the dry run's and each action's wall time.

    python bench/bulk_actions.py --db postgresql://postgres@127.0.0.1:5432/postgres [-n N]
"""

from __future__ import annotations

import argparse
import time
import uuid

import psycopg
from psycopg.conninfo import make_conninfo

from crondepot.db import connect, migrate
from crondepot.job import JobSpec, bulk, create_jobs
from crondepot.job.bulk import ACTIONS, BulkFilter
from crondepot.tenancy.audit import act_as
from crondepot.tenancy.tenants import create_tenant


def _docs(count: int) -> list[JobSpec]:
    return [JobSpec.from_document({
        "key": f"emi:{i}", "cron": "0 9 * * *", "tz": "Asia/Kolkata",
        "target": {"type": "http", "url": "https://sms.example.com/send"},
        "labels": {"bank": "42"}, "spread": {"seconds": 1800, "key": str(i)}})
        for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="an admin URL (databases are created)")
    parser.add_argument("-n", type=int, default=100_000, help="jobs to act on")
    parser.add_argument("--no-audit", action="store_true",
                        help="do not name an actor (entries say role:<user>)")
    args = parser.parse_args()
    name = f"crondepot_bulkbench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.db, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        with connect(make_conninfo(args.db, dbname=name)) as conn:
            migrate(conn)
            mine, other = (create_tenant(conn, t).id for t in ("bank42", "bank7"))
            docs = _docs(args.n)
            for start in range(0, len(docs), 10_000):
                create_jobs(conn, mine, docs[start:start + 10_000])
            create_jobs(conn, other, docs[:1000])
            conn.execute("VACUUM ANALYZE jobs")
            if not args.no_audit:
                act_as(conn, "cli:bench@host")
            where = BulkFilter.checked(labels={"bank": "42"})
            for action in ACTIONS:
                began = time.perf_counter()
                seen = bulk.preview(conn, mine, action, where)
                counted = time.perf_counter()
                changed = bulk.apply(conn, mine, action, where)
                done = time.perf_counter()
                print(f"{action}: dry run {seen.count:,} in {counted - began:.2f} s; "
                      f"{changed:,} changed in {done - counted:.2f} s")
            row = conn.execute("SELECT count(*) FROM jobs WHERE tenant_id = %s "
                               "AND (paused OR NOT active)", (other,)).fetchone()
            print(f"the other tenant's jobs changed: {row[0] if row else '?'}")
    finally:
        with psycopg.connect(args.db, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
