"""The worker-side commands: limits, the dead letter, and the worker's options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import psycopg
import pytest

from crondepot.cli import build_parser, main
from crondepot.queue import claim_runs, record_final_failure
from tests.integration.test_deadletter import seed_dead_letter
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
                                          "burst": 50, "owner": None}]


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
    assert {r["run_id"] for r in listed["items"]} == set(dead)
    assert listed["next_cursor"] is None
    refused = crondepot("dlq", "replay", "--db", db_url)
    assert refused.returncode == 2 and "needs a filter" in refused.stderr
    dry = json.loads(crondepot("dlq", "replay", "--error", "OutcomeUnknown", "--dry-run",
                               "--db", db_url, "--json").stdout)
    assert dry["dry_run"] is True and set(dry["run_ids"]) == set(dead)
    done = json.loads(crondepot("dlq", "replay", dead[0], "--db", db_url, "--json").stdout)
    assert done["run_ids"] == [dead[0]]
    left = json.loads(crondepot("dlq", "list", "--db", db_url, "--json").stdout)
    assert [r["run_id"] for r in left["items"]] == [dead[1]]


# --- crondepot worker --weights -----------------------------------------------------------

@pytest.mark.parametrize(("text", "weights"), [
    ("6:3:1", (6, 3, 1)), ("1:0:0", (1, 0, 0)), ("0:0:1", (0, 0, 1)), ("10:5:1", (10, 5, 1)),
])
def test_worker_weights_are_parsed_as_urgent_normal_bulk(text: str,
                                                         weights: tuple[int, int, int]) -> None:
    args = build_parser().parse_args(["worker", f"--weights={text}"])
    assert args.weights == weights


def test_worker_weights_default_to_6_3_1_or_crondepot_weights(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRONDEPOT_WEIGHTS", raising=False)
    assert build_parser().parse_args(["worker"]).weights == (6, 3, 1)
    monkeypatch.setenv("CRONDEPOT_WEIGHTS", "2:1:1")
    assert build_parser().parse_args(["worker"]).weights == (2, 1, 1)
    assert build_parser().parse_args(["worker", "--weights", "1:0:0"]).weights == (1, 0, 0)


@pytest.mark.parametrize("text", ["6:3", "6:3:1:1", "0:0:0", "-1:3:1", "a:b:c", "6.5:3:1", ""])
def test_bad_worker_weights_are_a_usage_error(text: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["worker", f"--weights={text}"])
    assert exited.value.code == 2
    assert "argument --weights: expected three non-negative integers" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "text"), [
    ("--heartbeat", "0"), ("--heartbeat", "-1"), ("--heartbeat", "soon"), ("--heartbeat", "inf"),
    ("--max-lease", "0"), ("--max-lease", "1.5"), ("--max-lease", "12h"),
])
def test_bad_worker_durations_are_a_usage_error(option: str, text: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["worker", f"{option}={text}"])
    assert exited.value.code == 2
    assert f"argument {option}: expected " in capsys.readouterr().err


def test_worker_hands_the_parsed_weights_to_the_worker(
        db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the command line to ``WorkerConfig``, without starting a long-running worker."""
    from crondepot.runtime import logs
    from crondepot.worker import loop

    started: list[Any] = []

    class FakeWorker:
        abandoned = 0
        restart_wanted = False

        def __init__(self, config: Any) -> None:
            started.append(config)

        def install_signal_handlers(self) -> None:
            pass

        def run(self) -> None:
            pass

    monkeypatch.setattr(loop, "Worker", FakeWorker)
    monkeypatch.setattr(logs, "setup", lambda **_: None)      # leave pytest's logging alone
    assert main(["worker", "--weights", "1:0:0", "--urgent-only", "0", "--db", db_url]) == 0
    (config,) = started
    assert config.weights == (1, 0, 0) and config.urgent_only == 0


