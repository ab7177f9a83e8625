"""``crondepot migrate``: bring the schema up to date (safe to run any number of times)."""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.cli.options import add_database, add_json, operator_connection
from crondepot.cli.output import print_json
from crondepot.db import migrations


def register(commands: Any) -> None:
    parser = commands.add_parser("migrate", help="apply pending schema migrations")
    add_database(parser)
    add_json(parser)
    parser.add_argument("--check", action="store_true",
                        help="apply nothing; exit 1 if migrations are pending")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with operator_connection(args, "crondepot-migrate") as conn:
        if args.check:
            todo = migrations.pending(conn)
            stale = migrations.stale_definitions(conn)
            _report([m.version for m in todo], [d.name for d in stale], args.json,
                    verb="pending")
            return 1 if todo or stale else 0
        done, redefined = migrations.migrate_all(conn)
        _report([m.version for m in done], [d.name for d in redefined], args.json,
                verb="applied")
        return 0


def _report(versions: list[int], functions: list[str], as_json: bool, *, verb: str) -> None:
    if as_json:
        print_json({verb: versions, "functions": functions})
    elif versions or functions:
        print(f"{verb}: " + ", ".join([f"{v:04d}" for v in versions]
                                      + [f"functions/{f}.sql" for f in functions]))
    else:
        print("schema is up to date" if verb == "applied" else "nothing pending")
