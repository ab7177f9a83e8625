"""Attempt history and job health written by real worker processes: a worker killed mid-call
(its attempt: lease_expired, in its name) and another that finishes the run; a run that
fails six times (five retried attempts and a dead one), read back with ``crondepot runs
show --json``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import queued_runs

RUNNER = "import sys\nimport crondepot.cli as cli\nsys.exit(cli.main(sys.argv[1:]))\n"


def _worker(url: str, name: str, *extra: str) -> Proc:
    return Proc("worker", "--db", url, "--import", "tests.support.handlers", "--name", name,
                *extra, env={"CRONDEPOT_TEST_CALLS_URL": url})


def _one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def _shown(url: str, run_id: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "CRONDEPOT_TENANT"}
    done = subprocess.run([sys.executable, "-c", RUNNER, "runs", "show", run_id, "--json",
                           "--db", url, "--tenant", "bank42"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert done.returncode == 0, done.stderr
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


@pytest.mark.slow
def test_a_killed_workers_attempt_is_kept_and_another_worker_succeeds(db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, payload='{"sleep": 30}', lease_seconds=5)
        victim = _worker(db_url, "victim", "--heartbeat", "1")
        wait_until(lambda: _one(conn, "SELECT count(*) FROM test_calls") == 1, timeout=60,
                   message="the first call")
        victim.kill(signal.SIGKILL)
        victim.popen.wait()
        conn.execute("UPDATE jobs SET payload = '{}'")          # the second call is quick
        rescuer = _worker(db_url, "rescuer")
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs WHERE status = "
                                          "'succeeded'") == 1, timeout=60, message="retry")
        finally:
            rescuer.stop()
        run_id = _one(conn, "SELECT run_id FROM runs")
        assert _one(conn, "SELECT failing_fires FROM jobs") == 0
    shown = _shown(db_url, run_id)
    assert shown["worker"] == "rescuer"
    assert [(a["attempt"], a["outcome"], a["worker"]) for a in shown["attempts"]] == [
        (1, "lease_expired", "victim"), (2, "succeeded", "rescuer")]
    assert shown["attempts"][0]["error_class"] == "LeaseExpired"


@pytest.mark.slow
def test_six_failed_attempts_are_five_retried_and_one_dead_and_a_failed_fire(
        db_url: str) -> None:
    with connect(db_url) as conn:
        queued_runs(conn, 1, handler="test.fail")
        worker = _worker(db_url, "w-fail")
        try:
            def skip_backoff_and_check() -> bool:
                conn.execute("UPDATE runs SET available_at = now() WHERE status = 'queued'")
                return bool(_one(conn, "SELECT count(*) FROM runs WHERE status = 'dead'") == 1)
            wait_until(skip_backoff_and_check, timeout=90, interval=0.2, message="dead")
        finally:
            worker.stop()
        run_id = _one(conn, "SELECT run_id FROM runs")
        assert _one(conn, "SELECT failing_fires FROM jobs") == 1
    attempts = _shown(db_url, run_id)["attempts"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == \
        [(n, "retried") for n in range(1, 6)] + [(6, "dead")]
    assert {a["worker"] for a in attempts} == {"w-fail"}
    assert all(a["error"] for a in attempts)
