"""``crondepot runs list|retry`` across jobs and ``crondepot status`` counts, as real
processes against a real database: CRONDEPOT_TENANT, exact run ids, pages, bad input
(exit 2, nothing changes), retry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from crondepot.queue import claim_runs
from tests.support.api import snapshot
from tests.support.runs import BANK42, newest_first, seed_runs

RUNNER = "import sys\nimport crondepot.cli as cli\nsys.exit(cli.main(sys.argv[1:]))\n"


def crondepot(db_url: str, *args: str, tenant: str | None = "bank42"
              ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CRONDEPOT_TENANT"}
    if tenant:
        env["CRONDEPOT_TENANT"] = tenant
    command, action, *rest = args
    argv = [command, action, "--db", db_url, *rest] if command == "runs" else \
        [command, "--db", db_url, action, *rest]
    return subprocess.run([sys.executable, "-c", RUNNER, *argv], capture_output=True,
                          text=True, timeout=120, env=env)


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> dict[str, str]:
    ids, _jobs = seed_runs(conn)
    return ids


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_runs_list_across_jobs_for_the_env_tenant(db_url: str,
                                                  seeded: dict[str, str]) -> None:
    failed = _json(crondepot(db_url, "runs", "list", "--status", "failed", "--since", "1h",
                             "--json"))
    assert [r["run_id"] for r in failed["items"]] == \
        [seeded[x] for x in newest_first(["a_f1", "b_f1", "a_f2"])]
    assert failed["next_cursor"] is None
    assert failed["items"][0]["job_key"] == "job-A"
    errors = _json(crondepot(db_url, "runs", "list", "--error", "404", "--json"))
    assert [r["run_id"] for r in errors["items"]] == [seeded["a_f1"], seeded["a_f3"]]
    acme = _json(crondepot(db_url, "runs", "list", "--json", tenant="acme"))
    assert [r["run_id"] for r in acme["items"]] == [seeded["d_f1"]]
    # pages of 4: every bank42 run once, in order
    seen: list[str] = []
    cursor: list[str] = []
    while True:
        page = _json(crondepot(db_url, "runs", "list", "--limit", "4", "--json", *cursor))
        seen += [r["run_id"] for r in page["items"]]
        if page["next_cursor"] is None:
            break
        cursor = ["--cursor", page["next_cursor"]]
    assert seen == [seeded[x] for x in newest_first(BANK42)]
    table = crondepot(db_url, "runs", "list", "--status", "dead", "--since", "2h")
    assert table.returncode == 0 and seeded["b_d1"] in table.stdout
    assert "job-B" in table.stdout


@pytest.mark.parametrize("args", [
    ("--status", "broken"),
    ("--since", "1h", "--until", "2h"),
    ("--since", "yesterday"),
    ("--job", str(2**64)),
    ("--limit", "9" * 30),
    ("--cursor", "garbage"),
])
def test_runs_list_bad_input_exits_2_without_a_traceback(
        db_url: str, conn: psycopg.Connection[Any], seeded: dict[str, str],
        args: tuple[str, ...]) -> None:
    before = snapshot(conn)
    result = crondepot(db_url, "runs", "list", *args)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and result.stderr.strip()
    assert snapshot(conn) == before


def test_runs_retry(db_url: str, conn: psycopg.Connection[Any],
                    seeded: dict[str, str]) -> None:
    before = snapshot(conn)
    refused = crondepot(db_url, "runs", "retry", seeded["a_s1"])
    assert refused.returncode == 2 and "succeeded" in refused.stderr
    other = crondepot(db_url, "runs", "retry", seeded["d_f1"])          # acme's run
    assert other.returncode == 2 and "not found" in other.stderr
    assert snapshot(conn) == before
    done = _json(crondepot(db_url, "runs", "retry", seeded["a_f1"], "--json"))
    assert done["previous_status"] == "failed" and done["run"]["status"] == "queued"
    (claimed,) = claim_runs(conn, owner="w", shares={"normal": 10})
    assert claimed.run_id == seeded["a_f1"]


def test_status_counts_runs_ended_in_the_last_hour(db_url: str,
                                                  seeded: dict[str, str]) -> None:
    one = _json(crondepot(db_url, "status", "--json", "--tenant", "bank42", tenant=None))
    assert one["finished_last_hour"] == {"succeeded": 2, "failed": 3, "dead": 1, "skipped": 1}
    everyone = _json(crondepot(db_url, "status", "--json", tenant=None))
    assert everyone["finished_last_hour"] == {"succeeded": 2, "failed": 4, "dead": 1,
                                              "skipped": 1}
    table = crondepot(db_url, "status", "--tenant", "bank42", tenant=None)
    assert table.returncode == 0 and "finished (1 h)" in table.stdout
    assert "failed 3" in table.stdout
