"""``crondepot backfill`` as an operator runs it: a real process on a real database."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

import psycopg

from crondepot.db import connect
from crondepot.db.clock import database_now
from crondepot.job import JobSpec
from crondepot.job.store import create_jobs
from crondepot.scheduler.tick import tick
from crondepot.timetable import run_id
from tests.support.jobs import tenant


def crondepot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=120)


def _job(conn: psycopg.Connection[Any], cron: str, created: datetime) -> int:
    doc = {"cron": cron, "tz": "UTC", "target": {"type": "python", "handler": "test.noop"}}
    (made,) = create_jobs(conn, tenant(conn), [JobSpec.from_document(doc)], now=created)
    while tick(conn, batch=500).full:     # the scheduler writes every fire up to now
        pass
    return made.id


def _nominals(conn: psycopg.Connection[Any], job: int) -> list[datetime]:
    return [r[0] for r in conn.execute(
        "SELECT nominal_at FROM runs WHERE job_id = %s ORDER BY nominal_at", (job,))]


def test_backfill_writes_the_lost_fires_once_and_refuses_bad_input(db_url: str) -> None:
    with connect(db_url) as conn:
        now = database_now(conn)
        start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
        job = _job(conn, "*/10 * * * *", start)
        written = _nominals(conn, job)
        assert len(written) >= 12
        lost = written[1:4]
        conn.execute("DELETE FROM runs WHERE job_id = %s AND nominal_at = ANY(%s)",
                     (job, lost))
        until = written[-1]           # excluded: the last fire keeps its row anyway
    common = ["--db", db_url, "--tenant", "bank42"]
    window = ["--from", start.isoformat(), "--to", until.isoformat()]

    dry = crondepot("backfill", str(job), *window, *common, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["written"] == 3
    with connect(db_url) as conn:
        assert len(_nominals(conn, job)) == len(written) - 3

    done = crondepot("backfill", str(job), *window, *common, "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert sorted(body["written_run_ids"]) == sorted(run_id(job, n) for n in lost)
    assert (body["written"], body["requeued"], body["batches"]) == (3, 0, 1)
    with connect(db_url) as conn:
        assert _nominals(conn, job) == written

    again = crondepot("backfill", str(job), *window, *common)
    assert again.returncode == 0, again.stderr
    assert "wrote 0 queued" in again.stdout
    assert f"{len(written) - 1} already had a row" in again.stdout

    check = crondepot("verify", "--db", db_url, "--tenant", "bank42",
                      "--since", start.isoformat(), "--until", until.isoformat(), "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    report = json.loads(check.stdout)
    assert (report["unaccounted_count"], report["duplicated_count"]) == (0, 0)

    for args, says in (
            (["--from", until.isoformat(), "--to", start.isoformat()], "must be before"),
            (["--from", start.isoformat(), "--to", (now + timedelta(days=1)).isoformat()],
             "after now"),
            (["--from", (start - timedelta(days=40)).isoformat(), "--to", start.isoformat()],
             "at most 31 days"),
            (["--from", (start - timedelta(days=32)).isoformat(), "--to",
              (start - timedelta(days=20)).isoformat()], "pruned"),
            (["--from", "yesterday", "--to", start.isoformat()], "ISO-8601"),
            (["--from", "2026-01-01T00:00", "--to", start.isoformat()], "UTC offset")):
        bad = crondepot("backfill", str(job), *args, *common)
        assert bad.returncode == 2, (args, bad.stdout, bad.stderr)
        assert says in bad.stderr and "Traceback" not in bad.stderr
    for who in ("999999", str(2**70)):
        missing = crondepot("backfill", who, *window, *common)
        assert missing.returncode == 2 and f"job {who} not found" in missing.stderr
        assert "Traceback" not in missing.stderr
    other = crondepot("backfill", str(job), *window, "--db", db_url, "--tenant", "nobody")
    assert other.returncode == 2 and "unknown tenant" in other.stderr
    with connect(db_url) as conn:
        assert _nominals(conn, job) == written


def test_a_large_range_goes_in_batches_with_progress(db_url: str) -> None:
    with connect(db_url) as conn:
        now = database_now(conn)
        start = now.replace(second=0, microsecond=0) - timedelta(days=8)
        job = _job(conn, "* * * * *", start)
        conn.execute("DELETE FROM runs WHERE job_id = %s", (job,))
        until = now.replace(second=0, microsecond=0) - timedelta(hours=1)
    expected = int((until - start).total_seconds() // 60) - 1   # start and until excluded
    done = crondepot("backfill", str(job), "--from", start.isoformat(), "--to",
                     until.isoformat(), "--db", db_url, "--tenant", "bank42", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["batches"] == 2 and body["fires"] == expected
    assert body["written"] + body["written_skipped"] == expected
    assert len(body["written_run_ids"]) == 1000          # listed at most
    assert "batch 1: 10000 fires so far" in done.stderr
    with connect(db_url) as conn:
        assert len(_nominals(conn, job)) == expected
