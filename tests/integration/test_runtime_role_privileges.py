"""The runtime role: what the API, schedulers and workers connect as.

It cannot change the schema or rewrite the audit log (each statement below is refused to it,
and the owner, for contrast, can run each one), and it can do everything each process does.
Every test database is cloned from a template that `migrate` built, so the role and its
grants are those migrate gives.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from crondepot.db import ALL_TENANTS, MigrationError, connect, migrate, roles
from crondepot.db.migrations import require_current
from crondepot.job import JobSpec, create_jobs
from crondepot.job.store import (
    CreatedJob,
    cancel_job,
    import_batch,
    pause_job,
    resume_job,
    trigger_job,
)
from crondepot.limits.buckets import set_limit
from crondepot.queue import (
    Success,
    claim_runs,
    extend_acquired_leases,
    reap_abandoned_runs,
    record_retry,
    record_successes,
)
from crondepot.queue.lease import HeldLease
from crondepot.queue.outcome import record_final_failure
from crondepot.runs.deadletter import DeadFilter, replay
from crondepot.runs.retention import prune_finished_runs
from crondepot.scheduler.ledger import check_if_due, latest_check, verify
from crondepot.scheduler.tick import tick
from crondepot.tenancy.audit import act_as, list_audit
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant
from crondepot.worker.loop import _configure_connection

ROLE = roles.DEFAULT_RUNTIME_ROLE


@pytest.fixture
def runtime(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection to this test's database as the runtime role, seeing every tenant's rows
    as the processes do (tenants=ALL_TENANTS; row-level security: test_tenant_row_security)."""
    with connect(roles.runtime_url(db_url, ROLE), tenants=ALL_TENANTS) as connection:
        assert connection.execute("SELECT current_user").fetchone() == (ROLE,)
        yield connection


def _doc(**extra: Any) -> JobSpec:
    return JobSpec.from_document({"cron": "*/5 * * * *", "tz": "Asia/Kolkata",
                                  "target": {"type": "python", "handler": "test.noop"},
                                  **extra})


def _audited(conn: psycopg.Connection[Any], tenant_id: int) -> None:
    """One audit entry, written by the jobs trigger as ``conn``'s role."""
    act_as(conn, "test:setup")
    create_jobs(conn, tenant_id, [_doc(key=f"audited-{uuid.uuid4().hex[:6]}")])
    act_as(conn, "")


# What an attacker holding the runtime role's connection would try, to change the schema or
# rewrite history. Each is refused to the runtime role by the privilege system
# (InsufficientPrivilege, SQLSTATE 42501) and runs for the owner.
REFUSED = {
    "alter a table": "ALTER TABLE jobs ADD COLUMN evil text",
    "disable the audit trigger": "ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update",
    "disable every trigger": "SET session_replication_role = replica",
    "add an audit entry": "INSERT INTO audit_log (tenant_id, actor, action, subject) "
                          "VALUES (1, 'token:1@bank', 'job.create', '1')",
    "update an audit entry": "UPDATE audit_log SET actor = 'nobody'",
    "delete an audit entry": "DELETE FROM audit_log",
    "truncate the audit log": "TRUNCATE audit_log",
    "drop a table": "DROP TABLE runs CASCADE",
    "create a table": "CREATE TABLE public.evil (id integer)",
    "create a schema": "CREATE SCHEMA evil",
    "replace an audit trigger function":
        "CREATE OR REPLACE FUNCTION crondepot_audit_jobs() RETURNS trigger "
        "LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$",
    "add a trigger": "CREATE TRIGGER evil BEFORE INSERT ON audit_log FOR EACH ROW "
                     "EXECUTE FUNCTION crondepot_audit_append_only()",
    "rewind the audit ids": "SELECT setval(pg_get_serial_sequence('audit_log', 'id'), 1)",
    "forget a migration": "DELETE FROM crondepot_schema_migrations",
}


