"""Overlap policies end to end (issue 31, item 1): a real scheduler and two real workers, a
slow handler, fires coming faster than it ends. skip and buffer_one jobs never have two
calls at once; the fires they drop are written skipped 'overlap'; buffer_one runs the one
that waited; the ledger stays clean; and a buffered run still runs when the worker holding
its predecessor is SIGKILLed."""

from __future__ import annotations

import itertools
import signal
import time
from datetime import datetime
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.job.store import trigger_job
from crondepot.scheduler.ledger import verify
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import CALLS_TABLE, add_job, tenant

SLOW = {"type": "python", "handler": "test.overlap_slow"}


def _calls(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[datetime, datetime]]:
    """Each finished call of the job's runs: (start, end), by start."""
    rows = conn.execute(
        "SELECT s.at, e.at FROM test_calls AS s JOIN test_calls AS e "
        "ON e.run_id = s.run_id AND e.attempt = -s.attempt "
        "WHERE s.attempt > 0 AND s.run_id LIKE %s ORDER BY s.at", (f"{job_id}:%",)).fetchall()
    return [(start, end) for start, end in rows]


def _waited(conn: psycopg.Connection[Any], job_id: int) -> int:
    """The job's calls whose run was written before the job's previous call ended: fires
    that came while a call ran and were run after it."""
    rows = conn.execute(
        "SELECT r.created_at, e.at FROM runs AS r "
        "JOIN test_calls AS s ON s.run_id = r.run_id AND s.attempt > 0 "
        "JOIN test_calls AS e ON e.run_id = s.run_id AND e.attempt = -s.attempt "
        "WHERE r.job_id = %s ORDER BY s.at", (job_id,)).fetchall()
    return sum(1 for (_, ended), (written, _) in itertools.pairwise(rows) if written < ended)


def _most_at_once(calls: list[tuple[datetime, datetime]]) -> int:
    """The most calls in progress at one instant."""
    events = sorted([(s, 1) for s, _ in calls] + [(e, -1) for _, e in calls],
                    key=lambda x: (x[0], x[1]))      # an end before a start at one instant
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _statuses(conn: psycopg.Connection[Any], job_id: int) -> dict[tuple[str, str | None], int]:
    return {(status, reason): n for status, reason, n in conn.execute(
        "SELECT status, skip_reason, count(*) FROM runs WHERE job_id = %s GROUP BY 1, 2",
        (job_id,))}


def _state(conn: psycopg.Connection[Any], job_id: int, procs: list[Proc]) -> str:
    """The job's runs and the processes' last lines, for a timeout's message."""
    runs = conn.execute("SELECT run_id, status, skip_reason, attempt, worker, available_at, "
                        "lease_expires_at FROM runs WHERE job_id = %s ORDER BY run_id",
                        (job_id,)).fetchall()
    job = conn.execute("SELECT next_nominal_at, next_run_at, paused FROM jobs WHERE id = %s",
                       (job_id,)).fetchone()
    tails = "\n".join(f"--- {p.args[0]} (exit {p.popen.poll()}):\n"
                      f"{p.output()[-3000:]}" for p in procs)
    return f"now {conn.execute('SELECT now()').fetchone()}\njob {job}\nruns {runs}\n{tails}"


def _owe_fires(conn: psycopg.Connection[Any], job_id: int, minutes: int) -> None:
    """The job's fires of the last ``minutes`` minutes and now's are owed: the scheduler
    catches them up at once (catchup all), so they are all ready together."""
    conn.execute("UPDATE jobs SET next_nominal_at = date_trunc('minute', now()) - "
                 "make_interval(mins => %s), next_run_at = date_trunc('minute', now()) - "
                 "make_interval(mins => %s) WHERE id = %s", (minutes, minutes, job_id))


def _workers(db_url: str, *names: str, env: dict[str, str] | None = None,
             extra: tuple[str, ...] = ()) -> list[Proc]:
    return [Proc("worker", "--db", db_url, "--import", "tests.support.handlers", "--name",
                 name, *extra, env={"CRONDEPOT_TEST_CALLS_URL": db_url, **(env or {})})
            for name in names]


