"""``crondepot migrate``: bring the schema up to date and grant the runtime role (safe to run
any number of times).

It connects as the schema's owner (``--db`` names the owner; the embedded database's owner is
its superuser) and leaves the runtime role, created if missing, with exactly what the
processes need (db/roles.py).
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.cli.shared.options import add_database, add_json, add_runtime_role, database
from crondepot.cli.shared.output import print_json
from crondepot.db import ALL_TENANTS, connect, migrations, roles
from crondepot.tenancy.audit import act_as, cli_actor


def register(commands: Any) -> None:
    parser = commands.add_parser("migrate", help="apply pending schema migrations and grant "
                                                 "the runtime role (connect as the owner)")
    add_database(parser)
    add_runtime_role(parser)
    add_json(parser)
    parser.add_argument("--check", action="store_true",
                        help="apply nothing; exit 1 if migrations are pending")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    embedded_role(not args.db, args.runtime_role)
    with database(args) as db, \
            connect(db.owner_url, application_name="crondepot-migrate",
                    tenants=ALL_TENANTS) as conn:
        act_as(conn, cli_actor())
        if args.check:
            todo = migrations.pending(conn)
            stale = migrations.stale_definitions(conn)
            _report([m.version for m in todo], [d.name for d in stale], None, args.json,
                    verb="pending")
            return 1 if todo or stale else 0
        done, redefined = migrations.migrate_all(
            conn, runtime_role=args.runtime_role, runtime_password=args.runtime_password)
        _report([m.version for m in done], [d.name for d in redefined], args.runtime_role,
                args.json, verb="applied")
        return 0


def embedded_role(embedded: bool, role: str) -> None:
    """The embedded database's processes always connect as the default runtime role."""
    if embedded and role != roles.DEFAULT_RUNTIME_ROLE:
        raise roles.RoleError(
            f"--runtime-role {role}: the embedded database's runtime role is always "
            f"{roles.DEFAULT_RUNTIME_ROLE}; name another role only with --db")


def _report(versions: list[int], functions: list[str], role: str | None, as_json: bool, *,
            verb: str) -> None:
    if as_json:
        print_json({verb: versions, "functions": functions}
                   | ({"runtime_role": role} if role else {}))
        return
    if versions or functions:
        print(f"{verb}: " + ", ".join([f"{v:04d}" for v in versions]
                                      + [f"functions/{f}.sql" for f in functions]))
    else:
        print("schema is up to date" if verb == "applied" else "nothing pending")
    if role:
        print(f"runtime role {role}: granted what the API, schedulers and workers need")
