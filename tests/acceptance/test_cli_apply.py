"""``crondepot apply`` / ``export`` as real processes, and ``@crondepot.periodic`` synced by
``crondepot apply --from-module`` and by two workers started together."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crondepot.tenancy.grants import grant
from crondepot_testkit.processes import Proc, wait_until
from tests.support.jobs import tenant

REMINDERS = """\
# bank42's reminders: one YAML list
- key: emi:48213
  cron: "0 9 5 * *"
  tz: Asia/Kolkata
  target: {type: python, handler: sms.send}
  payload: {loan: 48213, template: emi}
  misfire: {policy: skip_after_local_time, until: "20:00"}
- key: bill:7731
  cron: "30 2 * * *"
  tz: America/New_York
  target: {type: python, handler: sms.send}
  start_at: 2026-01-01T00:00:00Z
"""

RENEWALS = """\
key: renewal:9
cron: "0 10 1 * *"
tz: Europe/London
target: {type: python, handler: sms.send}
---
key: renewal:10
cron: "0 10 15 * *"
tz: Europe/London
target: {type: python, handler: sms.send}
labels: {kind: renewal}
"""


def crondepot(*args: str, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env={**os.environ, **(env or {})})


@pytest.fixture
def schedules(tmp_path: Path, conn: psycopg.Connection[Any]) -> Path:
    tenant(conn, "bank42")
    folder = tmp_path / "schedules"
    folder.mkdir()
    (folder / "reminders.yaml").write_text(REMINDERS)
    (folder / "renewals.yml").write_text(RENEWALS)
    return folder


def keys(conn: psycopg.Connection[Any], *, active: bool = True) -> list[str]:
    return [r[0] for r in conn.execute("SELECT key FROM jobs WHERE active = %s ORDER BY key",
                                       (active,))]


def test_apply_a_directory_dry_run_then_for_real_then_no_op(
        db_url: str, conn: psycopg.Connection[Any], schedules: Path) -> None:
    base = ("apply", str(schedules), "--tenant", "bank42", "--scope", "deploy=reminders",
            "--db", db_url)
    dry = crondepot(*base, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["counts"]["created"] == 4 and plan["dry_run"] is True
    assert [c["key"] for c in plan["changes"]] == sorted(c["key"] for c in plan["changes"])
    assert keys(conn) == []
    again = crondepot(*base, "--dry-run", "--json")
    assert again.stdout == dry.stdout                # stable for review
    done = crondepot(*base)
    assert done.returncode == 0, done.stderr
    assert "+ create emi:48213" in done.stdout and "4 changes: 4 created" in done.stdout
    assert keys(conn) == ["bill:7731", "emi:48213", "renewal:10", "renewal:9"]
    noop = json.loads(crondepot(*base, "--json").stdout)
    assert noop["counts"]["changes"] == 0 and noop["counts"]["unchanged"] == 4
    # drop a file and prune: its jobs are cancelled, the others untouched
    (schedules / "renewals.yml").unlink()
    pruned = json.loads(crondepot(*base, "--prune", "--json").stdout)
    assert sorted(c["key"] for c in pruned["changes"]) == ["renewal:10", "renewal:9"]
    assert keys(conn) == ["bill:7731", "emi:48213"]


def test_a_bad_document_names_the_file_line_and_field(db_url: str, conn: psycopg.Connection[Any],
                                                      schedules: Path) -> None:
    text = REMINDERS.replace('cron: "30 2 * * *"', 'cron: "30 25 * * *"')
    (schedules / "reminders.yaml").write_text(text)
    bad = crondepot("apply", str(schedules), "--tenant", "bank42", "--db", db_url)
    assert bad.returncode == 2
    # the line of the field at fault (the item starts on line 8, its cron is on line 9)
    assert bad.stderr.startswith(f"crondepot: error: {schedules / 'reminders.yaml'}:9 (key "
                                 "'bill:7731'): cron: hour field: 25"), bad.stderr
    assert keys(conn) == []
    (schedules / "reminders.yaml").write_text("- key: [unclosed\n")
    broken = crondepot("apply", str(schedules), "--tenant", "bank42", "--db", db_url)
    assert broken.returncode == 2 and "reminders.yaml:" in broken.stderr
    assert "not YAML" in broken.stderr


def test_json_files_and_errors_by_index(db_url: str, conn: psycopg.Connection[Any],
                                        tmp_path: Path) -> None:
    tenant(conn, "bank42")
    file = tmp_path / "jobs.json"
    file.write_text(json.dumps([
        {"key": "a", "cron": "0 9 * * *", "tz": "UTC",
         "target": {"type": "python", "handler": "sms.send"}},
        {"cron": "0 9 * * *", "tz": "UTC", "target": {"type": "python", "handler": "sms.send"}},
    ]))
    bad = crondepot("apply", str(file), "--tenant", "bank42", "--db", db_url, "--json")
    assert bad.returncode == 2
    assert f"{file}[1]: key" in json.loads(bad.stderr)["error"]
    assert keys(conn) == []


def test_export_then_apply_is_a_no_op(db_url: str, conn: psycopg.Connection[Any],
                                      schedules: Path, tmp_path: Path) -> None:
    crondepot("apply", str(schedules), "--tenant", "bank42", "--scope", "deploy=reminders",
              "--db", db_url)
    conn.execute("INSERT INTO jobs (tenant_id, cron, tz, target, next_run_at, next_nominal_at)"
                 " SELECT id, '0 9 * * *', 'UTC', '{\"type\": \"python\", \"handler\": "
                 "\"sms.send\"}', now(), now() FROM tenants WHERE name = 'bank42'")
    for form in ("yaml", "json"):
        out = tmp_path / f"export.{form}"
        exported = crondepot("export", "--tenant", "bank42", "--format", form, "-o", str(out),
                             "--db", db_url)
        assert exported.returncode == 0, exported.stderr
        assert "exported 4 jobs, skipped 1 without a key" in exported.stderr
        assert "has no key" in exported.stderr
        plan = json.loads(crondepot("apply", str(out), "--tenant", "bank42", "--scope",
                                    "deploy=reminders", "--prune", "--json",
                                    "--db", db_url).stdout)
        assert plan["counts"]["changes"] == 0 and plan["counts"]["unchanged"] == 4, plan
    scoped = crondepot("export", "--tenant", "bank42", "--scope", "kind=renewal",
                       "--db", db_url)
    assert scoped.stdout.count("key:") == 1 and "renewal:10" in scoped.stdout


APP = """\
import crondepot