@pytest.mark.parametrize("statement", REFUSED.values(), ids=REFUSED.keys())
def test_runtime_role_is_refused_what_would_change_the_schema_or_the_audit_log(
        conn: psycopg.Connection[Any], runtime: psycopg.Connection[Any], tenant_id: int,
        statement: str) -> None:
    _audited(runtime, tenant_id)
    entries = conn.execute("SELECT * FROM audit_log ORDER BY id").fetchall()
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        runtime.execute(statement)
    assert conn.execute("SELECT * FROM audit_log ORDER BY id").fetchall() == entries
    # The owner can: what stops the runtime role is its privileges, not the statement. (The
    # owner first disables the audit_log triggers, which is the attack this role prevents.)
    with pytest.raises(_Rollback), conn.transaction():
        conn.execute("ALTER TABLE audit_log DISABLE TRIGGER USER")
        conn.execute(statement)
        raise _Rollback


class _Rollback(Exception):
    pass


def test_runtime_role_owns_nothing_and_has_no_power_over_the_schema(
        conn: psycopg.Connection[Any]) -> None:
    assert roles.problems(conn, ROLE) == []
    owned = conn.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner "
        "WHERE r.rolname = %s", (ROLE,)).fetchone()
    assert owned == (0,)
    assert conn.execute("SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles "
                        "WHERE rolname = %s", (ROLE,)).fetchone() == (False, False, False)


def test_runtime_role_does_what_the_api_and_the_cli_do(
        runtime: psycopg.Connection[Any]) -> None:
    tenant = create_tenant(runtime, "bank7")
    act_as(runtime, "token:1")
    grant(runtime, tenant.id, handlers=[_doc(key="x").target["handler"]])
    (created,) = create_jobs(runtime, tenant.id, [_doc(key="a")])
    pause_job(runtime, tenant.id, created.id)
    resume_job(runtime, tenant.id, created.id)
    trigger_job(runtime, tenant.id, created.id)
    # An import of 150 jobs goes through the session's temporary staging table (COPY).
    results = import_batch(runtime, tenant.id, [_doc(key=f"i{n}") for n in range(150)])
    assert len(results) == 150 and all(isinstance(r, CreatedJob) for r in results)
    cancel_job(runtime, tenant.id, created.id)
    set_limit(runtime, "sms-gateway", 50.0, 10)
    # Every change was audited, by the triggers (SECURITY DEFINER: this role may not insert
    # into audit_log itself); the tenant and its first token before an actor was named.
    assert {e.action for e in list_audit(runtime, tenant.id)} == {
        "tenant.create", "token.create", "tenant.grant", "job.create", "job.pause",
        "job.resume", "job.trigger", "job.bulk_create", "job.cancel", "run.cancel"}
    require_current(runtime)


def _five_minute_mark(hours_ago: int) -> datetime:
    """A past instant on a */5 fire, so a test knows which fires fall in its window."""
    now = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(hours=hours_ago)
    return now - timedelta(minutes=now.minute % 5)


def test_runtime_role_does_what_a_scheduler_does(runtime: psycopg.Connection[Any]) -> None:
    tenant = create_tenant(runtime, "bank8")
    start = _five_minute_mark(hours_ago=2)
    create_jobs(runtime, tenant.id, [_doc(key="s")], now=start)
    result = tick(runtime, batch=100, now=start + timedelta(minutes=11))
    assert result.written == 2
    # The periodic ledger check: an advisory lock, a check, a row in ledger_checks.
    assert check_if_due(runtime, every=timedelta(minutes=5), window=timedelta(hours=1))
    assert latest_check(runtime) is not None
    assert verify(runtime, since=start, until=start + timedelta(minutes=11)).clean


