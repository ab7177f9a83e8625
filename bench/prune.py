"""Retention on a table with history: one day of runs deleted out of 31 (issue 34, item 3).

Builds the seed's database with ``bench/fullday.py``'s loader (``build``: the jobs and 31 days
of runs in realistic states, the indexes of runs built after the load, ``VACUUM (ANALYZE)``),
in its own database ``crondepot_prune`` (kept with ``--keep``, reused with ``--reuse``), then:

1. **Plans** of one prune pass at the oldest day's cut-off, ``EXPLAIN (ANALYZE, BUFFERS)``,
   rolled back: the statement before this change (the cut-off an InitPlan, the BRIN index on
   ``created_at``: rebuilt in the rolled-back transaction, as migration 0037 drops it) and
   the current one (the cut-off a parameter, the partial index ``runs_finished_created``).
2. **Probes without the prune** for ``--quiet-seconds``: a claim of 20 normal and 20 bulk
   runs, 0.1 s apart (the runs a real tick of the next day queued first: 36,500 at 0.1), and
   a scheduler tick of 500 due jobs, 0.25 s apart, each on its own connection in a
   transaction rolled back.
3. **The prune**: ``prune_finished_runs`` passes (5,000 runs each, its own transaction,
   ``crondepot prune``'s loop) until the oldest day is gone, the probes still running;
   duration, passes, per-pass time, WAL (the whole server's).
4. **Probes after the prune** (dead rows not vacuumed yet), then ``VACUUM runs`` timed (this
   server runs with ``autovacuum=off``: the pass autovacuum would make), and
   ``pg_stat_user_tables`` against autovacuum's thresholds.
5. **The next day's plans** after the VACUUM: the BRIN (freshly built, so its ranges are as
   tight as they get) against the partial index.

Figures are printed, never asserted.

    python bench/prune.py --scale 0.1            # ~3.7 M runs, a day ~120 k
    python bench/prune.py --scale 0.1 --keep     # keep the database; --reuse skips the build
    python bench/prune.py --reuse --keep --before            # the oldest day, as before 0037
    python bench/prune.py --reuse --keep --keep-days 29      # then the next day, as now
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from common import DEFAULT_ADMIN_URL, admin_connect, run_interruptibly, server_lines, wal_lsn
from crondepot.db import ALL_TENANTS, Q, connect, migrate
from crondepot.queue.claim import claim_runs
from crondepot.runs.retention import PRUNE_BATCH, prune_cutoff, prune_finished_runs
from crondepot.scheduler.tick import tick
from fullday import HISTORY_DAYS, MB, RETENTION_DAYS, Probe, build, summary
from workers import load_line, wal_since

DB_NAME = "crondepot_prune"
CLAIM_PAUSE = 0.1      # s between two claims (20 normal and 20 bulk runs)
TICK_PAUSE = 0.25      # s between two ticks (500 due jobs)
FINISHED = "('succeeded', 'failed', 'skipped', 'cancelled')"
# The statement before migration 0037 (queries/retention.sql at 1eed7e8), for the plan only.
BEFORE = """
WITH old AS (
    SELECT run_id FROM runs
    WHERE created_at < (SELECT coalesce(%(now)s::timestamptz, now())
                               - make_interval(secs => %(keep_seconds)s::float8))
      AND status IN ('succeeded', 'failed', 'skipped', 'cancelled')
    LIMIT %(limit)s::integer
    FOR UPDATE SKIP LOCKED
), attempts AS (
    DELETE FROM run_attempts AS a USING old WHERE a.run_id = old.run_id
)
DELETE FROM runs AS r USING old WHERE r.run_id = old.run_id
"""
BRIN = "CREATE INDEX runs_created_brin ON runs USING brin (created_at)"
RESTORE = f"CREATE INDEX runs_finished_created ON runs (created_at) WHERE status IN {FINISHED}"
STATS = """
    SELECT n_live_tup, n_dead_tup, vacuum_count, autovacuum_count,
           current_setting('autovacuum_vacuum_threshold')::int
             + current_setting('autovacuum_vacuum_scale_factor')::float8 * c.reltuples
    FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.relname = 'runs'
"""
SIZES = """
    SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes
    WHERE relname IN ('runs', 'run_attempts') ORDER BY 2 DESC