@pytest.mark.slow
def test_two_workers_never_overlap_a_skip_or_buffer_one_job(db_url: str) -> None:
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)
        t = tenant(conn)
        jobs = {overlap: add_job(conn, t, key=f"reconcile-{overlap}", cron="* * * * *",
                                 catchup="all", max_catchup=100, target=SLOW,
                                 payload={"sleep": 1.5}, overlap=overlap)
                for overlap in ("allow", "skip", "buffer_one")}
        for job_id in jobs.values():
            _owe_fires(conn, job_id, 4)               # five fires ready at once
        # The workers first, and the scheduler once both claim (CI once saw a worker start
        # 3 s late under load).
        procs = _workers(db_url, "w1", "w2")
        wait_until(lambda: all("worker started" in p.output() for p in procs), timeout=60,
                   message="both workers claiming")
        procs.append(Proc("scheduler", "--db", db_url, "--tick", "500ms"))
        try:
            # Then a fire every 0.4 s for 6 s, each named after its second (a trigger),
            # while each call takes 1.5 s: the every-second job a slow handler cannot keep
            # up with.
            for _ in range(15):
                for overlap in ("skip", "buffer_one"):
                    trigger_job(conn, t, jobs[overlap])
                time.sleep(0.4)
            wait_until(lambda: all(
                not ({("queued", None), ("running", None)} & set(_statuses(conn, j)))
                for j in jobs.values()), timeout=120, message="every run settled")
        finally:
            for proc in procs:
                proc.stop()
        report = verify(conn)
        calls = {overlap: _calls(conn, job_id) for overlap, job_id in jobs.items()}
        states = {overlap: _statuses(conn, job_id) for overlap, job_id in jobs.items()}
        waited = _waited(conn, jobs["buffer_one"])

    assert report.clean, report.document()
    # The control: allowed, the five caught-up fires ran side by side.
    assert _most_at_once(calls["allow"]) > 1, calls["allow"]
    assert set(states["allow"]) == {("succeeded", None)}
    for overlap in ("skip", "buffer_one"):
        assert _most_at_once(calls[overlap]) == 1, (overlap, calls[overlap])
        assert states[overlap][("skipped", "overlap")] >= 3, (overlap, states[overlap])
        assert set(states[overlap]) == {("succeeded", None), ("skipped", "overlap")}
        assert states[overlap][("succeeded", None)] == len(calls[overlap])
    # buffer_one ran a fire that came while its previous call ran. The caught-up fires come
    # together, so one of them waits for the first call whatever the machine's load
    # (counting more calls of buffer_one than of skip, as this test once did, depended on it).
    assert waited >= 1, calls["buffer_one"]
    # That at most one waits is the claim's rule, proven where it is decided, without a
    # clock: tests/integration/claim/test_claim_overlap.py, one claim after another and two
    # at the same instant. Counted here by sampling, it needed a guess of how soon a claim
    # sees a new fire, and a loaded machine outran the guess (3 waiting "for 3 s").


@pytest.mark.slow
def test_a_buffered_run_runs_after_its_predecessors_worker_is_killed(db_url: str) -> None:
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)
        t = tenant(conn)
        job = add_job(conn, t, key="reconcile-killed", cron="* * * * *", catchup="all",
                      target=SLOW, payload={"sleep": 0.2}, overlap="buffer_one",
                      lease_seconds=5)
        _owe_fires(conn, job, 1)                      # two fires ready at once
        # w1's calls hang (600 s), so it holds the first run when it dies.
        (w1,) = _workers(db_url, "w1", env={"CRONDEPOT_TEST_SLOW_SECONDS": "600"},
                         extra=("--heartbeat", "1"))
        scheduler = Proc("scheduler", "--db", db_url, "--tick", "500ms")
        w2: list[Proc] = []
        try:
            wait_until(lambda: _statuses(conn, job).get(("running", None)) == 1
                       and _statuses(conn, job).get(("queued", None)) == 1,
                       timeout=60, message="one run leased to w1, one waiting",
                       describe=lambda: _state(conn, job, [w1, scheduler]))
            (held,) = conn.execute("SELECT run_id FROM runs WHERE job_id = %s AND "
                                   "status = 'running'", (job,)).fetchone() or ("",)
            (buffered,) = conn.execute("SELECT run_id FROM runs WHERE job_id = %s AND "
                                       "status = 'queued'", (job,)).fetchone() or ("",)
            w1.kill(signal.SIGKILL)
            w1.popen.wait()
            w2 = _workers(db_url, "w2", extra=("--reap-every", "1s"))
            # The lease expires, the reaper queues the lost run again, w2 runs it and then
            # the buffered one.
            wait_until(lambda: conn.execute(
                "SELECT count(*) FROM runs WHERE run_id = ANY(%s) AND status = 'succeeded'",
                ([held, buffered],)).fetchone() == (2,), timeout=90,
                message="the lost run and the buffered one both succeeded")
        finally:
            for proc in [scheduler, *w2]:
                proc.stop()
        worker = conn.execute("SELECT worker FROM runs WHERE run_id = %s",
                              (buffered,)).fetchone()
        calls = _calls(conn, job)
        debug = (conn.execute("SELECT run_id, attempt, pid, at FROM test_calls ORDER BY at")
                 .fetchall(), conn.execute("SELECT run_id, status, attempt, started_at, "
                                           "finished_at, worker FROM runs").fetchall())
        report = verify(conn)
    assert worker is not None and str(worker[0]).startswith("w2"), worker
    assert _most_at_once(calls) == 1, (calls, debug)
    assert len(calls) == 2        # the killed call never ended; its retry and the buffered
    assert report.clean, report.document()
