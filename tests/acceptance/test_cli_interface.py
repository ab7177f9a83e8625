"""One consistent command line: a job by id or key everywhere, ``jobs
update``, the API's field names and paging in ``--json``, ``CRONDEPOT_TENANT`` for every
tenant-scoped command, ``--version``, help for every option, plain output off a terminal,
and argument errors that exit 2 with a message, never a traceback (real processes)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crondepot.cli import build_parser
from crondepot.db import connect
from tests.acceptance.test_cli_jobs import EMI, Cli, _job, _tenant
from tests.acceptance.test_cli_jobs import cli as cli  # the fixture
from tests.integration.test_deadletter import seed_dead_letter


def crondepot(*args: str, env: dict[str, str] | None = None,
              stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=120, input=stdin,
                          env={**os.environ, **(env or {})})


# -- the parser -----------------------------------------------------------------------------

def _options(parser: argparse.ArgumentParser, path: str) -> list[tuple[str, argparse.Action]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _options(sub, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            found.append((path, action))
    return found


def test_every_option_and_argument_of_every_command_has_help() -> None:
    options = _options(build_parser(), "crondepot")
    assert len(options) > 150
    missing = [f"{path} {'/'.join(a.option_strings) or a.dest}" for path, a in options
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []


def test_version_names_the_release_and_the_schema_revision() -> None:
    from importlib import metadata

    import crondepot as package

    migrations = Path(package.__file__).parent / "db" / "sql" / "migrations"
    highest = max(int(path.name[:4]) for path in migrations.glob("[0-9][0-9][0-9][0-9]_*.sql"))
    done = crondepot("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"crondepot {package.__version__} (schema revision {highest})"
    # the installed metadata says the same (pyproject.toml reads base/version.py)
    assert metadata.version("crondepot") == package.__version__


# -- argument errors: exit 2, a message, no traceback ----------------------------------------

BAD = [
    (["worker", "--concurrency", "2", "--urgent-only", "4"], "--urgent-only"),
    (["worker", "--concurrency", "0"], "--concurrency"),
    (["worker", "--concurrency", "many"], "--concurrency"),
    (["worker", "--grace", "-1"], "--grace"),
    (["worker", "--retention-days", "nan"], "--retention-days"),
    (["worker", "--metrics-port", "70000"], "--metrics-port"),
    (["scheduler", "--metrics-port", "x"], "--metrics-port"),
    (["up", "--schedulers", "0"], "--schedulers"),
    (["up", "--port", "http"], "--port"),
    (["up", "--tick", "soon"], "--tick"),
    (["up", "--metrics-port", "-5"], "--metrics-port"),
    (["jobs", "show", "--tenant", "t", "key:"], "key"),
    (["jobs", "show", "--tenant", "t", "1", "-n", "x"], "--fires"),
    (["jobs", "update", "--tenant", "t", "1", "--payload", "[1]"], "--payload"),
    (["jobs", "update", "--tenant", "t", "1", "--max-attempts", "0"], "--max-attempts"),
    (["jobs", "update", "--tenant", "t", "1", "--retry-base", "0"], "--retry-base"),
    (["jobs", "add", "--tenant", "t", "{}", "--retry-cap", "x"], "--retry-cap"),
    (["jobs", "update", "--tenant", "t", "1", "--if-version", "v3"], "--if-version"),
    (["jobs", "update", "--tenant", "t", "1", "--overlap", "forbid"], "--overlap"),
    (["limits", "set", "x", "450/s", "--burst", "0"], "--burst"),
    (["limits", "set", "x", "450/fortnight"], "rate"),
    (["dlq", "list", "--limit", "0"], "--limit"),
    (["dlq", "list", "--cursor", "nope"], "--cursor"),
    (["runs", "list", "--tenant", "t", "--since", "yesterday"], "--since"),
    (["status", "--interval", "0"], "--interval"),
    (["jobs", "list", "--tenant", "t", "--db", "nonsense"], "--db"),
    (["migrate", "--db", "postgresql://h/db?nosuch=1"], "--db"),
    (["worker", "--import", "no_such_module_xyz"], "no_such_module_xyz"),
    (["runs", "show", "--tenant", "t", "\udcff"], "UTF-8"),
]


@pytest.mark.parametrize(("args", "needle"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_arguments_exit_2_with_a_message_never_a_traceback(
        db_url: str, args: list[str], needle: str) -> None:
    done = crondepot(*args, env={"CRONDEPOT_DATABASE_URL": db_url})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "error" in done.stderr


@pytest.mark.parametrize("variable", ["CRONDEPOT_CONCURRENCY", "CRONDEPOT_METRICS_PORT",
                                      "CRONDEPOT_RETENTION_DAYS", "CRONDEPOT_URGENT_ONLY"])
def test_a_bad_environment_value_is_a_usage_error_too(db_url: str, variable: str) -> None:
    done = crondepot("worker", env={"CRONDEPOT_DATABASE_URL": db_url, variable: "lots"})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr


def test_a_database_without_the_schema_is_a_message_not_a_traceback(
        empty_db_url: str) -> None:
    done = crondepot("limits", "list", "--db", empty_db_url)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr
    assert "crondepot migrate" in done.stderr


def test_worker_concurrency_below_the_default_urgent_slots_starts(db_url: str) -> None:
    """``worker --concurrency 2`` (a traceback before): the urgent-only slots default to
    fewer than the slots."""
    process = subprocess.Popen([sys.executable, "-m", "crondepot", "worker", "--db", db_url,
                                "--concurrency", "2"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(3)
        assert process.poll() is None
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0 and "Traceback" not in out, out


# -- a job by id or key -------------------------------------------------------------------

def test_every_job_command_takes_an_id_or_a_key(cli: Cli) -> None:
    _tenant(cli, "bank42")
    t = ("--tenant", "bank42")
    job_id = cli("jobs", "add", *t, json.dumps(EMI), "--json").json()["id"]
    key = EMI["key"]
    shown = cli("jobs", "show", *t, key, "--json")
    assert shown.code == 0, shown.err
    assert shown.json()["id"] == job_id
    assert cli("jobs", "pause", *t, key, "--json").json()["state"] == "paused"
    assert cli("jobs", "resume", *t, f"key:{key}", "--json").json()["state"] == "active"
    triggered = cli("jobs", "trigger", *t, key, "--json").json()
    assert triggered["job_id"] == job_id and triggered["created"] is True
    runs = cli("runs", "list", *t, "--job", key, "--json")
    assert runs.code == 0, runs.err
    assert [r["run_id"] for r in runs.json()["items"]] == [triggered["run_id"]]
    queued = cli("runs", "list", *t, "--job", key, "--status", "queued", "--json").json()
    assert [r["run_id"] for r in queued["items"]] == [triggered["run_id"]]
    now = datetime.now(UTC).replace(microsecond=0)
    backfilled = cli("backfill", *t, key, "--from", (now - timedelta(days=3)).isoformat(),
                     "--to", (now - timedelta(days=1)).isoformat(), "--dry-run", "--json")
    assert backfilled.code == 0, backfilled.err
    assert backfilled.json()["job_id"] == job_id
    assert cli("jobs", "cancel", *t, key, "--json").json()["state"] == "cancelled"
    assert cli("jobs", "show", *t, key, "--json").json()["state"] == "cancelled"


def test_digits_are_an_id_and_key_prefix_names_a_key_made_of_digits(cli: Cli) -> None:
    _tenant(cli, "bank42")
    t = ("--tenant", "bank42")
    first = cli("jobs", "add", *t, json.dumps(_job("first")), "--json").json()["id"]
    digits = cli("jobs", "add", *t, json.dumps(_job(str(first))), "--json").json()["id"]
    assert digits != first
    assert cli("jobs", "show", *t, str(first), "--json").json()["key"] == "first"
    assert cli("jobs", "show", *t, f"key:{first}", "--json").json()["id"] == digits


def test_an_unknown_or_another_tenants_key_is_not_found(cli: Cli) -> None:
    _tenant(cli, "bank42")
    _tenant(cli, "acme")
    assert cli("jobs", "add", "--tenant", "acme", json.dumps(EMI)).code == 0
    for args in (["jobs", "show"], ["jobs", "pause"], ["jobs", "update", "--cron",
                                                      "0 9 * * *"]):
        missing = cli(*args[:2], "--tenant", "bank42", EMI["key"], *args[2:])
        assert missing.code == 2 and f"job with key {EMI['key']!r} not found" in missing.err
    assert cli("runs", "list", "--tenant", "bank42", "--job", "nope").code == 2
    assert cli("jobs", "show", "--tenant", "bank42", "99999999999999999999").code == 2


# -- jobs update --------------------------------------------------------------------------

def test_jobs_update_patches_the_fields_given_and_keeps_the_others(
        cli: Cli, tmp_path: Path) -> None:
    _tenant(cli, "bank42")
    t = ("--tenant", "bank42")
    job = cli("jobs", "add", *t, json.dumps(_job("emi", payload={"loan": 1},
                                                 max_attempts=3)), "--json").json()
    done = cli("jobs", "update", *t, "emi", "--cron", "0 10 5 * *", "--priority", "urgent",
               "--json")
    assert done.code == 0, done.err
    after = done.json()
    assert (after["cron"], after["priority"], after["payload"],
            after["retry"]["max_attempts"]) == ("0 10 5 * *", "urgent", {"loan": 1}, 3)
    assert after["version"] == job["version"] + 1
    patch = tmp_path / "patch.json"
    patch.write_text(json.dumps({"payload": {"loan": 2}, "max_attempts": None,
                                 "tz": "Asia/Kolkata"}))
    # a flag wins over the same field in the file
    done = cli("jobs", "update", *t, str(job["id"]), "--file", str(patch), "--tz", "UTC",
               "--json")
    assert done.code == 0, done.err
    after = done.json()
    assert (after["payload"], after["retry"]["max_attempts"], after["tz"]) == (
        {"loan": 2}, 6, "UTC")
    from_stdin = cli("jobs", "update", *t, "emi", "--file", "-", "--json",
                     stdin='{"catchup": "latest"}')
    assert from_stdin.json()["catchup"] == "latest"
    plain = cli("jobs", "update", *t, "emi", "--max-attempts", "4")
    assert plain.code == 0 and "updated max_attempts; now version" in plain.out


def test_jobs_add_and_update_set_the_retry_curve_by_flags(cli: Cli) -> None:
    _tenant(cli, "bank42")
    t = ("--tenant", "bank42")
    added = cli("jobs", "add", *t, json.dumps(_job("emi", max_attempts=3)), "--retry-base",
                "60", "--retry-cap", "1800", "--json")
    assert added.code == 0, added.err
    assert added.json()["retry"] == {"max_attempts": 3, "base_s": 60, "cap_s": 1800}
    # a flag changes its member; the others stay as stored
    done = cli("jobs", "update", *t, "emi", "--retry-cap", "900", "--json")
    assert done.code == 0, done.err
    assert done.json()["retry"] == {"max_attempts": 3, "base_s": 60, "cap_s": 900}
    shown = cli("jobs", "show", *t, "emi")
    assert "3 attempts; waits up to 60, 120 s (random from 0, cap 900 s)" in shown.out
    refused = cli("jobs", "update", *t, "emi", "--retry-cap", "30")
    assert refused.code != 0 and "retry.cap_s" in refused.err
    assert "≥ retry.base_s (60), got 30" in refused.err
    assert cli("jobs", "show", *t, "emi", "--json").json()["retry"]["cap_s"] == 900


def test_jobs_update_sets_the_overlap_policy_and_show_says_it(cli: Cli) -> None:
    _tenant(cli, "bank42")
    t = ("--tenant", "bank42")
    assert cli("jobs", "add", *t, json.dumps(_job("recon"))).code == 0
    assert "allow: a fire runs even while" in cli("jobs", "show", *t, "recon").out
    done = cli("jobs", "update", *t, "recon", "--overlap", "skip", "--json")
    assert done.code == 0, done.err
    assert done.json()["overlap"] == "skip"
    shown = cli("jobs", "show", *t, "recon")
    assert "skip: a fire that comes while a run of this job is running is skipped" in shown.out


def test_jobs_update_honours_the_version_and_refuses_bad_changes_changing_nothing(
        cli: Cli, tmp_path: Path) -> None:
    _tenant(cli, "bank42")
    t = ("--tenant", "bank42")
    job = cli("jobs", "add", *t, json.dumps(_job("emi")), "--json").json()
    stale = cli("jobs", "update", *t, "emi", "--cron", "0 9 * * *", "--if-version",
                str(job["version"] + 5))
    assert stale.code == 2 and f"at version {job['version']}" in stale.err
    ok = cli("jobs", "update", *t, "emi", "--cron", "0 9 * * *", "--if-version",
             str(job["version"]), "--json")
    assert ok.code == 0 and ok.json()["version"] == job["version"] + 1
    before = cli("jobs", "show", *t, "emi", "--json").json()
    for args, needle in ((["--cron", "61 * * * *"], "cron"),
                         (["--tz", "Mars/Olympus"], "tz"),
                         (["--rate-limit", "no-such-limit"], "rate_limit"),
                         ([], "nothing to change")):
        refused = cli("jobs", "update", *t, "emi", *args)
        assert refused.code == 2 and needle in refused.err, refused.err
    bad_file = tmp_path / "bad.json"
    for text, needle in (('{"key": "other"}', "key"), ('{"active": false}', "active"),
                         ("[1, 2]", "JSON object"), ("{", "file")):
        bad_file.write_text(text)
        refused = cli("jobs", "update", *t, "emi", "--file", str(bad_file))
        assert refused.code == 2 and needle in refused.err, refused.err
    assert cli("jobs", "show", *t, "emi", "--json").json() | {"next_fires": None} == \
        before | {"next_fires": None}


# -- the dead letter: the tenant from the environment, API names, cursor paging ------------

def test_dlq_honours_crondepot_tenant_and_pages_with_the_apis_names(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    ids, _ = seed_dead_letter(conn)
    help_text = crondepot("dlq", "list", "--help").stdout
    assert "--tenant NAME" in help_text and "CRONDEPOT_TENANT" in help_text
    env = {"CRONDEPOT_DATABASE_URL": db_url, "CRONDEPOT_TENANT": "acme"}
    acme = json.loads(crondepot("dlq", "list", "--json", env=env).stdout)
    assert [r["run_id"] for r in acme["items"]] == [ids["d1"]]
    item = acme["items"][0]
    assert {"nominal_at", "finished_at", "last_error", "error_class", "tenant"} <= set(item)
    assert not {"scheduled_at", "died_at", "error"} & set(item)

    env["CRONDEPOT_TENANT"] = "bank42"
    whole = json.loads(crondepot("dlq", "list", "--json", env=env).stdout)
    assert whole["next_cursor"] is None and len(whole["items"]) == 6
    seen: list[str] = []
    cursor: list[str] = []
    while True:
        page = json.loads(crondepot("dlq", "list", "--limit", "4", *cursor, "--json",
                                    env=env).stdout)
        seen += [r["run_id"] for r in page["items"]]
        if page["next_cursor"] is None:
            break
        cursor = ["--cursor", page["next_cursor"]]
    assert seen == [r["run_id"] for r in whole["items"]]
    table = crondepot("dlq", "list", "--limit", "4", env=env)
    assert "more: --cursor" in table.stdout
    by_key = json.loads(crondepot("dlq", "list", "--job", "job-B", "--json", env=env).stdout)
    assert {r["run_id"] for r in by_key["items"]} == {ids["b1"], ids["b2"]}
    no_tenant = crondepot("dlq", "list", "--job", "job-B", env={
        "CRONDEPOT_DATABASE_URL": db_url, "CRONDEPOT_TENANT": ""})
    assert no_tenant.returncode == 2 and "needs --tenant" in no_tenant.stderr
    dry = json.loads(crondepot("dlq", "replay", "--job", "job-B", "--dry-run", "--json",
                               env=env).stdout)
    assert dry["count"] == 2 and {r["run_id"] for r in dry["items"]} == {ids["b1"], ids["b2"]}
    unknown = crondepot("dlq", "list", env={**env, "CRONDEPOT_TENANT": "nobody"})
    assert unknown.returncode == 2 and "unknown tenant" in unknown.stderr


# -- limits set keeps the burst -----------------------------------------------------------

def test_limits_set_keeps_the_burst_unless_given(db_url: str) -> None:
    env = {"CRONDEPOT_DATABASE_URL": db_url}
    first = json.loads(crondepot("limits", "set", "sms", "100/s", "--burst", "7", "--json",
                                 env=env).stdout)
    assert first["burst"] == 7 and first["burst_kept"] is False
    changed = crondepot("limits", "set", "sms", "450/sec", env=env)
    assert changed.returncode == 0 and "burst 7 (kept" in changed.stdout
    listed = json.loads(crondepot("limits", "list", "--json", env=env).stdout)
    assert [(r["name"], r["rate_per_second"], r["burst"]) for r in listed] == [
        ("sms", 450, 7)]
    new = json.loads(crondepot("limits", "set", "mail", "20/s", "--json", env=env).stdout)
    assert new["burst"] == 20 and new["burst_kept"] is False


# -- plain output off a terminal ----------------------------------------------------------

def test_output_into_a_pipe_has_no_control_codes_even_with_force_color(db_url: str) -> None:
    env = {"CRONDEPOT_DATABASE_URL": db_url, "FORCE_COLOR": "1", "CRONDEPOT_TENANT": "bank42"}
    assert crondepot("tenants", "create", "bank42", env=env).returncode == 0
    assert crondepot("tenants", "grant", "bank42", "--handler", "test.noop",
                     env=env).returncode == 0
    assert crondepot("jobs", "add", json.dumps(_job("k")), env=env).returncode == 0
    for args in (["jobs", "list"], ["status"], ["tenants", "list"], ["dlq", "list"]):
        done = crondepot(*args, env=env)
        assert done.returncode == 0, done.stderr
        assert "\x1b" not in done.stdout, args


def test_status_watch_into_a_file_writes_each_refresh(db_url: str, tmp_path: Path) -> None:
    out = tmp_path / "status.txt"
    with out.open("w") as sink:
        process = subprocess.Popen([sys.executable, "-m", "crondepot", "status", "--db",
                                    db_url, "--watch", "--interval", "0.3"], stdout=sink,
                                   stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while out.read_text().count("crondepot status") < 2:
                assert process.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=20) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    text = out.read_text()
    assert "dead letter" in text and "\x1b" not in text


def test_tenant_actions_take_the_tenant_from_the_environment(db_url: str) -> None:
    env = {"CRONDEPOT_DATABASE_URL": db_url}
    assert crondepot("tenants", "create", "bank42", env=env).returncode == 0
    env["CRONDEPOT_TENANT"] = "bank42"
    for args in (["tenants", "grant", "--handler", "test.noop"], ["tenants", "show"],
                 ["tenants", "set-weight", "3"], ["tenants", "set-quota", "--max-jobs", "9"],
                 ["tenants", "token", "create", "--role", "read"],
                 ["tenants", "token", "list"]):
        done = crondepot(*args, "--json", env=env)
        assert done.returncode == 0, (args, done.stderr)
    shown = json.loads(crondepot("tenants", "show", "--json", env=env).stdout)
    assert "test.noop" in json.dumps(shown) and "9" in json.dumps(shown), shown
    # an explicit name still wins
    other = crondepot("tenants", "show", "nobody", env=env)
    assert other.returncode == 2 and "nobody" in other.stderr


def test_status_reads_the_tenant_from_the_environment(db_url: str) -> None:
    with connect(db_url) as conn:
        from crondepot.tenancy.tenants import create_tenant
        create_tenant(conn, "bank42")
    done = crondepot("status", "--json", env={"CRONDEPOT_DATABASE_URL": db_url,
                                              "CRONDEPOT_TENANT": "bank42"})
    assert done.returncode == 0 and json.loads(done.stdout)["tenant"] == "bank42"


# -- up -------------------------------------------------------------------------------------

def test_up_prints_its_addresses_serves_metrics_and_stops_the_postgresql_it_started() -> None:
    """With no URL, ``up`` starts the embedded PostgreSQL in --data-dir; Ctrl-C stops the
    children and then that server (it kept running after "all stopped" before)."""
    from urllib.request import urlopen

    from crondepot_testkit.processes import Proc, free_port, wait_until

    folder = Path(tempfile.mkdtemp(prefix="crondepot-up-"))
    folder.chmod(0o755)          # pgserver runs postgres as its own user when root
    data_dir = folder / "pg"
    port, metrics = free_port(), free_port(span=2)   # scheduler-1, worker-1
    env = {"CRONDEPOT_DATABASE_URL": "", "CRONDEPOT_DATA_DIR": ""}
    up = Proc("up", "--data-dir", str(data_dir), "--schedulers", "1", "--workers", "1",
              "--port", str(port), "--metrics-port", str(metrics), env=env)
    try:
        # The welcome, or up's end: a child that could not start (a port taken by another
        # test meanwhile) ends up, and its output says why.
        wait_until(lambda: "metrics:" in up.output() or up.popen.poll() is not None,
                   timeout=180, message="the welcome")
        text = up.output()
        assert "metrics:" in text, f"up ended (exit {up.popen.poll()}):\n{text[-3000:]}"
        assert f"console: http://127.0.0.1:{port}/console/" in text
        assert f"API http://127.0.0.1:{port}/v1" in text
        assert f"scheduler-1 http://127.0.0.1:{metrics}/metrics" in text
        assert f"worker-1 http://127.0.0.1:{metrics + 1}/metrics" in text

        def scraped() -> bool:
            try:
                with urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=2) as response:
                    return b"crondepot_" in response.read()
            except OSError:
                return False

        wait_until(scraped, timeout=60, message="scheduler-1 metrics")
        assert (data_dir / "postmaster.pid").exists()
    finally:
        up.kill(signal.SIGINT)
        code = up.popen.wait(timeout=90)
    assert code == 0, up.output()
    assert "all stopped" in up.output() and "embedded PostgreSQL" in up.output()
    assert not (data_dir / "postmaster.pid").exists(), up.output()
    shutil.rmtree(folder, ignore_errors=True)


# -- the command reference ------------------------------------------------------------------

def test_docs_cli_md_is_the_parser_s_reference() -> None:
    """docs/cli.md lists every command and option; regenerate it with
    ``python -m crondepot.cli.shared.reference > docs/cli.md`` after changing the parser."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONDEPOT_")}
    done = subprocess.run([sys.executable, "-m", "crondepot.cli.shared.reference"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    written = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert written == done.stdout, "docs/cli.md is stale: regenerate it"
    for path, action in _options(build_parser(), "crondepot"):
        assert f"`{path}`" in written
        for option in action.option_strings:
            assert option in written
