"""The audit log: API and CLI actions are recorded with who, what and before/after; the
scheduler's bookkeeping is not; entries cannot be changed.

The fixtures make tenants, tokens and jobs on a connection that names no actor: since
migration 0020 those writes are audited too, as ``role:<session user>``; the tests below look
at the entries of the actors they name (``_named``). tests/integration/test_audit_bypass.py
is about the unnamed ones."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.scheduler.tick import tick
from crondepot.tenancy.audit import act_as, list_audit
from tests.support.api import EMI


def _actions(client: TestClient, h: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    response = client.get("/v1/audit", headers=h, params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _named(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of sessions that named an actor (the fixtures' setup names none)."""
    return [i for i in items if not i["actor"].startswith("role:")]


def test_job_actions_through_the_api_are_audited_with_before_and_after(
        client: TestClient, h: dict[str, str], job: dict[str, Any]) -> None:
    job_id = job["id"]
    client.post(f"/v1/jobs/{job_id}/pause", headers=h)
    client.post(f"/v1/jobs/{job_id}/resume", headers=h)
    version = client.get(f"/v1/jobs/{job_id}", headers=h).json()["version"]
    patched = client.patch(f"/v1/jobs/{job_id}", json={"cron": "0 10 5 * *"},
                           headers={**h, "If-Match": str(version)})
    assert patched.status_code == 200, patched.text
    trigger = client.post(f"/v1/jobs/{job_id}/trigger", headers=h)
    client.delete(f"/v1/jobs/{job_id}", headers=h)
    items = _named(_actions(client, h))
    # Cancelling also cancels the job's queued run (the one just triggered).
    actions = [i["action"] for i in items]
    assert sorted(actions[:2]) == ["job.cancel", "run.cancel"]
    assert actions[2:] == ["job.trigger", "job.update", "job.resume", "job.pause", "job.create"]
    update = items[3]
    assert update["before"]["cron"] == "0 9 5 * *" and update["after"]["cron"] == "0 10 5 * *"
    assert update["actor"].startswith("token:") and update["actor"].endswith("@bank42")
    assert items[2]["subject"] == trigger.json()["run_id"]
    assert _actions(client, h, subject=str(job_id), action="job.pause")[0]["action"] == \
        "job.pause"


def test_other_tenants_do_not_see_each_others_audit(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        job: dict[str, Any]) -> None:
    assert _named(_actions(client, other)) == []
    assert not [i for i in _actions(client, other) if i["action"].startswith("job.")]
    assert _named(_actions(client, h))


def test_scheduler_bookkeeping_is_not_audited(conn: psycopg.Connection[Any], client: TestClient,
                                              h: dict[str, str], job: dict[str, Any]) -> None:
    # Bookkeeping columns only: not audited, whoever writes them (this session names no actor).
    conn.execute("UPDATE jobs SET next_run_at = now() - interval '1 minute', "
                 "next_nominal_at = now() - interval '1 minute'")
    assert tick(conn, batch=10).claimed == 1
    assert [i["action"] for i in _actions(client, h) if i["action"].startswith(("job.", "run."))
            ] == ["job.create"]


def test_import_writes_one_summary_entry(client: TestClient, h: dict[str, str]) -> None:
    import json

    lines = "\n".join(json.dumps({**EMI, "key": f"k{i}"}) for i in range(25))
    response = client.post("/v1/import", content=lines.encode(),
                           headers={**h, "Content-Type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    items = _named(_actions(client, h))
    assert [i["action"] for i in items] == ["job.bulk_create"]
    ids = items[0]["after"]["ids"]
    assert items[0]["after"] == {"count": 25, "ids": ids} and len(set(ids)) == 25
    assert items[0]["subject"] == f"jobs {min(ids)}..{max(ids)}"
    assert items[0]["actor"].startswith("token:")


def test_the_audit_log_is_append_only(conn: psycopg.Connection[Any], tenant_id: int) -> None:
    act_as(conn, "cli:test@host")
    conn.execute("INSERT INTO audit_log (tenant_id, actor, action, subject) "
                 "VALUES (%s, 'x', 'y', 'z')", (tenant_id,))
    for statement in ("UPDATE audit_log SET actor = 'forged'", "DELETE FROM audit_log",
                      "TRUNCATE audit_log"):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute(statement)
    assert [e.actor for e in list_audit(conn, tenant_id) if e.action == "y"] == ["x"]


def test_cli_changes_are_audited_as_the_cli_user(db_url: str, conn: psycopg.Connection[Any],
                                                 tenant_id: int) -> None:
    import json
    import subprocess
    import sys

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "crondepot", *args, "--db", db_url,
                               "--tenant", "bank42", "--json"], capture_output=True, text=True,
                              timeout=60)

    added = cli("jobs", "add", json.dumps({**EMI, "key": "cli-made"}))
    assert added.returncode == 0, added.stderr
    job_id = json.loads(added.stdout)["id"]
    assert cli("jobs", "pause", str(job_id)).returncode == 0
    entries = [e for e in list_audit(conn, tenant_id) if not e.actor.startswith("role:")]
    assert [e.action for e in entries] == ["job.pause", "job.create"]
    assert all(e.actor.startswith("cli:") for e in entries)
