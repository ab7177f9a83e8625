"""Restore from backup, as an operator lives it: what crondepot does on last night's data.

A drill with real processes on a private PostgreSQL cluster (``testkit``'s, pgserver's
binaries) with WAL archiving on:

1. migrate, create a tenant and ``--jobs`` every-minute jobs (spread over 50 s), half to a
   gateway that drops repeated idempotency keys (``"dedupes": true``), half to one that does
   not (every accepted call is an SMS);
2. take a base backup (``pg_basebackup``), start a scheduler and a worker, let runs flow for
   ``--minutes``, noting the database time ``--back`` minutes before the end: the point the
   operator will restore to;
3. stop everything, restore the backup and replay the archived WAL up to that point
   (``recovery_target_time``, then promote), and start crondepot on it: it notices the
   restore and refuses to start (crondepot.db.restore); the operator answers
   ``crondepot db restored --skip-repeats`` (the default here) or ``--resend``
   (``--resolution``), and starts it again;
4. wait until every fire up to a minute ago has its run and nothing is queued, then count.

The processes run with ``CRONDEPOT_RESTORE_GAP_SECONDS=60`` (``--gap``): a restore point
only a couple of minutes back is inside the default gap (5 minutes) a failover may leave.

It prints: the restore point and what the restored database holds; which fires were written
again (their run ids are the ones already delivered: ids are stable); the calls each gateway
got again, and the repeated effects (a second SMS) at each; what ``crondepot verify`` says of
the window; and the catch-up's lateness. Exit 1 if the processes did not refuse to start
on the restored database, or if a repeated effect reached a target with
``--resolution skip-repeats``; the figures are docs/operations.md's, "Restoring from a
backup".

    python bench/restore_drill.py                      # 100 jobs, 3 min, restore 1.5 min back
    python bench/restore_drill.py --resolution resend  # what happens without the guard
    python bench/restore_drill.py --jobs 300 --minutes 14 --back 10 --gap 300
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from crondepot.db import connect, migrate
from crondepot.db.restore import RESTORE_GAP_ENV
from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.job.spec import JobSpec
from crondepot.job.store import create_jobs
from crondepot.tenancy.tenants import create_tenant
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.processes import Proc, wait_until
from gateway import Gateway

ROOT = Path(__file__).resolve().parents[1]


def archiving(archive: Path) -> list[str]:
    """Server settings for WAL archiving into ``archive`` (a segment at least every 5 s, so
    the restore point is never far behind what was archived)."""
    return ["-c wal_level=replica", "-c archive_mode=on", "-c archive_timeout=5s",
            f"-c archive_command='cp %p {archive}/%f'"]


def db_now(url: str) -> datetime:
    with connect(url) as conn:
        row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


def create_load(url: str, jobs: int, gateways: dict[str, Gateway]) -> None:
    with connect(url) as conn:
        migrate(conn)
        tenant = create_tenant(conn, "bank42")
        specs = [JobSpec.from_document({
            "key": f"restore-{i}", "cron": "* * * * *", "tz": "UTC",
            "spread": {"seconds": 50},
            "target": {"type": "http", "url": gateways[kind].url, "timeout_s": 5,
                       "dedupes": kind == "dedupe"},
            "payload": {"n": i}, "misfire": {"policy": "run_late"}, "catchup": "all",
            "lease_seconds": 15})
            for i in range(jobs) for kind in ["dedupe" if i % 2 == 0 else "plain"]]
        create_jobs(conn, tenant.id, specs)


def processes(url: str, tag: str) -> list[Proc]:
    return [Proc("scheduler", "--db", url, "--tick", "1s", "--name", f"scheduler-{tag}"),
            Proc("worker", "--db", url, "--concurrency", "32", "--retention-days", "0",
                 "--name", f"worker-{tag}")]


def crondepot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=600)


def wait_archived(url: str) -> None:
    """Switch to a new WAL segment and wait until the one before it is archived."""
    with connect(url) as conn:
        row = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
        assert row is not None
        segment = row[0]

        def done() -> bool:
            last = conn.execute("SELECT last_archived_wal FROM pg_stat_archiver").fetchone()
            return last is not None and last[0] is not None and last[0] >= segment

        wait_until(done, timeout=60, interval=0.2, message=f"WAL {segment} archived")


def restore(cluster: PrivateCluster, backup: Path, archive: Path, target: datetime) -> None:
    """Replace the cluster's data with ``backup`` and replay the archive up to ``target``."""
    cluster.stop("fast")
    shutil.rmtree(cluster.data)
    shutil.copytree(backup, cluster.data)
    with (cluster.data / "postgresql.auto.conf").open("a") as conf:
        conf.write(f"restore_command = 'cp {archive}/%f %p'\n"
                   f"recovery_target_time = '{target.isoformat()}'\n"
                   "recovery_target_action = 'promote'\n")
    (cluster.data / "recovery.signal").touch()
    if cluster.user:
        subprocess.run(["chown", "-R", f"{cluster.user}:", str(cluster.data)], check=True)
    os.chmod(cluster.data, 0o700)