def test_runtime_role_does_what_a_worker_does(runtime: psycopg.Connection[Any]) -> None:
    _configure_connection(runtime)
    tenant = create_tenant(runtime, "bank9")
    start = _five_minute_mark(hours_ago=1)
    create_jobs(runtime, tenant.id, [_doc(key=f"w{n}", max_attempts=1) for n in range(4)],
                now=start)
    assert tick(runtime, batch=100, now=start + timedelta(minutes=5)).written == 4
    ok, retried, failed, abandoned = claim_runs(runtime, owner="w1", shares={"normal": 4})
    assert extend_acquired_leases(runtime, [HeldLease(ok.run_id, ok.lease_token, 60)])
    assert record_successes(runtime, [Success(ok.run_id, ok.lease_token, ok.attempt)]) \
        == {ok.run_id}
    record_retry(runtime, retried.run_id, retried.lease_token, delay=1, error="boom",
                 error_class="TemporaryError")
    record_final_failure(runtime, failed.run_id, failed.lease_token, status="dead",
                         error="no", error_class="PermanentError")
    assert reap_abandoned_runs(runtime, now=datetime.now(UTC) + timedelta(hours=1)) \
        == {"queued": 0, "dead": 1}
    assert abandoned.run_id
    act_as(runtime, "token:2")
    assert len(replay(runtime, DeadFilter(run_ids=[failed.run_id]),
                      ignore_deadline=True).replayed) == 1
    # The workers registry and retention, as the worker's maintenance does them.
    from crondepot.db import Q

    runtime.execute(Q.worker_beat, {"name": "w1", "host": "h", "pid": 1, "concurrency": 4,
                                    "busy": 0})
    runtime.execute(Q.worker_stopped, {"name": "w1"})
    runtime.execute(Q.forget_old_workers)
    set_limit(runtime, "sms", 10.0, 5)
    assert runtime.execute(Q.take_tokens, {"name": "sms", "want": 2, "hold": 1.0}
                           ).fetchone() is not None
    assert prune_finished_runs(runtime, timedelta(0), now=datetime.now(UTC)
                               + timedelta(days=1)) == 1


def test_a_table_a_migration_adds_is_usable_by_the_runtime_role_without_being_named(
        db_url: str, conn: psycopg.Connection[Any], runtime: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE later_feature (id bigint GENERATED ALWAYS AS IDENTITY, "
                 "note text)")
    # Usable at once (default privileges), and after the next migrate (its grants).
    runtime.execute("INSERT INTO later_feature (note) VALUES ('x')")
    migrate(conn)
    runtime.execute("UPDATE later_feature SET note = 'y'")
    runtime.execute("DELETE FROM later_feature")
    # The next migrate keeps audit_log append-only for the runtime role.
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        runtime.execute("DELETE FROM audit_log")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        runtime.execute("ALTER TABLE later_feature ADD COLUMN evil text")


@pytest.fixture
def make_role(admin_url: str) -> Iterator[Any]:
    """Roles of this test's own (roles are the server's: each gets a unique name and is
    dropped afterwards, with what it owns or was granted in any database)."""
    made: list[str] = []

    def make(options: str = "LOGIN") -> str:
        name = f"crondepot_t_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE ROLE {} " + options).format(sql.Identifier(name)))
        made.append(name)
        return name

    yield make
    for name in made:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            databases = [row[0] for row in admin.execute(
                "SELECT DISTINCT d.datname FROM pg_shdepend s JOIN pg_database d "
                "ON d.oid = s.dbid JOIN pg_roles r ON r.oid = s.refobjid "
                "WHERE r.rolname = %s", (name,))]
            for database in databases:
                with connect(make_conninfo(admin_url, dbname=database)) as db:
                    db.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def test_migrate_takes_an_existing_role_and_revokes_what_it_had_beyond_the_runtime_grants(
        db_url: str, conn: psycopg.Connection[Any], make_role: Any) -> None:
    name = make_role()
    conn.execute(sql.SQL("GRANT ALL ON audit_log, jobs TO {}").format(sql.Identifier(name)))
    migrate(conn, runtime_role=name)
    with connect(roles.runtime_url(db_url, name)) as taken:
        taken.execute("SELECT count(*) FROM jobs")
        for statement in ("DELETE FROM audit_log", "TRUNCATE jobs",
                          "INSERT INTO audit_log (tenant_id, actor, action, subject) "
                          "VALUES (1, 'x', 'y', 'z')"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                taken.execute(statement)


@pytest.mark.parametrize("powers", ["SUPERUSER", "CREATEROLE", "owns a table",
                                    "member of a table's owner", "the migrator",
                                    "IN ROLE pg_write_all_data"])
def test_migrate_refuses_a_runtime_role_with_power_over_the_schema_and_changes_nothing(
        empty_db_url: str, make_role: Any, admin_url: str, powers: str) -> None:
    with connect(empty_db_url) as owner:
        if powers in ("SUPERUSER", "CREATEROLE", "IN ROLE pg_write_all_data"):
            name = make_role(f"LOGIN {powers}")
        elif powers == "the migrator":
            name = owner.execute("SELECT current_user").fetchone()[0]  # type: ignore[index]
        else:
            name = make_role()
            table_owner = make_role("NOLOGIN") if powers.startswith("member") else name
            if table_owner != name:
                owner.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(table_owner),
                                                              sql.Identifier(name)))
            owner.execute("CREATE TABLE notes (id integer)")
            owner.execute(sql.SQL("ALTER TABLE notes OWNER TO {}").format(
                sql.Identifier(table_owner)))
        with pytest.raises(roles.RoleError, match=f"{name} cannot be the runtime role"):
            migrate(owner, runtime_role=name)
        assert owner.execute("SELECT to_regclass('crondepot_schema_migrations')"
                             ).fetchone() == (None,)


