"""The two database roles: the owner, which migrates, and the runtime role, which runs.

The owner (the role ``crondepot migrate`` connects as) creates and owns every table and
function. The runtime role is what the API, the schedulers, the workers and the operator's
commands connect as: it may read and write crondepot's rows, and nothing else. It owns
nothing, so it cannot ALTER a table or disable a trigger; it may only add to and read
``audit_log``, so history cannot be rewritten; it may not create or drop tables.

``migrate`` creates the runtime role when it does not exist (or takes an existing one,
``--runtime-role NAME``, after checking that it has none of the powers above) and then
grants it on every table, sequence and function of the schema, so the tables later
migrations add are covered without being named. The embedded database does the same
without being asked, and hands the runtime role's URL to every process but migrate.

Role names go into statements as identifiers composed by psycopg (``sql.Identifier``): a
role cannot be a query parameter. This module never builds SQL out of strings otherwise.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from crondepot.base.errors import CrondepotError
from crondepot.db.queries import Q

DEFAULT_RUNTIME_ROLE = "crondepot_runtime"
RUNTIME_ROLE_ENV = "CRONDEPOT_RUNTIME_ROLE"
RUNTIME_PASSWORD_ENV = "CRONDEPOT_RUNTIME_PASSWORD"

_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class RoleError(CrondepotError):
    """The runtime role cannot be created, or has powers it must not have."""


def role_name(text: str) -> str:
    """``text`` if it is a plain role name (lower case, as PostgreSQL folds unquoted names),
    else a ``ValueError`` that says what was expected."""
    if not _NAME.fullmatch(text):
        raise ValueError(f"expected a role name of lowercase letters, digits and _ (at most "
                         f"63, not starting with a digit), got {text!r}")
    return text


def runtime_url(owner_url: str, role: str, password: str | None = None) -> str:
    """``owner_url`` with the runtime role as its user: same hosts, database and options.

    The owner's password is dropped, never reused: without ``password`` libpq finds the
    runtime role's in ~/.pgpass, or the server trusts the connection (the embedded one)."""
    params: dict[str, Any] = conninfo_to_dict(owner_url)
    params.pop("password", None)
    params["user"] = role
    if password:
        params["password"] = password
    return make_conninfo("", **params)


def exists(conn: psycopg.Connection[Any], role: str) -> bool:
    return conn.execute(Q.runtime_role_exists, {"role": role}).fetchone() is not None


def ensure(conn: psycopg.Connection[Any], role: str, password: str | None = None) -> bool:
    """Create ``role`` if it does not exist (True when this call created it); with
    ``password``, give it that password either way."""
    created = False
    if not exists(conn, role):
        try:
            conn.execute(_compose(Q.create_runtime_role, conn, role, password))
            created = True
        except (psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            # Roles belong to the server: a migrate of another database on it (or a second
            # process) created it between our look and our create. Taken as it is.
            pass
        except psycopg.errors.InsufficientPrivilege as exc:
            raise RoleError(
                f"cannot create the runtime role {role}: {_first_line(exc)}. Create it as a "
                f"user who may (CREATE ROLE {role} LOGIN PASSWORD '…'), or name an existing "
                "role with --runtime-role") from None
        if created:
            return True
    if password:
        try:
            conn.execute(_compose(Q.set_runtime_password, conn, role, password))
        except psycopg.errors.InsufficientPrivilege as exc:
            raise RoleError(f"cannot set the password of the runtime role {role}: "
                            f"{_first_line(exc)}") from None
    return created


def problems(conn: psycopg.Connection[Any], role: str, *,
             schema_privileges: bool = True) -> list[str]:
    """What would let ``role`` change the schema or the audit log in this database (empty
    when nothing would). ``schema_privileges=False`` leaves out what ``grant`` revokes
    anyway (CREATE in the schema), for a look before it runs."""
    row = conn.execute(Q.runtime_role_powers, {"role": role}).fetchone()
    if row is None:
        return [f"role {role} does not exist"]
    (is_migrator, superuser, createrole, writes_all_data, owns_database, owns_schema, owns,
     creates) = row
    found = []
    if is_migrator:
        found.append(f"{role} is the role migrate connects as, which owns the schema")
    if superuser:
        found.append(f"{role} is a superuser")
    if createrole:
        found.append(f"{role} has CREATEROLE (it could make itself a member of the owner)")
    if writes_all_data and not superuser:
        found.append(f"{role} is a member of pg_write_all_data (it could update and delete "
                     "audit entries)")
    if owns_database and not is_migrator:
        found.append(f"{role} owns the database, or is a member of its owner")
    if owns_schema and not is_migrator:
        found.append(f"{role} owns the schema, or is a member of its owner")
    if owns and not is_migrator:
        found.append(f"{role} owns, or is a member of the owner of: {', '.join(owns)}")
    if creates and schema_privileges and not superuser:
        found.append(f"{role} may CREATE in the schema")
    return found


def check(conn: psycopg.Connection[Any], role: str, *, schema_privileges: bool = True) -> None:
    """Refuse a runtime role that has any power ``problems`` finds."""
    found = problems(conn, role, schema_privileges=schema_privileges)
    if found:
        raise RoleError(f"{role} cannot be the runtime role: " + "; ".join(found))


def grant(conn: psycopg.Connection[Any], role: str) -> None:
    """Grant ``role`` what the runtime needs on the schema as it is now, and check that it
    has nothing more; in one transaction, so a refused role is left as it was."""
    with conn.transaction():
        conn.execute(_compose(Q.grant_runtime, conn, role, None))
        check(conn, role)


def _compose(query: str, conn: psycopg.Connection[Any], role: str,
             password: str | None) -> sql.Composed:
    database, schema = conn.execute(Q.where_objects_live).fetchone() or ("", "")
    verifier: sql.Composable = sql.SQL("")
    if password:
        encrypted = conn.pgconn.encrypt_password(password.encode(), role.encode())
        verifier = sql.SQL("PASSWORD {}").format(sql.Literal(encrypted.decode()))
    return sql.SQL(query).format(role=sql.Identifier(role), database=sql.Identifier(database),
                                 schema=sql.Identifier(schema), password=verifier)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
