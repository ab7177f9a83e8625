"""The ``crondepot`` command: one module per command group, each adding its sub-commands.

Every command that prints data takes ``--json``; every option that names a database also
reads ``CRONDEPOT_*`` variables, so a deployment can configure processes by environment.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.base.jsontext import unstorable
from crondepot.cli.shared.output import fail

# Each command and the module (in this package) that registers it, in the order ``--help``
# lists them. A command imports its own module only: a worker process does not load the
# API's, the importer's or the job editor's modules (and the HTTP client they bring), which
# was most of a worker's start-up.
_COMMANDS = {"up": "up", "migrate": "migrate", "scheduler": "scheduler", "worker": "worker",
             "api": "api", "tenants": "tenants", "jobs": "jobs", "runs": "runs",
             "import": "import_", "status": "status", "dlq": "dlq", "limits": "limits",
             "calendars": "calendars", "hosts": "hosts", "next": "next", "verify": "verify",
             "backfill": "backfill", "prune": "prune", "db": "db", "apply": "apply",
             "export": "export", "connections": "connections", "notices": "notices",
             "forecast": "forecast"}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, given a known ``command``, only that command's part (the
    others' modules are not imported)."""
    parser = argparse.ArgumentParser(
        prog="crondepot",
        description="Cron at scale on PostgreSQL: no run lost to a crash, no run sent twice.",
    )
    parser.add_argument("--version", action=_Version,
                        help="print the version and the schema revision it needs, and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = [_COMMANDS[command]] if command in _COMMANDS else list(_COMMANDS.values())
    for module in modules:
        importlib.import_module(f"crondepot.cli.{module}").register(commands)
    return parser


class _Version(argparse.Action):
    """``--version``: the release and the schema revision it needs (its highest migration),
    read only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                         nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(version_line())
        parser.exit()


def version_line() -> str:
    """``crondepot 0.1.0 (schema revision 31)``. The version is the running code's
    (``base/version.py``, which ``pyproject.toml`` reads at build time: one source)."""
    from crondepot.base.version import __version__
    from crondepot.db.migrations import schema_revision

    return f"crondepot {__version__} (schema revision {schema_revision()})"


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    for word in words:
        if unstorable(word) is not None:
            # bytes that are not UTF-8 (decoded with surrogates): PostgreSQL cannot take them
            return fail(f"argument {word!r} is not UTF-8 text")
    # The command is the first word (the top level takes no option but --help and
    # --version, which build the whole parser).
    args = build_parser(words[0] if words else None).parse_args(words)
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