@crondepot.periodic("0 9 * * *", tz="Asia/Kolkata", key="digest.kolkata")
@crondepot.periodic("0 9 * * *", tz="America/New_York", key="digest.new-york",
                    payload={"template": "digest"})
@crondepot.handler("sync.digest")
def digest(run):
    pass


@crondepot.periodic("*/30 * * * *", handler="sync.poll", spread={"seconds": 60})
def poll(run):
    pass
"""


@pytest.fixture
def app(tmp_path: Path, conn: psycopg.Connection[Any]) -> Path:
    grant(conn, tenant(conn, "bank42"), handlers=["sync.digest", "sync.poll"])
    (tmp_path / "reminders_app.py").write_text(APP)
    return tmp_path


def test_apply_from_module(db_url: str, conn: psycopg.Connection[Any], app: Path) -> None:
    done = crondepot("apply", "--from-module", "reminders_app", "--tenant", "bank42",
                     "--db", db_url, "--json", cwd=app)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["created"] == 3
    labels = conn.execute("SELECT DISTINCT labels FROM jobs").fetchall()
    assert labels == [({"crondepot.module": "reminders_app"},)]
    assert keys(conn) == ["digest.kolkata", "digest.new-york", "sync.poll"]


def test_two_workers_syncing_at_once_leave_one_job_per_declaration(
        db_url: str, conn: psycopg.Connection[Any], app: Path) -> None:
    env = {"PYTHONPATH": f"{app}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    workers = [Proc("worker", "--db", db_url, "--import", "reminders_app", "--sync-schedules",
                    "--tenant", "bank42", "--name", f"sync{i}", env=env) for i in range(2)]
    try:
        # "worker started" comes once its signal handlers are in place: a SIGTERM sent
        # between the sync and then would end the process without its clean stop.
        wait_until(lambda: all(
            any(str(line.get("msg", "")).startswith("schedules of") for line in w.lines())
            and any(line.get("msg") == "worker started" for line in w.lines())
            for w in workers), timeout=60, message="both workers synced and started")
    finally:
        codes = [w.stop() for w in workers]
    assert codes == [0, 0], [w.output()[-2000:] for w in workers]
    rows = conn.execute("SELECT key, count(*) FROM jobs GROUP BY key ORDER BY key").fetchall()
    assert rows == [("digest.kolkata", 1), ("digest.new-york", 1), ("sync.poll", 1)]
    synced = [line for w in workers for line in w.lines()
              if str(line.get("msg", "")).startswith("schedules of")]
    assert len(synced) == 2
