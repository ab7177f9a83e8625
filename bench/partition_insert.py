"""The burst's runs inserted over 30 days of history: into `runs` as it is, or into a day's
partition of a copy of `runs` partitioned by range on ``nominal_at``.

The measurement the partitioning decision rests on (docs/records/performance-runs.md, "A
day's partition against 37 M runs"). It builds the seed's database with
``bench/fullday.py``'s ``build()`` (2.7 M jobs, 37 M runs of history at scale 1), then
``runs_p``: ``runs``'s columns and defaults, primary key ``(run_id, nominal_at)``, every other
index of ``runs`` (``runs_overlap_running`` gets ``nominal_at`` too: a unique index on a
partitioned table must hold the key), and three partitions: before the burst's day (empty),
the day, after it. Then the burst's jobs get queued runs, in transactions of 2,000 from one
session after a ``CHECKPOINT`` (``INSERT … SELECT … ON CONFLICT DO NOTHING``, the columns the
tick writes), alternately into ``runs`` and ``runs_p``, ``--rounds`` times each. Only the
insert is measured: the jobs' advance, the tick's other half, is the same either way.

    python bench/partition_insert.py                 # scale 1: ~8 min of build, then ~30 s
    python bench/partition_insert.py --scale 0.1

Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg

import fullday
from common import DEFAULT_ADMIN_URL, admin_connect, backend_cpu, fresh_database, wal_lsn
from workers import wal_since

BATCH = 2000
INSERT = """
INSERT INTO {table} (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                     available_at, deadline_at, rate_limit, overlap)
SELECT j::text || ':' || %(epoch)s, j, %(tenant)s, 'normal', %(at)s, %(at)s, 'queued',
       %(at)s, %(at)s + interval '1 hour', %(limit)s, 'allow'
FROM generate_series(%(low)s::bigint, %(high)s::bigint) AS j
ON CONFLICT DO NOTHING
"""


def partitioned_copy(conn: psycopg.Connection[Any], day: datetime) -> None:
    conn.execute("CREATE TABLE runs_p (LIKE runs INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
                 " PARTITION BY RANGE (nominal_at)")
    conn.execute("ALTER TABLE runs_p ADD PRIMARY KEY (run_id, nominal_at)")
    indexes = conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'runs'"
                           " AND indexname <> 'runs_pkey'").fetchall()
    for (definition,) in indexes:
        definition = definition.replace(" ON public.runs ", " ON public.runs_p ").replace(
            "INDEX runs_", "INDEX runs_p_")
        if "runs_p_overlap_running" in definition:
            definition = definition.replace("(job_id)", "(job_id, nominal_at)")
        conn.execute(definition)
    after = day + timedelta(days=1)
    conn.execute("CREATE TABLE runs_p_before PARTITION OF runs_p"
                 f" FOR VALUES FROM (MINVALUE) TO ('{day.isoformat()}')")
    conn.execute("CREATE TABLE runs_p_day PARTITION OF runs_p"
                 f" FOR VALUES FROM ('{day.isoformat()}') TO ('{after.isoformat()}')")
    conn.execute("CREATE TABLE runs_p_after PARTITION OF runs_p"
                 f" FOR VALUES FROM ('{after.isoformat()}') TO (MAXVALUE)")


def timed_insert(url: str, table: str, ids: range, tenant: int, at: datetime) -> str:
    with admin_connect(url) as conn:
        conn.execute("CHECKPOINT")        # every round starts with its full-page images due
        lsn = wal_lsn(conn)
        with admin_connect(url) as writer:
            cpu = backend_cpu(writer)
            cpu_before, start, written = cpu(), time.monotonic(), 0
            for low in range(ids.start, ids.stop, BATCH):
                with writer.transaction():
                    written += writer.execute(INSERT.format(table=table), {
                        "epoch": int(at.timestamp()), "at": at, "tenant": tenant,
                        "limit": fullday.LIMIT, "low": low,
                        "high": min(low + BATCH, ids.stop) - 1}).rowcount
            seconds, used = time.monotonic() - start, cpu() - cpu_before
        wal = wal_since(conn, lsn)
    return (f"  {table:7s} {written:,} runs in {seconds:.1f} s ({written / seconds:,.0f}/s); "
            f"its backend's CPU {used:.1f} s ({used / written * 1e6:.1f} µs a run); "
            f"WAL {wal / written:,.0f} B a run")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    with fresh_database(args.db, "crondepot_bench_partition_insert") as url:
        print(f"Build (scale {args.scale}):", flush=True)
        built = fullday.build(url, args.scale, "http://127.0.0.1:9")
        ids = built.ids[fullday.BURST.name]
        at = built.t0.replace(second=0, microsecond=0) + timedelta(days=1)
        with admin_connect(url) as conn:
            partitioned_copy(conn, at.replace(hour=0, minute=0))
        print(f"{len(ids):,} queued runs into `runs` ({built.runs:,} runs of history) and "
              "into the day's partition of `runs_p`, alternately:", flush=True)
        for round_ in range(args.rounds):
            for table in ("runs", "runs_p"):
                print(timed_insert(url, table, ids, built.bank,
                                   at + timedelta(minutes=round_)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