def test_worker_refuses_bad_weights_with_exit_2_and_changes_nothing(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    queued_runs(conn, 3)
    before = conn.execute("SELECT run_id, status, attempt, updated_at FROM runs "
                          "ORDER BY run_id").fetchall()
    result = crondepot("worker", "--weights", "6:3", "--db", db_url)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "argument --weights: expected three non-negative integers, not all zero, like " \
           "6:3:1, got '6:3'" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    bad_env = subprocess.run(
        [sys.executable, "-m", "crondepot", "worker", "--db", db_url], capture_output=True,
        text=True, timeout=120, env={**os.environ, "CRONDEPOT_WEIGHTS": "0:0:0"})
    assert bad_env.returncode == 2 and "got '0:0:0'" in bad_env.stderr, bad_env.stderr
    after = conn.execute("SELECT run_id, status, attempt, updated_at FROM runs "
                         "ORDER BY run_id").fetchall()
    assert after == before and {status for _, status, _, _ in after} == {"queued"}


def test_dlq_time_and_job_filters_from_the_command_line(conn: psycopg.Connection[Any],
                                                        db_url: str) -> None:
    """The filter options as typed: --since (inclusive) and --until (exclusive) instants
    with Z or an offset, --job, --error; replay by job and by time range, dry run first."""
    ids, jobs = seed_dead_letter(conn)
    label = {run_id: name for name, run_id in ids.items()}

    def dlq(*args: str) -> Any:
        result = crondepot("dlq", *args, "--db", db_url, "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    def listed(*args: str) -> list[str]:
        return [label[r["run_id"]] for r in dlq("list", *args)["items"]]

    assert listed("--since", "2026-01-02T00:00:00Z", "--until", "2026-01-03T12:00:00Z") == [
        "a3", "a2", "b1", "d1"]                                   # newest first
    assert listed("--until", "2026-01-03T05:30:00+05:30") == ["a2", "b1", "d1", "a1"]
    assert listed("--job", str(jobs["B"])) == ["b2", "b1"]
    assert listed("--error", "OutcomeUnknown", "--since", "2026-01-01T00:00:01Z") == ["b1"]
    naive = crondepot("dlq", "list", "--until", "2026-01-03T00:00:00", "--db", db_url)
    assert naive.returncode == 2 and "no UTC offset" in naive.stderr, naive.stderr

    before = conn.execute("SELECT run_id, status, attempt, updated_at FROM runs "
                          "ORDER BY run_id").fetchall()
    dry = dlq("replay", "--job", str(jobs["A"]), "--dry-run")
    assert dry["dry_run"] is True and {label[r] for r in dry["run_ids"]} == {"a1", "a2", "a3"}
    assert conn.execute("SELECT run_id, status, attempt, updated_at FROM runs "
                        "ORDER BY run_id").fetchall() == before
    done = dlq("replay", "--job", str(jobs["A"]))
    assert done["dry_run"] is False and {label[r] for r in done["run_ids"]} == {
        "a1", "a2", "a3"}
    window = dlq("replay", "--since", "2026-01-02T00:00:00Z", "--until", "2026-01-04T00:00:00Z")
    assert {label[r] for r in window["run_ids"]} == {"b1", "c1", "d1"}
    assert listed() == ["b2"]
    statuses = dict(conn.execute("SELECT run_id, status FROM runs").fetchall())
    assert {name: statuses[run_id] for name, run_id in ids.items()} == {
        "a1": "queued", "a2": "queued", "a3": "queued", "b1": "queued", "b2": "dead",
        "c1": "queued", "d1": "queued", "failed": "failed"}


# --- the environment's settings, checked at start ----------------------------------------

@pytest.mark.parametrize(("env", "needle"), [
    ({"CRONDEPOT_TARGET_ALLOWLIST": "10.0.0.1/8"}, "did you mean 10.0.0.0/8"),
    ({"SSL_CERT_FILE": "/nonexistent/ca.pem"}, "SSL_CERT_FILE: '/nonexistent/ca.pem' is not"),
    ({"SSL_CERT_FILE": "", "SSL_CERT_DIR": "/nonexistent"}, "SSL_CERT_DIR: '/nonexistent' is"),
])
def test_a_bad_target_setting_stops_the_worker_at_start_with_a_clear_error(
        conn: psycopg.Connection[Any], db_url: str, env: dict[str, str], needle: str) -> None:
    # The HTTP client is made for the first HTTP run, so the settings it will read are
    # checked before the worker claims anything.
    queued_runs(conn, 3)
    done = subprocess.run([sys.executable, "-m", "crondepot", "worker", "--db", db_url],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **env})
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert conn.execute("SELECT count(*) FROM runs WHERE status = 'queued'").fetchone() == (3,)
