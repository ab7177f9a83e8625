"""``crondepot runs show`` with attempts, ``jobs show`` with health, ``jobs list
--unhealthy`` and ``tenants set-alert-after``, as real processes against a real database:
--json shapes, text output, bad input (exit 2 with a message, nothing changed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import psycopg

from crondepot.queue import claim_runs, record_retry, record_success
from crondepot.queue.outcome import record_final_failure
from tests.support.jobs import queued_runs

RUNNER = "import sys\nimport crondepot.cli as cli\nsys.exit(cli.main(sys.argv[1:]))\n"


def crondepot(db_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CRONDEPOT_TENANT"}
    env["CRONDEPOT_TENANT"] = "bank42"
    env["CRONDEPOT_DATABASE_URL"] = db_url
    return subprocess.run([sys.executable, "-c", RUNNER, *argv], capture_output=True,
                          text=True, timeout=120, env=env)


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _retried_then_succeeded(conn: psycopg.Connection[Any]) -> str:
    queued_runs(conn, 1)
    (first,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    record_retry(conn, first.run_id, first.lease_token, delay=0, error="HTTP 503",
                 error_class="TemporaryError")
    conn.execute("UPDATE runs SET available_at = now()")
    (second,) = claim_runs(conn, owner="w2", shares={"normal": 1})
    record_success(conn, second.run_id, second.lease_token, second.attempt)
    return first.run_id


def test_runs_show_prints_the_attempts(db_url: str, conn: psycopg.Connection[Any]) -> None:
    run_id = _retried_then_succeeded(conn)
    shown = _json(crondepot(db_url, "runs", "show", run_id, "--json"))
    assert shown["worker"] == "w2"
    assert [(a["attempt"], a["outcome"], a["worker"]) for a in shown["attempts"]] == [
        (1, "retried", "w1"), (2, "succeeded", "w2")]
    text = crondepot(db_url, "runs", "show", run_id)
    assert text.returncode == 0, text.stderr
    assert "attempts:" in text.stdout
    assert "#1   retried" in text.stdout and "TemporaryError: HTTP 503" in text.stdout
    assert "#2   succeeded" in text.stdout and "w2" in text.stdout
    missing = crondepot(db_url, "runs", "show", "999:1")
    assert missing.returncode != 0 and "not found" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_jobs_show_and_list_unhealthy(db_url: str, conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 2)
    jobs = [row[0] for row in conn.execute("SELECT id FROM jobs ORDER BY id")]
    for run in claim_runs(conn, owner="w1", shares={"normal": 2}):
        record_final_failure(conn, run.run_id, run.lease_token, status="failed",
                             error="HTTP 400", error_class="PermanentError")
    assert _json(crondepot(db_url, "jobs", "list", "--unhealthy", "--json"))["items"] == []
    changed = _json(crondepot(db_url, "tenants", "set-alert-after", "bank42", "1", "--json"))
    assert changed == {"tenant": "bank42", "alert_after_failures": 1, "previous": 3}
    listed = _json(crondepot(db_url, "jobs", "list", "--unhealthy", "--json"))
    assert [j["id"] for j in listed["items"]] == jobs
    shown = _json(crondepot(db_url, "jobs", "show", str(jobs[0]), "--json"))
    assert shown["health"] == {"unhealthy": True, "consecutive_failures": 1,
                               "alert_after_failures": 1, "threshold_from": "tenant",
                               "last_success_at": None, "last_success_run_id": None}
    text = crondepot(db_url, "jobs", "show", str(jobs[0]))
    assert text.returncode == 0, text.stderr
    assert "UNHEALTHY: 1 failed fire(s) in a row, alert after 1 (tenant)" in text.stdout
    assert "never" in text.stdout


def test_set_alert_after_refuses_bad_input_and_changes_nothing(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1)
    for bad in ("0", "10001", "three"):
        result = crondepot(db_url, "tenants", "set-alert-after", "bank42", bad)
        assert result.returncode == 2, result.stderr
        assert "expected a threshold from 1 to 10000" in result.stderr
        assert "Traceback" not in result.stderr
    unknown = crondepot(db_url, "tenants", "set-alert-after", "nobody", "2")
    assert unknown.returncode == 2 and "nobody" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    assert conn.execute("SELECT alert_after_failures FROM tenants").fetchall() == [(3,)]
