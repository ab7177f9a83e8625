"""Migrations: applied once, recorded, safe to run from several processes at once."""

from __future__ import annotations

import json
import subprocess
import sys

import psycopg
import pytest

from crondepot.db import MigrationError, connect, migrate
from crondepot.db.migrations import available, pending

CONTRACT_COLUMNS = {
    ("jobs", "next_run_at"), ("jobs", "active"), ("runs", "run_id"), ("runs", "job_id"),
    ("runs", "status"), ("runs", "nominal_at"), ("runs", "due_at"), ("runs", "attempt"),
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args],
                          capture_output=True, text=True, timeout=120)


def test_fresh_apply_creates_the_schema_and_records_every_version(empty_db_url: str) -> None:
    with connect(empty_db_url) as conn:
        done = migrate(conn)
        assert [m.version for m in done] == [m.version for m in available()]
        recorded = conn.execute(
            "SELECT version, checksum FROM crondepot_schema_migrations ORDER BY version"
        ).fetchall()
        assert recorded == [(m.version, m.checksum) for m in available()]
        columns = set(conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = 'public'").fetchall())
        assert columns >= CONTRACT_COLUMNS


def test_second_apply_does_nothing(empty_db_url: str) -> None:
    with connect(empty_db_url) as conn:
        migrate(conn)
        assert migrate(conn) == []
        assert pending(conn) == []


def test_due_index_is_partial_on_active_unpaused_jobs(db_url: str) -> None:
    with connect(db_url) as conn:
        row = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'jobs_due'"
                           ).fetchone()
    assert row is not None
    assert "(next_run_at)" in row[0]
    assert "WHERE (active AND (NOT paused))" in row[0]


def test_edited_migration_is_reported_not_ignored(empty_db_url: str) -> None:
    with connect(empty_db_url) as conn:
        migrate(conn)
        conn.execute("UPDATE crondepot_schema_migrations SET checksum = 'x' WHERE version = 1")
        with pytest.raises(MigrationError, match="was changed after it was applied"):
            migrate(conn)


def test_three_concurrent_migrate_processes_apply_each_version_once(empty_db_url: str) -> None:
    procs = [subprocess.Popen([sys.executable, "-m", "crondepot", "migrate", "--db",
                               empty_db_url, "--json"], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    outputs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    applied = sorted(v for out in outputs for v in out["applied"])
    assert applied == [m.version for m in available()]      # each version by exactly one
    with connect(empty_db_url) as conn:
        count = conn.execute("SELECT count(*) FROM crondepot_schema_migrations").fetchone()
    assert count == (len(available()),)


def test_migrate_command_twice_then_check(empty_db_url: str) -> None:
    first = _cli("migrate", "--db", empty_db_url)
    assert first.returncode == 0, first.stderr
    assert "applied: 0001" in first.stdout
    second = _cli("migrate", "--db", empty_db_url)
    assert second.returncode == 0
    assert "schema is up to date" in second.stdout
    check = _cli("migrate", "--db", empty_db_url, "--check", "--json")
    assert check.returncode == 0 and json.loads(check.stdout) == {"pending": [], "functions": []}


def test_migrate_against_an_unreachable_database_fails_clearly() -> None:
    result = _cli("migrate", "--db", "postgresql://127.0.0.1:1/none?connect_timeout=2")
    assert result.returncode != 0
    assert "connection" in result.stderr.lower()


def test_run_ids_do_not_depend_on_the_session_time_zone(db_url: str) -> None:
    """The same stored instant gives the same run id in sessions with different TimeZone."""
    from crondepot.timetable import run_id

    ids = set()
    for zone in ("UTC", "Asia/Kolkata", "America/New_York", "Australia/Lord_Howe"):
        with connect(db_url) as conn:
            conn.execute(f"SET TimeZone = '{zone}'")
            (instant,) = conn.execute(
                "SELECT '2026-10-05 09:00:00+05:30'::timestamptz").fetchone()  # type: ignore[misc]
            ids.add(run_id(7, instant))
    assert ids == {"7:1791171000"}


def test_schema_checks_reject_bad_rows(conn: psycopg.Connection[object], tenant_id: int) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(
            "INSERT INTO jobs (tenant_id, cron, tz, target, priority) "
            "VALUES (%s, '* * * * *', 'UTC', '{}', 'whenever')", (tenant_id,))


def test_definitions_are_applied_by_revision_never_downgraded(empty_db_url: str) -> None:
    from crondepot.db.migrations import definitions, migrate_all, pending_names

    with connect(empty_db_url) as conn:
        _, applied = migrate_all(conn)
        assert {d.name for d in applied} == {d.name for d in definitions()} >= {"claim_runs"}
        recorded = dict(conn.execute(
            "SELECT name, revision FROM crondepot_schema_definitions").fetchall())
        assert recorded == {d.name: d.revision for d in definitions()}
        assert migrate_all(conn) == ([], [])                     # nothing to do
        # A recorded revision below the file's: this version applies its own.
        conn.execute("UPDATE crondepot_schema_definitions SET revision = 0 "
                     "WHERE name = 'claim_runs'")
        assert pending_names(conn) == ["functions/claim_runs.sql"]
        assert [d.name for d in migrate_all(conn)[1]] == ["claim_runs"]
        # A newer one (a newer crondepot migrated): this older version refuses to touch it.
        conn.execute("UPDATE crondepot_schema_definitions SET revision = revision + 1 "
                     "WHERE name = 'claim_runs'")
        with pytest.raises(MigrationError, match="older than the schema"):
            migrate(conn)
        # The same revision with other text: someone forgot to raise the revision.
        conn.execute("UPDATE crondepot_schema_definitions SET revision = revision - 1, "
                     "checksum = 'x' WHERE name = 'claim_runs'")
        with pytest.raises(MigrationError, match="needs a new revision"):
            migrate(conn)


_DEFINER_PATHS = """
    SELECT p.oid::regprocedure::text,
           (SELECT c FROM unnest(p.proconfig) AS c WHERE c LIKE 'search_path=%%')
    FROM pg_proc AS p
    WHERE p.prosecdef AND p.pronamespace = current_schema()::regnamespace
    ORDER BY 1"""


def _unsafe_definers(conn: psycopg.Connection[object]) -> list[tuple[str, str | None]]:
    """SECURITY DEFINER functions whose search_path does not end in pg_temp: without
    pg_temp named, a temporary table of the caller is searched first."""
    return [(name, path) for name, path in conn.execute(_DEFINER_PATHS).fetchall()
            if path is None or not path.endswith("pg_temp")]


def test_every_security_definer_function_searches_pg_temp_last(db_url: str) -> None:
    with connect(db_url) as conn:
        names = [name for name, _ in conn.execute(_DEFINER_PATHS).fetchall()]
        assert any(n.startswith("crondepot_audit_summary(") for n in names)
        assert any(n.startswith("crondepot_runs_retire(") for n in names)
        assert _unsafe_definers(conn) == []


def test_migration_0041_pins_the_paths_an_earlier_release_left_open(empty_db_url: str) -> None:
    with connect(empty_db_url) as conn:
        migrate(conn)
        # As 0028 and 0031 left them on a database migrated by an earlier release.
        for fn in ("crondepot_audit_summary(bigint, text, text, jsonb)",
                   "crondepot_audit_connection_grants()"):
            conn.execute(f"ALTER FUNCTION {fn} SET search_path = \"$user\", public")
        assert len(_unsafe_definers(conn)) == 2
        conn.execute("DELETE FROM crondepot_schema_migrations WHERE version = 41")
        assert [m.version for m in migrate(conn)] == [41]
        assert _unsafe_definers(conn) == []
