"""The runtime role cannot act without an audit entry (issue 30, item 2a).

Each test connects as the runtime role, as the API, the schedulers and the workers do, and
tries one way around the audit log that worked before migration 0020: switching row entries
off (``crondepot.audit_rows``), naming no actor, minting a token for another tenant, rewriting
a job's payload without a new version, writing audit_log directly, and a temporary table
named audit_log. Every write to jobs, tokens, grants and tenants is recorded; an unnamed
actor is recorded as ``role:<session user>``. A bulk import is one summary entry.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings, create_app
from crondepot.db import ALL_TENANTS, connect, roles
from crondepot.job import JobSpec, create_jobs
from crondepot.job.store import CreatedJob, import_batch
from crondepot.scheduler.tick import tick
from crondepot.tenancy.audit import AuditEntry, act_as, list_audit, record_summary
from crondepot.tenancy.tenants import create_tenant, hash_token, new_token

ROLE = roles.DEFAULT_RUNTIME_ROLE
UNNAMED = f"role:{ROLE}"


@pytest.fixture
def runtime(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to this test's database as the runtime role, seeing every tenant's rows
    as the scheduler's, the workers' and the operator's commands do (row-level security,
    migration 0021): the bypasses tried here are those of such a process."""
    with connect(roles.runtime_url(db_url, ROLE), tenants=ALL_TENANTS) as connection:
        assert connection.execute("SELECT current_user").fetchone() == (ROLE,)
        yield connection