def test_migrate_sets_the_runtime_password_as_a_scram_verifier(
        empty_db_url: str, make_role: Any, admin_url: str) -> None:
    name = make_role()
    with connect(empty_db_url) as owner:
        migrate(owner, runtime_role=name, runtime_password="first secret")
        first = _verifier(admin_url, name)
        migrate(owner, runtime_role=name, runtime_password="second secret")
        second = _verifier(admin_url, name)
        migrate(owner, runtime_role=name)     # no password given: the one set is kept
    assert first.startswith("SCRAM-SHA-256$") and second.startswith("SCRAM-SHA-256$")
    assert first != second and _verifier(admin_url, name) == second


def _verifier(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url) as admin:
        row = admin.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s",
                            (name,)).fetchone()
    assert row is not None and row[0]
    return str(row[0])


def test_a_role_never_granted_is_told_to_run_migrate_for_it(
        db_url: str, make_role: Any) -> None:
    name = make_role()
    with connect(roles.runtime_url(db_url, name)) as stranger, \
            pytest.raises(MigrationError, match=f"--runtime-role {name}"):
        require_current(stranger)


def test_migrate_takes_create_in_the_schema_from_public_as_an_upgraded_cluster_grants_it(
        conn: psycopg.Connection[Any], runtime: psycopg.Connection[Any]) -> None:
    # PostgreSQL 14 and older gave PUBLIC CREATE on the public schema, and pg_upgrade keeps it.
    conn.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")
    runtime.execute("CREATE TABLE public.squatter (id integer)")
    runtime.execute("DROP TABLE public.squatter")
    migrate(conn)
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        runtime.execute("CREATE TABLE public.squatter (id integer)")


def test_migrate_grants_connect_and_temp_an_operator_took_from_public(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    database = sql.Identifier(conn.info.dbname)
    conn.execute(sql.SQL("REVOKE CONNECT, TEMPORARY ON DATABASE {} FROM PUBLIC").format(database))
    migrate(conn)
    with connect(roles.runtime_url(db_url, ROLE), tenants=ALL_TENANTS) as runtime:
        tenant = create_tenant(runtime, "bank10")
        # 150 jobs: the import stages them in a temporary table.
        assert len(import_batch(runtime, tenant.id, [_doc(key=f"t{n}") for n in range(150)])) \
            == 150
