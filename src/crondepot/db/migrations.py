"""The migration runner: versioned SQL files applied once, in order, by one process at a time.

Files are ``db/sql/migrations/NNNN_name.sql``. Each is applied in its own transaction and
recorded in ``crondepot_schema_migrations`` with a checksum, so a second run does nothing
and a file edited after it was applied is reported instead of silently ignored. A session
advisory lock makes concurrent ``crondepot migrate`` processes (every host starting at once)
take turns.

SQL functions are not migrations: each lives in one file, ``db/sql/functions/name.sql``
(a *definition*, like Flyway's repeatable migrations), applied after the migrations and
recorded in ``crondepot_schema_definitions``. So the current code of a function is in one
place, and changing it is editing that file, not copying it into a new migration. A
definition must be safe to apply again (``CREATE OR REPLACE``) and keep its signature and
result columns, so processes of the previous release keep working while a new one migrates.

Each file starts with ``-- revision: N``. A higher revision than the one recorded is
applied; a lower one is refused (an older crondepot must not put back an older function
under a newer fleet); the same revision with other text is refused too (a change that forgot
its new revision would otherwise be applied by some hosts and reverted by others).

Last, every migrate grants the runtime role (db/roles.py) what the processes need on the
schema as it now is, so a table a migration adds is usable by them without being named.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.db import roles
from crondepot.db.queries import Q

_FILE = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


class MigrationError(CrondepotError):
    """The database's recorded migrations do not match the files shipped with this version."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


