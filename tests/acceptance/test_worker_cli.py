"""The worker-side commands: limits and the dead letter."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from crondepot.queue import claim_runs, record_final_failure
from tests.support.jobs import queued_runs


def crondepot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=120)


def test_limits_set_and_list(db_url: str) -> None:
    made = crondepot("limits", "set", "sms-gateway", "450/s", "--burst", "50", "--db", db_url,
                     "--json")
    assert made.returncode == 0, made.stderr
    listed = crondepot("limits", "list", "--db", db_url, "--json")
    assert json.loads(listed.stdout) == [{"name": "sms-gateway", "rate_per_second": 450.0,
                                          "burst": 50}]


@pytest.mark.parametrize(("args", "needle"), [
    (["sms", "fast"], "rate"),
    (["sms", "0/s"], "rate"),
    (["SMS Gateway", "10/s"], "name"),
    (["sms", "10/s", "--burst", "0"], "burst"),
])
def test_bad_limits_are_refused_and_change_nothing(db_url: str, args: list[str],
                                                   needle: str) -> None:
    result = crondepot("limits", "set", *args, "--db", db_url)
    assert result.returncode == 2 and needle in result.stderr, result.stderr
    assert json.loads(crondepot("limits", "list", "--db", db_url, "--json").stdout) == []


def test_dlq_list_and_replay_from_the_command_line(conn: psycopg.Connection[object],
                                                   db_url: str) -> None:
    queued_runs(conn, 2)
    dead = []
    for run in claim_runs(conn, owner="w", shares={"normal": 2}):
        record_final_failure(conn, run.run_id, run.lease_token, status="dead",
                             error="outcome unknown: timeout", error_class="OutcomeUnknown")
        dead.append(run.run_id)
    listed = json.loads(crondepot("dlq", "list", "--db", db_url, "--json").stdout)
    assert {r["run_id"] for r in listed} == set(dead)
    refused = crondepot("dlq", "replay", "--db", db_url)
    assert refused.returncode == 2 and "needs a filter" in refused.stderr
    dry = json.loads(crondepot("dlq", "replay", "--error", "OutcomeUnknown", "--dry-run",
                               "--db", db_url, "--json").stdout)
    assert dry["dry_run"] is True and set(dry["run_ids"]) == set(dead)
    done = json.loads(crondepot("dlq", "replay", dead[0], "--db", db_url, "--json").stdout)
    assert done["run_ids"] == [dead[0]]
    left = json.loads(crondepot("dlq", "list", "--db", db_url, "--json").stdout)
    assert [r["run_id"] for r in left] == [dead[1]]
