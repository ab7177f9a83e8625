"""The migration runner: versioned SQL files applied once, in order, by one process at a time.

Files are ``db/sql/migrations/NNNN_name.sql``. Each is applied in its own transaction and
recorded in ``crondepot_schema_migrations`` with a checksum, so a second run does nothing
and a file edited after it was applied is reported instead of silently ignored. A session
advisory lock makes concurrent ``crondepot migrate`` processes (every host starting at once)
take turns.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from crondepot.db.queries import Q
from crondepot.errors import CrondepotError

_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


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


def available() -> list[Migration]:
    folder = resources.files("crondepot.db") / "sql" / "migrations"
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(
                Migration(version=int(match[1]), name=match[2], sql=entry.read_text())
            )
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migration files share a version: {versions}")
    return found


def migrate(conn: psycopg.Connection[Any]) -> list[Migration]:
    """Apply every pending migration; return those this call applied (empty when none).

    ``conn`` must be in autocommit mode: the advisory lock is held by the session across the
    per-migration transactions.
    """
    if not conn.autocommit:
        raise ValueError("migrate() needs an autocommit connection")
    conn.execute(Q.lock_migrations)
    try:
        conn.execute(Q.create_schema_migrations)
        applied = {row[0]: (row[1], row[2]) for row in conn.execute(Q.applied_migrations)}
        _check_applied(applied)
        done: list[Migration] = []
        for migration in available():
            if migration.version in applied:
                continue
            with conn.transaction():
                conn.execute(migration.sql.encode())
                conn.execute(
                    Q.record_migration,
                    {"version": migration.version, "name": migration.name,
                     "checksum": migration.checksum},
                )
            done.append(migration)
        return done
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


def require_current(conn: psycopg.Connection[Any]) -> None:
    """Refuse to run a process against a schema older than its code."""
    todo = pending(conn)
    if todo:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in todo)
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