def out_of_recovery(url: str) -> bool:
    try:
        with connect(url) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        return row is not None and row[0] is False
    except psycopg.OperationalError:
        return False


def settled(url: str) -> bool:
    """Every fire due up to a minute ago has a final run (its spread included)."""
    with connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM runs WHERE status IN ('queued', 'running')),"
            " (SELECT count(*) FROM jobs WHERE next_run_at < now() - interval '5 seconds')"
        ).fetchone()
    return row is not None and row == (0, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=3.0, help="runs flow this long")
    parser.add_argument("--back", type=float, default=1.5,
                        help="minutes before the end the backup is restored to")
    parser.add_argument("--resolution", choices=("skip-repeats", "resend"),
                        default="skip-repeats", help="the operator's answer to the restore")
    parser.add_argument("--gap", type=float, default=60.0,
                        help="CRONDEPOT_RESTORE_GAP_SECONDS for the processes (60)")
    args = parser.parse_args(argv)
    os.environ[ALLOWLIST_ENV] = "127.0.0.1/32"      # the gateways listen on loopback
    os.environ[RESTORE_GAP_ENV] = str(args.gap)
    if not 0 < args.back < args.minutes:
        parser.error("--back must be between 0 and --minutes")

    cluster = PrivateCluster()
    archive, backup = cluster.root / "wal-archive", cluster.root / "base-backup"
    archive.mkdir()
    os.chmod(archive, 0o777)
    gateways = {"dedupe": Gateway(dedupe=True).start(), "plain": Gateway(dedupe=False).start()}
    running: list[Proc] = []
    try:
        cluster.start(*archiving(archive))
        url = cluster.url
        create_load(url, args.jobs, gateways)
        cluster.run_tool("pg_basebackup", "-D", str(backup), "-h", "127.0.0.1",
                         "-p", str(cluster.port), "-U", "postgres", "-X", "stream",
                         "--checkpoint=fast")
        running = processes(url, "before")
        started = time.monotonic()
        time.sleep(max(0.0, (args.minutes - args.back) * 60))
        target = db_now(url)
        time.sleep(max(0.0, args.minutes * 60 - (time.monotonic() - started)))
        for proc in running:
            proc.stop(timeout=60)
        running = []
        wait_archived(url)
        with connect(url) as conn:
            row = conn.execute("SELECT count(*), max(created_at) FROM runs").fetchone()
        assert row is not None
        rows_before, last_before = row
        before = {name: len(gw.requests) for name, gw in gateways.items()}
        delivered = {name: {r.key for r in gw.requests if r.status == 200}
                     for name, gw in gateways.items()}

        restore_started = time.monotonic()
        restore(cluster, backup, archive, target)
        cluster.start(*archiving(archive))
        wait_until(lambda: out_of_recovery(url), timeout=300, interval=0.5,
                   message="the restored cluster promoted")
        restore_seconds = time.monotonic() - restore_started
        with connect(url) as conn:
            row = conn.execute("SELECT count(*), max(created_at) FROM runs").fetchone()
        assert row is not None
        rows_restored, last_restored = row

        refused = processes(url, "refused")
        codes = [proc.popen.wait(timeout=120) for proc in refused]
        refusal = next((line for proc in refused for line in proc.output().splitlines()
                        if "looks restored" in line), "")
        answered = crondepot("db", "restored", "--db", url, f"--{args.resolution}", "--json")
        if answered.returncode != 0:
            raise SystemExit(f"crondepot db restored failed: {answered.stderr}")
        resolution = json.loads(answered.stdout)
        back_up = db_now(url)
        running = processes(url, "after")
        wait_until(lambda: settled(url), timeout=240, interval=1.0,
                   message="the catch-up written and delivered")
        time.sleep(5)
        for proc in running:
            proc.stop(timeout=60)
        running = []

        with connect(url) as conn:
            again = conn.execute(
                "SELECT count(*), min(nominal_at), max(nominal_at),"
                " percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM"
                "   first_claimed_at - due_at)),"
                " max(extract(epoch FROM first_claimed_at - due_at))"
                " FROM runs WHERE created_at >= %s AND nominal_at < %s",
                (back_up, back_up)).fetchone()
        assert again is not None
        verify = crondepot(
            "verify", "--db", url, "--json",
            "--since", (back_up - timedelta(minutes=args.minutes + 1)).isoformat(),
            "--until", (back_up - timedelta(seconds=70)).isoformat())
        verified = json.loads(verify.stdout)

        figures: dict[str, Any] = {}
        for name, gw in gateways.items():
            after = gw.requests[before[name]:]
            repeats = [r for r in after if r.key in delivered[name]]
            figures[name] = {
                "calls_after": len(after),
                "repeated_calls": len(repeats),
                "repeated_effects": sum(1 for r in repeats if r.effect),
                "runs_repeated": len({r.key for r in repeats}),
            }
        print(f"restore drill: {args.jobs} every-minute jobs (half dedupe), runs for "
              f"{args.minutes:g} min, restored to {args.back:g} min before the end, "
              f"answered --{args.resolution} (restore gap {args.gap:g} s)")
        print(f"  restore point {target.isoformat()}; restore and replay took "
              f"{restore_seconds:.1f} s")
        print(f"  runs in the database: {rows_before} before, {rows_restored} after the "
              f"restore (last written {last_before} -> {last_restored})")
        print(f"  processes started on the restored database exited {codes}: "
              f"{refusal[:160]}…")
        print(f"  crondepot db restored --{args.resolution}: {resolution['fires_skipped']} "
              f"fires and {resolution['runs_skipped']} queued or running runs of "
              f"{resolution['jobs']} jobs without a repeat guard skipped (restored)")
        print(f"  fires written again on start: {again[0]} runs, nominal "
              f"{again[1]} .. {again[2]}; started late by p50 {again[3] or 0:.1f} s, "
              f"max {again[4] or 0:.1f} s")
        for name, fig in figures.items():
            print(f"  gateway {name}: {fig['calls_after']} calls after the restore, "
                  f"{fig['repeated_calls']} of runs it had already answered "
                  f"({fig['runs_repeated']} runs), repeated effects "
                  f"{fig['repeated_effects']}")
        print(f"  verify: fires {verified['fires']}, unaccounted "
              f"{verified['unaccounted_count']}, duplicated {verified['duplicated_count']}, "
              f"clean {verified['clean']}")
        print("  calls by status", json.dumps(Counter(
            r.status for gw in gateways.values() for r in gw.requests)))
        failed = []
        if codes != [2, 2]:
            failed.append("the processes did not refuse the restored database")
        if args.resolution == "skip-repeats" and any(
                fig["repeated_effects"] for fig in figures.values()):
            failed.append("a repeated effect reached a target")
        print("RESULT: " + ("FAIL: " + "; ".join(failed) if failed else "PASS"))
        return 1 if failed else 0
    finally:
        for proc in running:
            proc.kill(signal.SIGKILL)
        for gw in gateways.values():
            gw.stop()
        cluster.destroy()


if __name__ == "__main__":
    sys.exit(main())
