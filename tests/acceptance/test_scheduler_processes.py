"""Scheduler copies as real processes: racing, killed, and cut off by a database restart.

Counted every time: runs created, distinct run ids, jobs still due, and what each copy did
(from its JSON log lines). Set CRONDEPOT_STRESS_ROUNDS to repeat the race more often.
"""

from __future__ import annotations

import os
import signal
import time

import psycopg
import pytest

from crondepot.db import connect, migrate
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import bulk_due_jobs, counts

ROUNDS = int(os.environ.get("CRONDEPOT_STRESS_ROUNDS", "5"))
DEBUG = {"CRONDEPOT_LOG_LEVEL": "DEBUG"}


def _copies(url: str, n: int, *extra: str) -> list[Proc]:
    return [Proc("scheduler", "--db", url, "--name", f"copy{i}", *extra, env=DEBUG)
            for i in range(n)]


def _ticks(proc: Proc) -> list[dict[str, int]]:
    return [line for line in proc.lines() if line.get("msg") == "tick"]


def _stop(procs: list[Proc]) -> None:
    for proc in procs:
        proc.kill(signal.SIGTERM)
    for proc in procs:
        proc.stop()


def _drained(url: str, expected: int) -> bool:
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2) as conn:
            c = counts(conn)
    except psycopg.OperationalError:
        return False
    return c["runs"] == expected and c["still_due"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_three_copies_write_10000_due_runs_exactly_once(db_url: str, round_: int) -> None:
    with connect(db_url) as conn:
        # Due a few seconds from now, so that every copy is up and asleep when it happens.
        bulk_due_jobs(conn, 10_000, due_in_seconds=4)
    copies = _copies(db_url, 3, "--batch", "250")
    try:
        wait_until(lambda: _drained(db_url, 10_000), timeout=90, message="10,000 runs")
    finally:
        _stop(copies)
    with connect(db_url) as conn:
        assert counts(conn) == {"runs": 10_000, "distinct_runs": 10_000,
                                "jobs_with_runs": 10_000, "still_due": 0}
    claimed = [sum(t["claimed"] for t in _ticks(p)) for p in copies]
    inserted = [sum(t["inserted"] for t in _ticks(p)) for p in copies]
    assert sum(claimed) == 10_000, claimed        # no job planned twice
    assert sum(inserted) == 10_000, inserted      # no run written twice
    assert all(c > 0 for c in claimed), f"every copy takes a share: {claimed}"


@pytest.mark.slow
def test_kill_9_of_a_copy_mid_batch_loses_and_doubles_nothing(db_url: str) -> None:
    total = 30_000
    with connect(db_url) as conn:
        bulk_due_jobs(conn, total, due_in_seconds=3)
        victim = Proc("scheduler", "--db", db_url, "--name", "victim", "--batch", "10000",
                      env=DEBUG)
        others = _copies(db_url, 2, "--batch", "2000")

        def victim_in_transaction() -> bool:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                               "'crondepot-victim' AND xact_start IS NOT NULL").fetchone()
            return bool(row and row[0])

        try:
            wait_until(victim_in_transaction, timeout=60, interval=0.005,
                       message="the victim's tick transaction")
            victim.kill(signal.SIGKILL)
            wait_until(lambda: _drained(db_url, total), timeout=90, message="drain")
        finally:
            victim.kill()
            _stop(others)
        assert counts(conn) == {"runs": total, "distinct_runs": total, "jobs_with_runs": total,
                                "still_due": 0}
    assert victim.popen.wait() == -signal.SIGKILL
    committed = sum(t["inserted"] for p in [victim, *others] for t in _ticks(p))
    assert committed == total


@pytest.mark.slow
def test_postgres_restart_during_a_100000_job_drain(cluster: PrivateCluster) -> None:
    total = 100_000
    with connect(cluster.url) as conn:
        migrate(conn)
        bulk_due_jobs(conn, total, due_in_seconds=2)
    copies = _copies(cluster.url, 3, "--batch", "2000")
    try:
        def progressed() -> bool:
            try:
                with psycopg.connect(cluster.url, autocommit=True) as c:
                    row = c.execute("SELECT count(*) FROM runs").fetchone()
                    return bool(row and row[0] >= 10_000)
            except psycopg.OperationalError:
                return False

        wait_until(progressed, timeout=60, message="the drain to start")
        cluster.restart("immediate")     # crash-like: in-flight ticks are rolled back
        wait_until(lambda: _drained(cluster.url, total), timeout=180, message="drain")
    finally:
        _stop(copies)
    with connect(cluster.url) as conn:
        assert counts(conn) == {"runs": total, "distinct_runs": total, "jobs_with_runs": total,
                                "still_due": 0}
    noticed = [any(line.get("msg", "").startswith("database unavailable") for line in p.lines())
               for p in copies]
    assert any(noticed), "the copies saw the restart and recovered"


@pytest.mark.slow
def test_a_new_job_wakes_a_sleeping_scheduler_at_once(db_url: str) -> None:
    copy = Proc("scheduler", "--db", db_url, "--tick", "60s", "--name", "sleepy", env=DEBUG)
    try:
        wait_until(lambda: any(line.get("msg") == "scheduler started" for line in copy.lines()),
                   timeout=30, message="scheduler start")
        time.sleep(0.5)   # let it reach its 60-second sleep
        with connect(db_url) as conn:
            bulk_due_jobs(conn, 1, due_in_seconds=1)
            conn.execute("NOTIFY crondepot_jobs")
            started = time.monotonic()
            wait_until(lambda: counts(conn)["runs"] == 1, timeout=20, message="the run")
            waited = time.monotonic() - started
    finally:
        copy.stop()
    assert waited < 5, f"woken by NOTIFY, not by the 60 s tick (waited {waited:.1f}s)"


@pytest.mark.slow
def test_sigterm_stops_a_scheduler_cleanly(db_url: str) -> None:
    copy = Proc("scheduler", "--db", db_url, "--tick", "60s")
    wait_until(lambda: "scheduler started" in copy.output(), timeout=30, message="start")
    started = time.monotonic()
    assert copy.stop(timeout=10) == 0
    assert time.monotonic() - started < 5
    assert "scheduler stopped" in copy.output()