@pytest.fixture
def two(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """Two tenants (made by the owner's connection), as (ours, theirs)."""
    return (create_tenant(conn, f"ours{uuid.uuid4().hex[:6]}").id,
            create_tenant(conn, f"theirs{uuid.uuid4().hex[:6]}").id)


def _doc(key: str) -> JobSpec:
    return JobSpec.from_document({"key": key, "cron": "*/5 * * * *", "tz": "Asia/Kolkata",
                                  "target": {"type": "http",
                                             "url": "https://hooks.example.com/x"},
                                  "payload": {"amount": 10}})


def _entries(conn: psycopg.Connection[Any], tenant_id: int, prefix: str = "") -> list[AuditEntry]:
    """The tenant's entries, oldest first, of actions starting with ``prefix``."""
    return [e for e in reversed(list_audit(conn, tenant_id, limit=1000))
            if e.action.startswith(prefix)]


def test_audit_rows_off_no_longer_turns_auditing_off(
        runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    ours, _ = two
    act_as(runtime, "token:1@ours")
    runtime.execute("SELECT set_config('crondepot.audit_rows', 'off', false)")
    (job,) = create_jobs(runtime, ours, [_doc("off")])
    runtime.execute("UPDATE jobs SET paused = true WHERE id = %s", (job.id,))
    with runtime.transaction():
        runtime.execute("SELECT set_config('crondepot.audit_rows', 'off', true)")
        runtime.execute("UPDATE jobs SET paused = false WHERE id = %s", (job.id,))
    entries = _entries(runtime, ours, "job.")
    assert [(e.action, e.subject, e.actor) for e in entries] == [
        ("job.create", str(job.id), "token:1@ours"), ("job.pause", str(job.id), "token:1@ours"),
        ("job.resume", str(job.id), "token:1@ours")]


def test_a_session_that_names_no_actor_is_recorded_as_its_role(
        runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    ours, _ = two
    act_as(runtime, "")
    (job,) = create_jobs(runtime, ours, [_doc("anon")])
    runtime.execute("UPDATE jobs SET active = false, cancelled_at = now() WHERE id = %s",
                    (job.id,))
    runtime.execute("DELETE FROM jobs WHERE id = %s", (job.id,))
    entries = _entries(runtime, ours, "job.")
    assert [(e.action, e.actor) for e in entries] == [
        ("job.create", UNNAMED), ("job.cancel", UNNAMED), ("job.delete", UNNAMED)]
    assert entries[2].before is not None and entries[2].before["key"] == "anon"


def test_a_token_minted_for_another_tenant_is_in_that_tenants_log(
        db_url: str, runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    _, theirs = two
    token = new_token()
    act_as(runtime, "token:1@ours")     # the actor a compromised API process would claim
    (token_id,) = runtime.execute(
        "INSERT INTO api_tokens (tenant_id, token_hash, role, label) "
        "VALUES (%s, %s, 'admin', NULL) RETURNING id", (theirs, hash_token(token))
    ).fetchone() or (None,)
    # The token works (as it did before): what changed is that it is on the record.
    with TestClient(create_app(db_url, ApiSettings(pool_max_size=2))) as client:
        response = client.get("/v1/jobs", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    minted = [e for e in _entries(runtime, theirs, "token.")
              if e.subject == f"token:{token_id}"]
    assert [(e.action, e.actor) for e in minted] == [("token.create", "token:1@ours")]
    assert minted[0].after == {"tenant_id": theirs, "role": "admin", "label": None,
                               "revoked_at": None}
    # Nor can the hash of a token already issued be swapped, or the token moved, unseen.
    act_as(runtime, "")
    runtime.execute("UPDATE api_tokens SET token_hash = %s WHERE id = %s",
                    (hash_token(new_token()), token_id))
    (changed,) = [e for e in _entries(runtime, theirs, "token.update")]
    assert changed.actor == UNNAMED and changed.before is not None
    assert changed.before["hash_changed"] is True
    assert token not in str(_entries(runtime, theirs))
    # The lookup's last_used_at is bookkeeping: no entry.
    before = len(_entries(runtime, theirs))
    runtime.execute("UPDATE api_tokens SET last_used_at = now() WHERE id = %s", (token_id,))
    assert len(_entries(runtime, theirs)) == before


def test_a_payload_rewritten_without_a_new_version_is_recorded(
        runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    ours, _ = two
    (job,) = create_jobs(runtime, ours, [_doc("pay")])
    act_as(runtime, "")
    runtime.execute("UPDATE jobs SET payload = '{\"amount\": 1000000}' WHERE id = %s",
                    (job.id,))
    (update,) = _entries(runtime, ours, "job.update")
    assert update.actor == UNNAMED and update.subject == str(job.id)
    assert update.before is not None and update.after is not None
    assert update.before["payload"] == {"amount": 10}
    assert update.after["payload"] == {"amount": 1000000}
    assert update.before["version"] == update.after["version"]


def test_the_schedulers_bookkeeping_writes_no_entry(
        runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    ours, _ = two
    create_jobs(runtime, ours, [_doc("tick")])
    runtime.execute("UPDATE jobs SET next_run_at = now() - interval '1 minute', "
                    "next_nominal_at = now() - interval '1 minute'")
    before = _entries(runtime, ours)
    assert tick(runtime, batch=10).claimed == 1
    assert _entries(runtime, ours) == before


def test_grants_tenants_and_secrets_are_recorded_without_an_actor(
        runtime: psycopg.Connection[Any], conn: psycopg.Connection[Any],
        two: tuple[int, int]) -> None:
    ours, _ = two
    act_as(runtime, "")
    runtime.execute("INSERT INTO handler_grants (tenant_id, handler) VALUES (%s, 'pay.out')",
                    (ours,))
    runtime.execute("DELETE FROM handler_grants WHERE tenant_id = %s", (ours,))
    runtime.execute("UPDATE tenants SET signing_secret = 'whsec_forged', max_jobs = 1, "
                    "claim_weight = 5, name = name || 'x' WHERE id = %s", (ours,))
    runtime.execute("UPDATE tenants SET previous_signing_secret = 'whsec_old2', "
                    "previous_secret_until = now() + interval '1 day' WHERE id = %s", (ours,))
    (created,) = runtime.execute("INSERT INTO tenants (name, signing_secret) "
                                 "VALUES (%s, 'whsec_x') RETURNING id",
                                 (f"made{uuid.uuid4().hex[:6]}",)).fetchone() or (None,)
    entries = [e for e in _entries(runtime, ours) if e.actor == UNNAMED]
    assert [e.action for e in entries] == [
        "tenant.grant", "tenant.revoke", "secret.rotate", "tenant.claim_weight",
        "tenant.quota", "tenant.update", "secret.update"]
    assert entries[0].after == {"handlers": ["pay.out"], "limits": []}
    assert [e.action for e in _entries(runtime, created)] == ["tenant.create"]
    text = str(_entries(runtime, ours)) + str(_entries(runtime, created))
    assert "whsec_forged" not in text and "whsec_old2" not in text and "whsec_x" not in text
    # The counts the job triggers keep are bookkeeping.
    before = len(_entries(conn, ours))
    create_jobs(conn, ours, [_doc("counted")])
    assert [e.action for e in _entries(conn, ours)[before:]] == ["job.create"]


def test_the_runtime_role_may_not_write_the_audit_log_itself(
        runtime: psycopg.Connection[Any], conn: psycopg.Connection[Any],
        two: tuple[int, int]) -> None:
    ours, _ = two
    act_as(runtime, "token:1@ours")
    create_jobs(runtime, ours, [_doc("kept")])
    kept = conn.execute("SELECT * FROM audit_log ORDER BY id").fetchall()
    for statement in (
            "INSERT INTO audit_log (tenant_id, actor, action, subject) "
            "VALUES (1, 'token:9@theirs', 'job.create', '1')",
            "UPDATE audit_log SET actor = 'someone else'",
            "DELETE FROM audit_log"):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            runtime.execute(statement)
    # The summary function writes the summary actions the code writes, and no other.
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="not a summary action"):
        record_summary(runtime, ours, "job.create", "1", {})
    assert conn.execute("SELECT * FROM audit_log ORDER BY id").fetchall() == kept
    # A temporary table named audit_log does not catch the triggers' entries.
    runtime.execute("CREATE TEMPORARY TABLE audit_log (LIKE public.audit_log)")
    (job,) = create_jobs(runtime, ours, [_doc("temp")])
    assert runtime.execute("SELECT count(*) FROM pg_temp.audit_log").fetchone() == (0,)
    assert conn.execute("SELECT action FROM audit_log WHERE subject = %s",
                        (str(job.id),)).fetchall() == [("job.create",)]
    # Nor the entries the summary function writes (migration 0041: its path once let it).
    record_summary(runtime, ours, "job.bulk_pause", "jobs temp", {"count": 1})
    assert runtime.execute("SELECT count(*) FROM pg_temp.audit_log").fetchone() == (0,)
    assert conn.execute("SELECT actor FROM audit_log WHERE action = 'job.bulk_pause'"
                        ).fetchall() == [("token:1@ours",)]


def test_a_bulk_import_writes_one_summary_entry(
        runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    ours, _ = two
    act_as(runtime, "token:1@ours")
    results = import_batch(runtime, ours, [_doc(f"i{n}") for n in range(150)])
    ids = sorted(r.id for r in results if isinstance(r, CreatedJob))
    assert len(ids) == 150
    (summary,) = _entries(runtime, ours, "job.")
    assert (summary.action, summary.actor) == ("job.bulk_create", "token:1@ours")
    assert summary.subject == f"jobs {ids[0]}..{ids[-1]}"
    assert summary.after == {"count": 150, "ids": ids}
    # Run again: the keys exist, nothing is inserted, nothing is recorded.
    import_batch(runtime, ours, [_doc(f"i{n}") for n in range(150)])
    assert len(_entries(runtime, ours, "job.")) == 1


def test_runs_are_audited_only_for_a_named_actor(
        runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    """The documented limit: runs are the schedulers' and workers' (thousands a second, no
    actor), so a session that names no actor inserts and updates runs without an entry."""
    ours, _ = two
    (job,) = create_jobs(runtime, ours, [_doc("runs")])
    before = _entries(runtime, ours)
    act_as(runtime, "")
    runtime.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, "
                    "due_at, available_at) VALUES (%s, %s, %s, 'normal', now(), now(), now())",
                    (f"{job.id}:1", job.id, ours))
    assert _entries(runtime, ours) == before
    act_as(runtime, "token:1@ours")
    runtime.execute("UPDATE runs SET status = 'cancelled', finished_at = now() "
                    "WHERE run_id = %s", (f"{job.id}:1",))
    assert [(e.action, e.subject) for e in _entries(runtime, ours)[len(before):]] == [
        ("run.cancel", f"{job.id}:1")]


@pytest.mark.parametrize(("table", "triggers", "bookkeeping"), [
    ("jobs", ("jobs_audit", "jobs_audit_ended"),
     {"next_run_at", "next_nominal_at", "fire_count", "updated_at", "failing_fires"}),
    ("tenants", ("tenants_audit_update",), {"active_jobs", "urgent_jobs"}),
])
def test_every_column_is_audited_or_bookkeeping(
        conn: psycopg.Connection[Any], table: str, triggers: tuple[str, ...],
        bookkeeping: set[str]) -> None:
    """The update triggers are declared on column lists (so the tick and the quota counts
    skip them cheaply): a column a migration adds must join a list, or be bookkeeping."""
    columns = {name for (name,) in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped", (table,))}
    listed = {name for (name,) in conn.execute(
        "SELECT a.attname FROM pg_trigger t CROSS JOIN unnest(t.tgattr) AS k(attnum) "
        "JOIN pg_attribute a ON a.attrelid = t.tgrelid AND a.attnum = k.attnum "
        "WHERE t.tgrelid = %s::regclass AND t.tgname = ANY(%s)", (table, list(triggers)))}
    assert columns - bookkeeping == listed
    assert not bookkeeping & listed


def test_the_workers_health_counter_and_a_scheduled_end_are_told_apart(
        runtime: psycopg.Connection[Any], two: tuple[int, int]) -> None:
    ours, _ = two
    (job,) = create_jobs(runtime, ours, [_doc("end")])
    before = _entries(runtime, ours)
    runtime.execute("UPDATE jobs SET failing_fires = failing_fires + 1 WHERE id = %s",
                    (job.id,))
    assert _entries(runtime, ours) == before
    # As the tick ends a job: its bookkeeping and the end columns in one statement.
    runtime.execute("UPDATE jobs SET fire_count = fire_count + 1, active = false, "
                    "ended_reason = 'max_runs', ended_at = now() WHERE id = %s", (job.id,))
    assert [(e.action, e.actor) for e in _entries(runtime, ours)[len(before):]] == [
        ("job.end", UNNAMED)]