_REVISION = re.compile(r"^-- revision: (\d+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True, kw_only=True)
class Definition:
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()

    @property
    def revision(self) -> int:
        found = _REVISION.search(self.sql)
        if found is None:
            raise MigrationError(f"functions/{self.name}.sql has no '-- revision: N' line")
        return int(found[1])


def definitions() -> list[Definition]:
    folder = resources.files("crondepot.db") / "sql" / "functions"
    return sorted((Definition(name=entry.name.removesuffix(".sql"), sql=entry.read_text())
                   for entry in folder.iterdir() if entry.name.endswith(".sql")),
                  key=lambda d: d.name)


def schema_checksum() -> str:
    """One checksum over every migration, definition and the runtime role's grants: equal
    checksums, equal schemas."""
    parts = ([m.checksum for m in available()] + [d.checksum for d in definitions()]
             + [hashlib.sha256(Q.grant_runtime.encode()).hexdigest()])
    return hashlib.sha256("".join(parts).encode()).hexdigest()


def schema_revision() -> int:
    """The schema revision this release brings: its highest migration. A process runs only
    on a database with exactly this release's migrations applied (``require_current``), so
    it is also the highest migration applied where the process started."""
    folder = resources.files("crondepot.db") / "sql" / "migrations"
    return max(int(match[1]) for entry in folder.iterdir()
               if (match := _FILE.fullmatch(entry.name)))


def available() -> list[Migration]:
    folder = resources.files("crondepot.db") / "sql" / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE.fullmatch(entry.name)
        if match:
            found.append(
                Migration(version=int(match[1]), name=match[2], sql=entry.read_text())
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migration files share a version: {versions}")
    return found


def migrate(conn: psycopg.Connection[Any], *,
            runtime_role: str = roles.DEFAULT_RUNTIME_ROLE,
            runtime_password: str | None = None) -> list[Migration]:
    """Apply every pending migration and changed definition, and grant the runtime role;
    return the migrations this call applied (empty when none)."""
    return migrate_all(conn, runtime_role=runtime_role, runtime_password=runtime_password)[0]


def migrate_all(conn: psycopg.Connection[Any], *,
                runtime_role: str = roles.DEFAULT_RUNTIME_ROLE,
                runtime_password: str | None = None,
                ) -> tuple[list[Migration], list[Definition]]:
    """Apply every pending migration, then every definition whose text changed, then
    create (or take) ``runtime_role`` and grant it; return the migrations and definitions
    this call applied.

    A role that exists is checked before anything is applied, so one that may not be the
    runtime role (a superuser, the owner) changes nothing. ``conn`` must be in autocommit
    mode: the advisory lock is held by the session across the per-migration transactions.
    """
    if not conn.autocommit:
        raise ValueError("migrate() needs an autocommit connection")
    conn.execute(Q.lock_migrations)
    try:
        if roles.exists(conn, runtime_role):
            roles.check(conn, runtime_role, schema_privileges=False)
        roles.ensure(conn, runtime_role, runtime_password)
        conn.execute(Q.create_schema_migrations)
        conn.execute(Q.create_schema_definitions)
        applied = {row[0]: (row[1], row[2]) for row in conn.execute(Q.applied_migrations)}
        _check_applied(applied)
        done: list[Migration] = []
        for migration in available():
            if migration.version in applied:
                continue
            with conn.transaction():
                conn.execute(Q.safe_search_path)
                conn.execute(migration.sql.encode())
                conn.execute(
                    Q.record_migration,
                    {"version": migration.version, "name": migration.name,
                     "checksum": migration.checksum},
                )
            done.append(migration)
        redefined = stale_definitions(conn)
        for definition in redefined:
            with conn.transaction():
                conn.execute(Q.safe_search_path)
                conn.execute(definition.sql.encode())
                conn.execute(Q.record_definition, {"name": definition.name,
                                                   "checksum": definition.checksum,
                                                   "revision": definition.revision})
        roles.grant(conn, runtime_role)
        return done, redefined
    finally:
        conn.execute(Q.unlock_migrations)


def pending(conn: psycopg.Connection[Any]) -> list[Migration]:
    """Migrations not yet applied (the schema table may not exist yet)."""
    exists = conn.execute(Q.schema_migrations_exists).fetchone()
    if not exists or not exists[0]:
        return available()
    applied = {row[0]: (row[1], row[2]) for row in conn.execute(Q.applied_migrations)}
    _check_applied(applied)
    return [m for m in available() if m.version not in applied]


def stale_definitions(conn: psycopg.Connection[Any]) -> list[Definition]:
    """The definitions this version would apply; MigrationError if the database holds a
    newer revision of one, or the same revision with other text."""
    exists = conn.execute(Q.schema_definitions_exists).fetchone()
    recorded: dict[str, tuple[int, str]] = {
        name: (revision, checksum)
        for name, revision, checksum in conn.execute(Q.applied_definitions)
    } if exists and exists[0] else {}
    stale = []
    for definition in definitions():
        revision, checksum = recorded.get(definition.name, (0, ""))
        if definition.revision > revision:
            stale.append(definition)
        elif definition.revision < revision:
            raise MigrationError(
                f"the database has revision {revision} of functions/{definition.name}.sql; "
                f"this version of crondepot has revision {definition.revision}: it is older "
                "than the schema")
        elif definition.checksum != checksum:
            raise MigrationError(
                f"functions/{definition.name}.sql revision {revision} differs from the one "
                "applied: a changed definition needs a new revision")
    return stale


def pending_names(conn: psycopg.Connection[Any]) -> list[str]:
    """What ``migrate`` would apply: migrations ("0009_ledger"), then definitions whose
    text changed ("functions/claim_runs.sql")."""
    return ([f"{m.version:04d}_{m.name}" for m in pending(conn)]
            + [f"functions/{d.name}.sql" for d in stale_definitions(conn)])


def require_current(conn: psycopg.Connection[Any]) -> None:
    """Refuse to run a process against a schema older than its code, or as a role that was
    never granted the runtime role's privileges."""
    try:
        todo = pending_names(conn)
    except psycopg.errors.InsufficientPrivilege:
        user = conn.info.user
        raise MigrationError(
            f"role {user} may not read crondepot's tables: run `crondepot migrate "
            f"--runtime-role {user}` as the schema's owner to grant it the runtime "
            "privileges") from None
    if todo:
        names = ", ".join(todo)
        raise MigrationError(f"the database schema is not up to date (pending: {names}); "
                             "run `crondepot migrate` first")


def _check_applied(applied: dict[int, tuple[str, str]]) -> None:
    shipped = {m.version: m for m in available()}
    for version, (name, checksum) in sorted(applied.items()):
        migration = shipped.get(version)
        if migration is None:
            raise MigrationError(
                f"the database has migration {version:04d}_{name}, which this version of "
                "crondepot does not know: it is older than the schema"
            )
        if migration.checksum != checksum:
            raise MigrationError(
                f"migration {version:04d}_{name} was changed after it was applied "
                f"(recorded checksum {checksum[:12]}…, file {migration.checksum[:12]}…)"
            )
