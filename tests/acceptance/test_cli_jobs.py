"""``crondepot tenants|jobs|runs|import|status`` as a user runs them, on a real database.

Most commands run in-process through ``crondepot.cli.main`` (the real parser, error
handling and exit codes); a few run as real processes (``python -c`` around ``main``).
"""

from __future__ import annotations

import io
import json
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

import crondepot.cli as cli_module
from crondepot.cli import jobs
from crondepot.db import Q, connect
from crondepot.job.store import get_job
from crondepot.tenancy.tenants import hash_token

RUNNER = """
import sys
import crondepot.cli as cli
sys.exit(cli.main(sys.argv[1:]))
"""

EMI = {"key": "bank42:48213:emi", "cron": "0 9 5 * *", "tz": "Asia/Kolkata",
       "target": {"type": "http", "url": "https://example.com/emi", "timeout_s": 10},
       "payload": {"loan": 48213}}


def _job(key: str, **extra: Any) -> dict[str, Any]:
    return {"key": key, "cron": "*/5 * * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "test.noop"}, **extra}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Cli:
    def __init__(self, db_url: str, capsys: pytest.CaptureFixture[str],
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.db_url = db_url
        self.capsys = capsys
        self.monkeypatch = monkeypatch

    def __call__(self, *args: str, stdin: str | None = None) -> Result:
        command, rest = args[0], list(args[1:])
        # --db goes after the sub-command (it belongs to each action's parser)
        argv = [command, *rest[:1], "--db", self.db_url, *rest[1:]] \
            if command in ("tenants", "jobs", "runs", "calendars") \
            else [command, "--db", self.db_url, *rest]
        if stdin is not None:
            self.monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
        self.capsys.readouterr()
        code = cli_module.main(argv)
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)


@pytest.fixture
def cli(db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.delenv("CRONDEPOT_TENANT", raising=False)
    # Tables into a capture are as wide as COLUMNS says, when it is set (a terminal that ran
    # the suite may have exported 80): the tests read whole cells.
    monkeypatch.setenv("COLUMNS", "200")
    return Cli(db_url, capsys, monkeypatch)


def crondepot(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True,
                          text=True, timeout=120, input=stdin)


def _count(db_url: str, sql: str) -> int:
    with connect(db_url) as conn:
        row = conn.execute(sql).fetchone()
        assert row is not None
        return int(row[0])


def _tenant(cli: Cli, name: str) -> None:
    """A tenant as an operator makes one: created, then granted the handler the tests' jobs
    name."""
    assert cli("tenants", "create", name, "--json").code == 0
    assert cli("tenants", "grant", name, "--handler", "test.noop").code == 0


# -- tenants ------------------------------------------------------------------------------

def test_tenants_create_prints_a_token_once_that_the_api_accepts(db_url: str) -> None:
    result = crondepot("tenants", "create", "bank42", "--db", db_url)
    assert result.returncode == 0, result.stderr
    assert "will not be shown again" in result.stdout
    token = next(word for word in result.stdout.split() if word.startswith("cdp_"))
    with connect(db_url) as conn:
        principal = conn.execute(Q.api_token_principal,
                                 {"token_hash": hash_token(token)}).fetchone()
        stored = conn.execute("SELECT token_hash FROM api_tokens").fetchall()
    assert principal is not None and tuple(principal[1:3]) == ("bank42", "admin")
    assert all(token.encode() not in bytes(row[0]) for row in stored)   # only the hash

    scripted = crondepot("tenants", "create", "shop7", "--role", "read", "--json",
                         "--db", db_url)
    assert scripted.returncode == 0, scripted.stderr
    body = json.loads(scripted.stdout)
    assert set(body) >= {"tenant", "id", "token"} and body["tenant"] == "shop7"
    with connect(db_url) as conn:
        principal = conn.execute(Q.api_token_principal,
                                 {"token_hash": hash_token(body["token"])}).fetchone()
    assert principal is not None and tuple(principal[:3]) == (body["id"], "shop7", "read")

    again = crondepot("tenants", "create", "bank42", "--db", db_url)
    assert again.returncode == 2 and "already taken" in again.stderr
    assert "Traceback" not in again.stderr


def test_tenants_list(cli: Cli) -> None:
    _tenant(cli, "bank42")
    _tenant(cli, "shop7")
    listed = cli("tenants", "list", "--json")
    assert listed.code == 0
    assert [t["tenant"] for t in listed.json()] == ["bank42", "shop7"]
    assert "bank42" in cli("tenants", "list").out
    assert cli("tenants", "create", "Bad Name").code == 2


# -- jobs add -----------------------------------------------------------------------------

def test_jobs_add_from_json_file_and_stdin_idempotent_on_key(cli: Cli, tmp_path: Path) -> None:
    _tenant(cli, "bank42")
    first = cli("jobs", "add", "--tenant", "bank42", json.dumps(EMI), "--json")
    assert first.code == 0, first.err
    job = first.json()
    assert job["created"] is True and job["key"] == EMI["key"] and job["next_run_at"]

    path = tmp_path / "job.json"
    path.write_text(json.dumps(EMI))
    again = cli("jobs", "add", "--tenant", "bank42", "--file", str(path), "--json")
    assert again.code == 0, again.err
    assert again.json()["created"] is False and again.json()["id"] == job["id"]

    piped = cli("jobs", "add", "--tenant", "bank42", "-", stdin=json.dumps(_job("piped")))
    assert piped.code == 0, piped.err
    assert piped.out.startswith("created job ")
    assert _count(cli.db_url, "SELECT count(*) FROM jobs") == 2

    clash = cli("jobs", "add", "--tenant", "bank42", json.dumps({**EMI, "cron": "0 10 5 * *"}))
    assert clash.code == 2 and "bank42:48213:emi" in clash.err


@pytest.mark.parametrize(("document", "field"), [
    ({**EMI, "cron": "61 9 5 * *"}, "cron"),
    ({**EMI, "tz": "Mars/Olympus"}, "tz"),
    ({**EMI, "priority": "high"}, "priority"),
    ({**EMI, "target": {"type": "http", "url": "ftp://example.com"}}, "target.url"),
    ({**EMI, "misfire": {"policy": "skip_after_local_time", "until": "25:00"}},
     "misfire.until"),
    ({**EMI, "colour": "blue"}, "colour"),
    ({k: v for k, v in EMI.items() if k != "target"}, "target"),
    ('{"cron": "0 9 * * *",', "document"),
    ("[1, 2]", "document"),
    # text PostgreSQL cannot store, and nesting (at most 32 levels; beyond ~1,000 unparsed)
    (json.dumps({**EMI, "payload": {"to": "X"}}).replace('"X"', '"\\ud800"'), "payload.to"),
    (json.dumps({**EMI, "key": "X"}).replace('"X"', '"k\\u0000"'), "key"),
    (json.dumps({**EMI, "payload": {"x": "X"}}).replace('"X"', "[" * 40 + "]" * 40),
     "payload.x" + ".0" * 31),
    (json.dumps({**EMI, "payload": "X"}).replace('"X"', '{"a":' * 5000 + "1" + "}" * 5000),
     "payload"),
])
def test_jobs_add_bad_document_names_the_field_and_adds_nothing(
        cli: Cli, document: Any, field: str) -> None:
    _tenant(cli, "bank42")
    text = document if isinstance(document, str) else json.dumps(document)
    result = cli("jobs", "add", "--tenant", "bank42", text)
    assert result.code == 2
    named = "" if field == "document" else f"{field}: "   # the whole document: no field
    assert f"invalid job document: {named}" in result.err
    assert f"{field}: {field}:" not in result.err              # the field said once
    as_json = cli("jobs", "add", "--tenant", "bank42", text, "--json")
    assert as_json.code == 2 and field in json.loads(as_json.err)["error"]
    assert _count(cli.db_url, "SELECT count(*) FROM jobs") == 0


def test_jobs_add_lists_every_problem_of_a_document_at_once(cli: Cli) -> None:
    _tenant(cli, "bank42")
    bad = {**EMI, "cron": "0 25 * * *", "priority": "hot", "tz": "Asia/Kolkatta"}
    result = cli("jobs", "add", "--tenant", "bank42", json.dumps(bad))
    assert result.code == 2
    assert "invalid job document: 3 problems:" in result.err, result.err
    for said in ("priority: expected priority to be one of", "tz: unknown time zone",
                 "cron: hour field: 25 is out of range"):
        assert said in result.err, result.err
    assert "tz: tz:" not in result.err
    assert _count(cli.db_url, "SELECT count(*) FROM jobs") == 0


def test_an_unknown_or_missing_tenant_is_a_clear_error(cli: Cli) -> None:
    result = cli("jobs", "add", "--tenant", "nobody", json.dumps(EMI))
    assert result.code == 2 and "unknown tenant 'nobody'" in result.err
    assert cli("jobs", "list", "--tenant", "nobody").code == 2
    assert cli("runs", "show", "--tenant", "nobody", "1-2").code == 2
    with pytest.raises(SystemExit):       # argparse: --tenant is required without the env
        cli("jobs", "list")
    assert "--tenant" in cli.capsys.readouterr().err


def test_the_tenant_may_come_from_the_environment(cli: Cli) -> None:
    _tenant(cli, "bank42")
    cli.monkeypatch.setenv("CRONDEPOT_TENANT", "bank42")
    assert cli("jobs", "add", json.dumps(EMI)).code == 0
    assert len(cli("jobs", "list", "--json").json()["items"]) == 1


# -- jobs list / show / changes -------------------------------------------------------------

def test_jobs_list_filters_and_pages(cli: Cli) -> None:
    _tenant(cli, "bank42")
    for i, priority in enumerate(["urgent", "normal", "bulk", "normal", "normal"]):
        assert cli("jobs", "add", "--tenant", "bank42",
                   json.dumps(_job(f"k{i}", priority=priority))).code == 0
    page = cli("jobs", "list", "--tenant", "bank42", "--limit", "2", "--json").json()
    assert [j["key"] for j in page["items"]] == ["k0", "k1"] and page["next_cursor"]
    rest = cli("jobs", "list", "--tenant", "bank42", "--cursor", page["next_cursor"],
               "--json").json()
    assert [j["key"] for j in rest["items"]] == ["k2", "k3", "k4"]
    assert rest["next_cursor"] is None
    normal = cli("jobs", "list", "--tenant", "bank42", "--priority", "normal", "--json").json()
    assert [j["key"] for j in normal["items"]] == ["k1", "k3", "k4"]
    cli("jobs", "pause", "--tenant", "bank42", str(page["items"][1]["id"]))
    paused = cli("jobs", "list", "--tenant", "bank42", "--paused", "--json").json()
    assert [j["key"] for j in paused["items"]] == ["k1"]
    table = cli("jobs", "list", "--tenant", "bank42", "--limit", "2")
    assert table.code == 0 and "more: --cursor" in table.out


def test_jobs_show_pause_resume_trigger_cancel(cli: Cli) -> None:
    _tenant(cli, "bank42")
    job_id = str(cli("jobs", "add", "--tenant", "bank42", json.dumps(EMI), "--json")
                 .json()["id"])

    shown = cli("jobs", "show", "--tenant", "bank42", job_id, "--json")
    assert shown.code == 0, shown.err
    body = shown.json()
    assert body["state"] == "active" and len(body["next_fires"]) == 5
    assert body["next_fires"][0]["local"].endswith("T09:00:00+05:30")
    assert set(body["next_fires"][0]) >= {"at", "local", "due_at", "dst_note"}
    plain = cli("jobs", "show", "--tenant", "bank42", job_id)
    assert "next fires" in plain.out and "Asia/Kolkata" in plain.out

    refused = cli("jobs", "pause", "--tenant", "bank42", job_id, "--note", "two\nlines")
    assert refused.code == 2 and "note: control characters" in refused.err
    paused = cli("jobs", "pause", "--tenant", "bank42", job_id, "--note", "gateway down",
                 "--json").json()
    assert paused["paused"] is True and paused["state"] == "paused"
    assert paused["pause"]["note"] == "gateway down" and paused["pause"]["paused_by"]
    shown_paused = cli("jobs", "show", "--tenant", "bank42", job_id).out
    assert "paused" in shown_paused and "- gateway down" in shown_paused
    resumed = cli("jobs", "resume", "--tenant", "bank42", job_id)
    assert resumed.code == 0 and ": active; next run " in resumed.out

    triggered = cli("jobs", "trigger", "--tenant", "bank42", job_id, "--json").json()
    assert triggered["created"] is True and triggered["run_id"].startswith(f"{job_id}:")
    assert _count(cli.db_url, "SELECT count(*) FROM runs WHERE status = 'queued'") == 1

    cancelled = cli("jobs", "cancel", "--tenant", "bank42", job_id, "--json").json()
    assert cancelled["state"] == "cancelled" and cancelled["cancelled_at"]
    assert _count(cli.db_url, "SELECT count(*) FROM runs WHERE status = 'queued'") == 0
    refused = cli("jobs", "trigger", "--tenant", "bank42", job_id)
    assert refused.code == 2 and "cancelled" in refused.err
    assert cli("jobs", "show", "--tenant", "bank42", job_id, "--json").json()["next_fires"] == []


def test_show_notes_fires_that_a_clock_change_moved(db_url: str) -> None:
    with connect(db_url) as conn:
        from crondepot.job.spec import JobSpec
        from crondepot.job.store import create_job
        from crondepot.tenancy.grants import grant
        from crondepot.tenancy.tenants import create_tenant

        tenant = create_tenant(conn, "bank42").id
        grant(conn, tenant, handlers=["test.noop"])
        spec = JobSpec.from_document(_job("dst", cron="30 2 * * *", tz="America/New_York"))
        job, _ = create_job(conn, tenant, spec)
        job = get_job(conn, tenant, job.id)
    fires = jobs.next_fires(job, datetime(2026, 3, 7, 12, tzinfo=UTC), 2)
    assert fires[0]["at"] == "2026-03-08T07:00:00Z" and fires[0]["dst"] == "moved"
    assert "DST gap" in fires[0]["dst_note"]
    assert fires[1]["at"] == "2026-03-09T06:30:00Z" and fires[1]["dst_note"] is None


def test_another_tenants_job_or_run_is_not_found(cli: Cli) -> None:
    _tenant(cli, "bank42")
    _tenant(cli, "shop7")
    job_id = str(cli("jobs", "add", "--tenant", "bank42", json.dumps(EMI), "--json")
                 .json()["id"])
    run_id = cli("jobs", "trigger", "--tenant", "bank42", job_id, "--json").json()["run_id"]
    with connect(cli.db_url) as conn:
        before = conn.execute("SELECT paused, active, version FROM jobs").fetchall()
    for action in ("show", "pause", "resume", "cancel", "trigger"):
        result = cli("jobs", action, "--tenant", "shop7", job_id)
        assert result.code == 2, action
        assert f"job {job_id} not found" in result.err, action
    missing = cli("jobs", "show", "--tenant", "bank42", "999999")
    assert "job 999999 not found" in missing.err
    huge = cli("jobs", "pause", "--tenant", "bank42", str(2**70))
    assert huge.code == 2 and "not found" in huge.err
    listed = cli("runs", "list", "--tenant", "shop7", "--job", job_id)
    assert listed.code == 2 and f"job {job_id} not found" in listed.err
    shown = cli("runs", "show", "--tenant", "shop7", run_id)
    assert shown.code == 2 and f"run {run_id} not found" in shown.err
    with connect(cli.db_url) as conn:
        assert conn.execute("SELECT paused, active, version FROM jobs").fetchall() == before
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (1,)


# -- runs ---------------------------------------------------------------------------------

def test_runs_list_and_show(cli: Cli) -> None:
    _tenant(cli, "bank42")
    job_id = str(cli("jobs", "add", "--tenant", "bank42", json.dumps(EMI), "--json")
                 .json()["id"])
    run_id = cli("jobs", "trigger", "--tenant", "bank42", job_id, "--json").json()["run_id"]
    page = cli("runs", "list", "--tenant", "bank42", "--job", job_id, "--json")
    assert page.code == 0, page.err
    assert [r["run_id"] for r in page.json()["items"]] == [run_id]
    assert page.json()["next_cursor"] is None
    assert run_id in cli("runs", "list", "--tenant", "bank42", "--job", job_id).out
    run = cli("runs", "show", "--tenant", "bank42", run_id, "--json").json()
    assert run["run_id"] == run_id and run["status"] == "queued" and run["job_id"] == int(job_id)
    assert "queued" in cli("runs", "show", "--tenant", "bank42", run_id).out
    bad = cli("runs", "list", "--tenant", "bank42", "--job", job_id, "--cursor", "zzz")
    assert bad.code == 2 and "--cursor" in bad.err


# -- import -------------------------------------------------------------------------------

def _ndjson(tmp_path: Path) -> Path:
    lines = [
        json.dumps(_job("a")),                                   # 1 good
        json.dumps(_job("b", cron="61 * * * *")),                # 2 bad: cron
        "",                                                      # 3 blank: skipped
        json.dumps(_job("c", tz="Mars/Olympus")),                # 4 bad: tz
        '{"key": "d", "cron": ',                                 # 5 bad: malformed
        json.dumps(_job("e", priority="bulk")),                  # 6 good
        json.dumps(_job("a")),                                   # 7 same key: existing
        json.dumps(_job("f", target={"type": "http", "url": "ftp://x"})),   # 8 bad: target.url
        json.dumps(_job("g")),                                   # 9 good
        json.dumps(_job("h", payload={"to": "\ud800"})),        # 10 bad: payload.to
        json.dumps(_job("i")).replace('"i"', '"i\\u0000"'),      # 11 bad: key (NUL)
        json.dumps(_job("j", payload={"x": "X"})).replace('"X"', "[" * 5000 + "]" * 5000),
    ]
    path = tmp_path / "jobs.ndjson"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_stores_good_lines_and_reports_bad_ones(cli: Cli, tmp_path: Path) -> None:
    _tenant(cli, "bank42")
    path = _ndjson(tmp_path)
    result = cli("import", str(path), "--tenant", "bank42", "--batch", "2", "--json")
    assert result.code == 1, result.err
    body = result.json()
    assert {k: body[k] for k in ("lines", "created", "existing", "invalid")} == \
        {"lines": 11, "created": 3, "existing": 1, "invalid": 7}
    assert [(e["line"], e["field"]) for e in body["errors"]] == \
        [(2, "cron"), (4, "tz"), (5, "line"), (8, "target.url"), (10, "payload.to"),
         (11, "key"), (12, "payload")]
    with connect(cli.db_url) as conn:
        keys = [row[0] for row in conn.execute("SELECT key FROM jobs ORDER BY key")]
    assert keys == ["a", "e", "g"]

    plain = cli("import", str(path), "--tenant", "bank42")
    assert plain.code == 1
    assert "line 2: cron: " in plain.err and "line 8: target.url: " in plain.err
    assert "0 created, 4 existing, 7 invalid" in plain.out      # a re-run changes nothing
    assert "line 10: payload.to: " in plain.err and "surrogate" in plain.err
    assert _count(cli.db_url, "SELECT count(*) FROM jobs") == 3


def test_import_as_a_process_from_stdin_exits_0_when_every_line_is_good(db_url: str) -> None:
    assert crondepot("tenants", "create", "bank42", "--db", db_url).returncode == 0
    assert crondepot("tenants", "grant", "bank42", "--handler", "test.noop", "--db",
                     db_url).returncode == 0
    text = "".join(json.dumps(_job(f"k{i}")) + "\n" for i in range(25))
    result = crondepot("import", "-", "--tenant", "bank42", "--db", db_url, "--batch", "10",
                       stdin=text)
    assert result.returncode == 0, result.stderr
    assert "25 created, 0 existing, 0 invalid" in result.stdout
    assert "\x1b[" not in result.stdout          # no progress bar when not a terminal
    assert _count(db_url, "SELECT count(*) FROM jobs") == 25
    missing = crondepot("import", "/nonexistent.ndjson", "--tenant", "bank42", "--db", db_url)
    assert missing.returncode == 2 and "cannot read" in missing.stderr


# -- status -------------------------------------------------------------------------------

def _shape(body: dict[str, Any]) -> None:
    # every tenant's view also says what the latest ledger check found (None: no check yet)
    assert set(body) - {"ledger"} == {"tenant", "queue", "lag", "dead_letter",
                                      "finished_last_hour", "holds"}
    assert list(body["finished_last_hour"]) == ["succeeded", "failed", "dead", "skipped"]
    assert ("ledger" in body) == (body["tenant"] is None)
    assert list(body["queue"]) == ["urgent", "normal", "bulk"]
    for row in body["queue"].values():
        assert set(row) == {"ready", "waiting", "oldest_ready_seconds"}
    assert set(body["lag"]) == {"samples", "p50_seconds", "p99_seconds"}


def test_status_json_for_all_tenants_and_for_one(cli: Cli, conn: psycopg.Connection[Any]) -> None:
    _tenant(cli, "bank42")
    _tenant(cli, "shop7")
    for tenant in ("bank42", "shop7"):
        job_id = str(cli("jobs", "add", "--tenant", tenant, json.dumps(_job("k")), "--json")
                     .json()["id"])
        assert cli("jobs", "trigger", "--tenant", tenant, job_id).code == 0
    conn.execute("UPDATE runs SET status = 'dead', finished_at = now() "
                 "WHERE tenant_id = (SELECT id FROM tenants WHERE name = 'shop7')")

    everyone = cli("status", "--json")
    assert everyone.code == 0, everyone.err
    body = everyone.json()
    _shape(body)
    assert body["tenant"] is None
    assert body["queue"]["normal"]["ready"] == 1 and body["dead_letter"] == 1
    assert body["queue"]["normal"]["oldest_ready_seconds"] >= 0
    assert body["ledger"] is None
    conn.execute("INSERT INTO ledger_checks (since, until, fires, unaccounted, duplicated, "
                 "pending, seconds) VALUES (now(), now(), 7, 1, 0, 2, 0.1)")
    assert cli("status", "--json").json()["ledger"]["unaccounted"] == 1
    assert "1 unaccounted" in cli("status").out

    one = cli("status", "--tenant", "shop7", "--json").json()
    _shape(one)
    assert one["tenant"] == "shop7"
    assert one["queue"]["normal"]["ready"] == 0 and one["dead_letter"] == 1
    assert one["finished_last_hour"] == {"succeeded": 0, "failed": 0, "dead": 1, "skipped": 0}
    assert body["finished_last_hour"]["dead"] == 1

    table = cli("status", "--tenant", "bank42")
    assert table.code == 0 and "dead letter" in table.out and "normal" in table.out
    assert cli("status", "--tenant", "nobody").code == 2


def test_status_watch_json_prints_a_line_per_refresh_and_stops_on_ctrl_c(db_url: str) -> None:
    process = subprocess.Popen([sys.executable, "-c", RUNNER, "status", "--db", db_url,
                                "--watch", "--json", "--interval", "0.2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(3)]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    for line in lines:
        _shape(json.loads(line))
