"""What the failure notices' triggers cost the paths they sit on.

The outbox is written by triggers (functions/notice_runs.sql, notice_jobs.sql): on ``runs``
when a run becomes dead, on ``jobs`` when failed fires reach the alert threshold or a job ends
by max_runs/end_at. Their WHEN clauses keep every other update out of them; this prints
what is left, as the server's CPU (the backend's CPU time, psutil: steadier than wall time on
a shared machine), in a fresh database (``crondepot_noticebench_<n>``, dropped afterwards):

- **claim + success**, the worker's hot path: ``--rounds`` rounds of ``--batches`` claims of
  100 runs and their success write (the worker's own calls), with the notice triggers
  enabled and disabled in turn (ALTER TABLE ... DISABLE TRIGGER, as the owner), interleaved
  so the machine's other load falls on both alike. µs of server CPU per run.
- **dead letter**, the path that writes events: batches of 100 claimed runs recorded dead
  one by one (``record_final_failure``, the worker's call), for a tenant with 0, 1 and 3
  channels. µs of server CPU per dead run (each also crosses no threshold: the jobs have
  one run each).

Figures are printed, never asserted. One command:

    python bench/notice_triggers.py [--db ADMIN_URL] [--rounds 4] [--batches 50]
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import psycopg

from common import DEFAULT_ADMIN_URL, BenchDatabases, admin_connect, backend_cpu, server_lines
from crondepot.db import ALL_TENANTS, connect
from crondepot.queue import Success, claim_runs, record_final_failure, record_successes
from crondepot.worker.loop import _configure_connection
from workers import HANDLER, QUEUED_RUNS, grant_handler

BATCH = 100
TRIGGERS = (("runs", "runs_notice_dead"), ("jobs", "jobs_notice_unhealthy"),
            ("jobs", "jobs_notice_ended"))


def _triggers(admin: psycopg.Connection[Any], on: bool) -> None:
    verb = "ENABLE" if on else "DISABLE"
    for table, trigger in TRIGGERS:
        admin.execute(f"ALTER TABLE {table} {verb} TRIGGER {trigger}")


def _queue(admin: psycopg.Connection[Any], count: int) -> None:
    """``count`` ready runs of one-run jobs, instead of the ones before (TRUNCATE fires no
    row trigger: nothing is written to the outbox or the audit log by it)."""
    admin.execute("TRUNCATE runs, run_attempts, jobs, notice_events, notice_messages CASCADE")
    admin.execute(QUEUED_RUNS, {"handler": HANDLER, "count": count})
    admin.execute("VACUUM (ANALYZE) runs")
    admin.execute("VACUUM (ANALYZE) jobs")


def hot_path(conn: psycopg.Connection[Any], batches: int) -> float:
    """Server CPU µs per run of claiming and recording successes, ``batches`` of 100."""
    used = backend_cpu(conn)
    before = used()
    for _ in range(batches):
        runs = claim_runs(conn, owner="bench", shares={"normal": BATCH})
        assert len(runs) == BATCH, "too few queued runs"
        record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt, None)
                                for r in runs])
    return (used() - before) / (batches * BATCH) * 1e6


def dead_path(conn: psycopg.Connection[Any], batches: int) -> float:
    """Server CPU µs per run of claiming and recording runs dead, one write a run."""
    used = backend_cpu(conn)
    spent = 0.0
    for _ in range(batches):
        runs = claim_runs(conn, owner="bench", shares={"normal": BATCH})
        assert len(runs) == BATCH, "too few queued runs"
        before = used()
        for run in runs:
            record_final_failure(conn, run.run_id, run.lease_token, status="dead",
                                 error="HTTP 503", error_class="TemporaryError")
        spent += used() - before
    return spent / (batches * BATCH) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--batches", type=int, default=50)
    args = parser.parse_args()
    print("\n".join(server_lines(args.db, ("synchronous_commit", "shared_buffers"))))
    print(f"command: python bench/notice_triggers.py --rounds {args.rounds} "
          f"--batches {args.batches}")
    per_round = args.batches * BATCH
    databases = BenchDatabases(args.db, "crondepot_noticebench_")
    with databases.fresh() as url, admin_connect(url) as admin:
        grant_handler(admin)
        _queue(admin, 2 * args.rounds * per_round)
        admin.execute("INSERT INTO notice_channels (tenant_id, kind, address) "
                      "VALUES (1, 'email', 'ops@bank42.example')")
        figures: dict[bool, list[float]] = {True: [], False: []}
        with connect(url, tenants=ALL_TENANTS) as conn:
            _configure_connection(conn)       # the worker's JSON reader, its time zone
            for _ in range(args.rounds):
                for on in (True, False):
                    _triggers(admin, on)
                    figures[on].append(hot_path(conn, args.batches))
        _triggers(admin, True)
        print(f"\nclaim + success write, {args.rounds} rounds of {per_round} runs, server CPU "
              "µs per run (median, range):")
        for on in (True, False):
            values = figures[on]
            print(f"  notice triggers {'enabled ' if on else 'disabled'}: "
                  f"{statistics.median(values):6.1f} ({min(values):.1f}-{max(values):.1f})")

        print(f"\ndead letter, {per_round} runs recorded dead one by one, server CPU µs per "
              "run (median of rounds):")
        for channels in (0, 1, 3):
            admin.execute("DELETE FROM notice_channels")
            admin.execute("INSERT INTO notice_channels (tenant_id, kind, address) "
                          "SELECT 1, 'email', 'ops' || g || '@bank42.example' "
                          "FROM generate_series(1, %s) AS g", (channels,))
            _queue(admin, args.rounds * per_round)
            with connect(url, tenants=ALL_TENANTS) as conn:
                _configure_connection(conn)
                values = [dead_path(conn, args.batches) for _ in range(args.rounds)]
            events = admin.execute("SELECT count(*) FROM notice_events").fetchone()
            print(f"  {channels} channel(s): {statistics.median(values):6.1f} "
                  f"({min(values):.1f}-{max(values):.1f}); events written "
                  f"{events[0] if events else 0}")


if __name__ == "__main__":
    main()
