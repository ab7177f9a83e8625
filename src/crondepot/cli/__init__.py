"""The ``crondepot`` command: one module per command group, each adding its sub-commands.

Every command that prints data takes ``--json``; every option that names a database also
reads ``CRONDEPOT_*`` variables, so a deployment can configure processes by environment.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

import psycopg

from crondepot.cli import (
    api,
    backfill,
    db,
    dlq,
    holds,
    importing,
    jobs,
    limits,
    maintenance,
    migrate,
    next_fires,
    runs,
    scheduler,
    status,
    tenants,
    up,
    verify,
    worker,
)
from crondepot.cli.output import fail
from crondepot.errors import CrondepotError
from crondepot.jsontext import unstorable

_GROUPS = (up, migrate, scheduler, worker, api, tenants, jobs, runs, importing, status, dlq,
           limits, holds, next_fires, verify, backfill, maintenance, db)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crondepot",
        description="Cron at scale on PostgreSQL: no run lost to a crash, no run sent twice.",
    )
    parser.add_argument("--version", action="version", version=f"crondepot {version()}",
                        help="print the installed version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in _GROUPS:
        group.register(commands)
    return parser


def version() -> str:
    """The installed package's version (its metadata, so it is never out of step)."""
    try:
        return metadata.version("crondepot")
    except metadata.PackageNotFoundError:       # run from a source tree never installed
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    for word in words:
        if unstorable(word) is not None:
            # bytes that are not UTF-8 (decoded with surrogates): PostgreSQL cannot take them
            return fail(f"argument {word!r} is not UTF-8 text")
    args = build_parser().parse_args(words)
    as_json = getattr(args, "json", False)
    try:
        code: int = args.run(args)
    except CrondepotError as exc:
        return fail(str(exc), as_json=as_json)
    except psycopg.OperationalError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return fail(f"database connection failed: {detail}", as_json=as_json, code=3)
    except (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedFunction) as exc:
        # the database is reachable but holds no crondepot schema (or an older one)
        detail = str(exc).strip().splitlines()[0]
        return fail(f"the database has no crondepot schema ({detail}): run crondepot "
                    "migrate", as_json=as_json, code=3)
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