"""


class _Rollback(Exception):
    """Raised inside a probe's or a plan's transaction: what it wrote is undone."""


def explain(conn: psycopg.Connection[Any], title: str, sql: str, params: dict[str, Any],
            setup: tuple[str, ...] = ()) -> None:
    with contextlib.suppress(_Rollback), conn.transaction():
        for statement in setup:
            conn.execute(statement)
        started = time.perf_counter()
        lines = [r[0] for r in conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + sql.encode(),
                                            params)]
        elapsed = time.perf_counter() - started
        print(f"\n{title} ({elapsed * 1000:.0f} ms with EXPLAIN's own cost, rolled back):")
        for line in lines:
            print(f"    {line}")
        raise _Rollback


def plans(conn: psycopg.Connection[Any], now: datetime, keep: timedelta, day: str) -> None:
    cutoff = prune_cutoff(conn, keep, now)
    explain(conn, f"{day}: BEFORE (cut-off an InitPlan, the BRIN index)", BEFORE,
            {"now": now, "keep_seconds": keep.total_seconds(), "limit": PRUNE_BATCH},
            (BRIN, "DROP INDEX runs_finished_created"))
    explain(conn, f"{day}: the cut-off a parameter, the BRIN index only (no 0037 index)",
            Q.prune_finished_runs, {"cutoff": cutoff, "limit": PRUNE_BATCH},
            (BRIN, "DROP INDEX runs_finished_created"))
    explain(conn, f"{day}: AFTER (cut-off a parameter, runs_finished_created)",
            Q.prune_finished_runs, {"cutoff": cutoff, "limit": PRUNE_BATCH})


def probes(url: str, now: datetime) -> tuple[list[Probe], list[psycopg.Connection[Any]]]:
    claim_conn = connect(url, application_name="prune-claim-probe", tenants=ALL_TENANTS)
    tick_conn = connect(url, application_name="prune-tick-probe", tenants=ALL_TENANTS)

    def claim() -> bool:
        with contextlib.suppress(_Rollback), claim_conn.transaction():
            claim_runs(claim_conn, owner="prune-probe", shares={"normal": 20, "bulk": 20},
                       lend=False)
            raise _Rollback
        return True

    def one_tick() -> bool:
        with contextlib.suppress(_Rollback), tick_conn.transaction():
            tick(tick_conn, batch=500, now=now)
            raise _Rollback
        return True

    claim_probe, tick_probe = Probe("claim", CLAIM_PAUSE), Probe("tick", TICK_PAUSE)
    claim_probe.start(claim)
    tick_probe.start(one_tick)
    return [claim_probe, tick_probe], [claim_conn, tick_conn]


def window(probe: Probe, low: float, high: float) -> list[float]:
    return [ms for at, ms, ok in probe.samples if ok and low <= at < high]


def measure(url: str, scale: float, quiet: float, keep_days: int, before: bool) -> None:
    with admin_connect(url) as conn:
        row = conn.execute("SELECT min(created_at) FROM jobs").fetchone()
        assert row is not None
        # the build's t0 (its jobs were created HISTORY_DAYS + 1 days before it): the oldest
        # of the HISTORY_DAYS days of runs is the one past retention
        t0: datetime = row[0] + timedelta(days=HISTORY_DAYS + 1)
        row = conn.execute("SELECT count(*) FROM runs").fetchone()
        assert row is not None
        total = row[0]
        keep = timedelta(days=keep_days)
        cutoff = prune_cutoff(conn, keep, t0)
        row = conn.execute(f"SELECT count(*) FROM runs WHERE created_at < %s AND status IN "
                           f"{FINISHED}", (cutoff,)).fetchone()
        assert row is not None
        print(f"runs: {total:,}; finished before the cut-off {cutoff:%Y-%m-%d %H:%M} UTC: "
              f"{row[0]:,}", flush=True)
        if before:      # the statement and the index of 1eed7e8, for this prune only
            print("\nthe prune below: the statement before migration 0037, with its BRIN index")
            conn.execute(BRIN)
            conn.execute("DROP INDEX runs_finished_created")
        else:
            plans(conn, t0, keep, "Day 1")
        # a real tick first: runs queued for the claim probe to find
        due = t0 + timedelta(days=1)
        with connect(url, application_name="prune-setup", tenants=ALL_TENANTS) as setup:
            queued = tick(setup, batch=2000, now=due).inserted
        print(f"\nqueued for the claim probe: {queued} runs (a tick at {due:%H:%M} tomorrow)")

        running, conns = probes(url, due)
        try:
            started = time.time()
            time.sleep(quiet)
            prune_from = time.time()
            lsn = wal_lsn(conn)
            passes: list[float] = []
            deleted = 0
            with connect(url, application_name="crondepot-prune", tenants=ALL_TENANTS) as pruner:
                while True:
                    began = time.perf_counter()
                    if before:
                        pruned = pruner.execute(BEFORE, {
                            "now": t0, "keep_seconds": keep.total_seconds(),
                            "limit": PRUNE_BATCH}).rowcount
                    else:
                        pruned = prune_finished_runs(pruner, keep, cutoff=cutoff)
                    passes.append((time.perf_counter() - began) * 1000)
                    deleted += pruned
                    if pruned < PRUNE_BATCH:
                        break
            prune_to = time.time()
            wal = wal_since(conn, lsn)
            time.sleep(quiet)
            ended = time.time()
        finally:
            for probe in running:
                probe.stop()
            for c in conns:
                c.close()
        seconds = prune_to - prune_from
        print(f"\nThe prune: {deleted:,} runs in {seconds:.1f} s "
              f"({deleted / seconds:,.0f} runs/s), {len(passes)} passes of <= {PRUNE_BATCH}; "
              f"a pass {summary(passes)}")
        print(f"  passes in order, ms: first {', '.join(f'{p:.0f}' for p in passes[:5])}; "
              f"last {', '.join(f'{p:.0f}' for p in passes[-5:])}")
        print(f"  WAL (the whole server's, other sessions' databases included): "
              f"{wal / MB:,.1f} MB, {wal / max(1, deleted):,.0f} B a run deleted")
        print(f"  load: {load_line()}")
        for probe in running:
            print(f"\n{probe.name} (then {probe.pause} s of pause, rolled back), "
                  f"errors {dict(probe.errors)}:")
            for name, low, high in (("without the prune", started, prune_from),
                                    ("during the prune", prune_from, prune_to),
                                    ("after, not vacuumed", prune_to, ended)):
                print(f"  {name:<22} {summary(window(probe, low, high))}")

        stats = conn.execute(STATS).fetchone()
        assert stats is not None
        print(f"\nruns after the prune: live {stats[0]:,}, dead {stats[1]:,}; autovacuum "
              f"would start at {stats[4]:,.0f} dead rows (threshold + scale factor x "
              f"reltuples) — this server: autovacuum={autovacuum(conn)}")
        began = time.perf_counter()
        conn.execute("VACUUM runs")
        vacuumed = time.perf_counter() - began
        conn.execute("VACUUM run_attempts")
        print(f"VACUUM runs (what autovacuum's pass would do): {vacuumed:.1f} s; "
              f"load {load_line()}")
        if before:
            began = time.perf_counter()
            conn.execute(RESTORE)
            conn.execute("DROP INDEX runs_created_brin")
            print(f"runs_finished_created built again: {time.perf_counter() - began:.1f} s")
        else:
            plans(conn, t0 + timedelta(days=1), keep, "Day 2 (after the prune and VACUUM)")
        print("\nIndexes of runs and run_attempts:")
        for name, size in conn.execute(SIZES):
            print(f"  {name:<28} {size / MB:8,.1f} MB")
        print(f"\nscale {scale}: {total:,} runs of {HISTORY_DAYS} days")


def autovacuum(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SHOW autovacuum").fetchone()
    assert row is not None
    return str(row[0])


def run(args: argparse.Namespace) -> None:
    for line in server_lines(args.db, ["fsync", "synchronous_commit", "shared_buffers",
                                       "max_wal_size", "autovacuum", "maintenance_work_mem"]):
        print(line)
    print(f"cores: {os.cpu_count()}; {load_line()}")
    print(f"command: {' '.join(['python', *sys.argv])}\n", flush=True)
    url = make_conninfo(args.db, dbname=DB_NAME)
    try:
        if not args.reuse:
            with admin_connect(args.db) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
                admin.execute(f'CREATE DATABASE "{DB_NAME}"')
            with admin_connect(url) as conn:
                migrate(conn)
                lsn = wal_lsn(conn)
            print(f"Build (scale {args.scale}, bench/fullday.py's loader):", flush=True)
            built = build(url, args.scale, "http://127.0.0.1:9")
            with admin_connect(url) as conn:
                wal = wal_since(conn, lsn)
            print(f"  build: {built.seconds:.0f} s, {built.jobs:,} jobs, {built.runs:,} runs, "
                  f"{built.attempts:,} earlier attempts, WAL {wal / MB:,.0f} MB\n", flush=True)
        measure(url, args.scale, args.quiet_seconds, args.keep_days, args.before)
    finally:
        if not args.keep:
            with admin_connect(args.db) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help=f"admin URL that may CREATE DATABASE (default {DEFAULT_ADMIN_URL})")
    parser.add_argument("--scale", type=float, default=0.1,
                        help="fullday's scale: 0.1 is ~3.7 M runs, a day ~120 k (0.1)")
    parser.add_argument("--quiet-seconds", type=float, default=30.0,
                        help="probe time before and after the prune (30)")
    parser.add_argument("--keep-days", type=int, default=RETENTION_DAYS,
                        help=f"retention: {RETENTION_DAYS} deletes the oldest day; after a --keep "
                             f"run, --reuse --keep-days 27 deletes the next 3 ({RETENTION_DAYS})")
    parser.add_argument("--before", action="store_true",
                        help="prune with the statement and the BRIN index of before migration "
                             "0037 (no plans; the index is rebuilt afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--reuse", action="store_true",
                        help="measure the database a --keep run left (no build)")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error(f"--scale: expected a number in (0, 1], got {args.scale}")
    return run_interruptibly(lambda: run(args), load_line)


if __name__ == "__main__":
    sys.exit(main())
