"""Two roles, as a user meets them: `crondepot up` migrates as the owner and runs the API,
the scheduler and the worker as the runtime role; `crondepot migrate` refuses a runtime role
it must not use, and says why."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql

from crondepot.db import connect
from crondepot_testkit.processes import Proc, free_port, wait_until


def crondepot(*args: str, env: dict[str, str] | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _users_by_process(conn: psycopg.Connection[Any]) -> dict[str, set[str]]:
    rows = conn.execute("SELECT application_name, usename FROM pg_stat_activity "
                        "WHERE datname = current_database() "
                        "AND application_name LIKE 'crondepot-%'").fetchall()
    found: dict[str, set[str]] = {}
    for app, user in rows:
        kind = ("api" if app.startswith("crondepot-api") else
                "scheduler" if app.startswith("crondepot-scheduler") else
                "worker" if app.startswith("crondepot-worker") else app)
        found.setdefault(kind, set()).add(user)
    return found


@pytest.mark.slow
def test_up_runs_the_api_scheduler_and_worker_as_the_runtime_role_end_to_end(
        empty_db_url: str) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    up = Proc("up", "--db", empty_db_url, "--demo", "--schedulers", "1", "--workers", "1",
              "--port", str(port), "--tick", "500ms")
    try:
        wait_until(lambda: _answers(f"{base}/healthz"), timeout=90, message="/healthz")
        token = next(line.split(": ")[-1] for line in up.output().splitlines()
                     if "demo tenant token (shown once)" in line)
        auth = {"Authorization": f"Bearer {token}"}
        job = httpx.post(f"{base}/v1/jobs", headers=auth, json={
            "key": "roles:e2e", "cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "crondepot.log"}}, timeout=10)
        assert job.status_code == 201, job.text
        run = httpx.post(f"{base}/v1/jobs/{job.json()['id']}/trigger", headers=auth,
                         timeout=10)
        assert run.status_code == 201, run.text
        run_id = run.json()["run_id"]
        with connect(empty_db_url) as conn:
            wait_until(lambda: conn.execute("SELECT status FROM runs WHERE run_id = %s",
                                            (run_id,)).fetchone() == ("succeeded",),
                       timeout=60, message="the triggered run called and recorded")
            users = _users_by_process(conn)
            audit = conn.execute("SELECT action, actor FROM audit_log WHERE subject = %s "
                                 "ORDER BY id", (str(job.json()["id"]),)).fetchall()
    finally:
        up.kill(signal.SIGINT)
        code = up.popen.wait(timeout=60)
    assert code == 0, up.output()
    runtime = {"crondepot_runtime"}
    assert {k: users.get(k) for k in ("api", "scheduler", "worker")} == {
        "api": runtime, "scheduler": runtime, "worker": runtime}, users
    assert [action for action, _ in audit] == ["job.create"]
    assert audit[0][1].startswith("token:")
    assert "processes connect as crondepot_runtime" in up.output()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_migrate_refuses_a_superuser_as_the_runtime_role_and_applies_nothing(
        empty_db_url: str) -> None:
    result = crondepot("migrate", "--db", empty_db_url, "--runtime-role", "postgres", "--json")
    assert result.returncode == 2
    error = json.loads(result.stderr)["error"]
    assert "postgres cannot be the runtime role" in error and "superuser" in error
    with connect(empty_db_url) as conn:
        assert conn.execute("SELECT to_regclass('crondepot_schema_migrations')"
                            ).fetchone() == (None,)


@pytest.mark.parametrize("name", ["Crondepot", "app-runtime", "1role", "x" * 64, ""])
def test_migrate_refuses_a_runtime_role_name_that_is_not_a_plain_name(
        empty_db_url: str, name: str) -> None:
    result = crondepot("migrate", "--db", empty_db_url, "--runtime-role", name)
    assert result.returncode == 2
    assert "--runtime-role" in result.stderr and "expected a role name" in result.stderr


def test_the_embedded_database_refuses_another_runtime_role_before_starting(
        tmp_path: Any) -> None:
    folder = tmp_path / "pgdata"
    env = {k: v for k, v in os.environ.items() if k != "CRONDEPOT_DATABASE_URL"}
    result = crondepot("migrate", "--data-dir", str(folder), "--runtime-role", "other_role",
                       env=env)
    assert result.returncode == 2
    assert "the embedded database's runtime role is always crondepot_runtime" \
        in result.stderr
    assert not folder.exists()


@pytest.fixture
def nologin_role(admin_url: str, empty_db_url: str) -> Iterator[str]:
    name = f"crondepot_t_{uuid.uuid4().hex[:10]}"
    ident = sql.Identifier(name)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(ident))
    yield name
    with connect(empty_db_url) as db:
        db.execute(sql.SQL("DROP OWNED BY {}").format(ident))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP ROLE {}").format(ident))


def test_up_with_a_runtime_role_it_cannot_log_in_as_says_so_and_starts_nothing(
        empty_db_url: str, nologin_role: str) -> None:
    result = crondepot("up", "--db", empty_db_url, "--runtime-role", nologin_role,
                       "--port", str(free_port()))
    assert result.returncode == 2
    assert f"cannot connect as the runtime role {nologin_role}" in result.stderr
    assert "CRONDEPOT_RUNTIME_PASSWORD" in result.stderr
    assert "started api" not in result.stderr + result.stdout
