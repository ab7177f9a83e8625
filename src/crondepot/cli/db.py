"""``crondepot db url|status|stop``: find, look at or stop the database crondepot uses."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from crondepot.cli.shared.options import add_database, add_json, database
from crondepot.cli.shared.output import print_json
from crondepot.db import embedded


def register(commands: Any) -> None:
    parser = commands.add_parser("db", help="the database crondepot uses")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    url = actions.add_parser("url", help="print the connection URL of the runtime role "
                                          "(starts the embedded server)")
    add_database(url)
    url.add_argument("--owner", action="store_true",
                     help="print the schema owner's URL instead (what migrate uses)")
    add_json(url)
    url.set_defaults(run=run_url)
    status = actions.add_parser("status", help="is the embedded PostgreSQL running, and is "
                                               "a crondepot up using it")
    add_database(status)
    add_json(status)
    status.set_defaults(run=run_status)
    stop = actions.add_parser("stop", help="stop the embedded PostgreSQL")
    add_database(stop)
    stop.set_defaults(run=run_stop)


def run_url(args: argparse.Namespace) -> int:
    with database(args) as db:
        if args.json:
            print_json({"url": db.url, "owner_url": db.owner_url,
                        "embedded": db.embedded is not None})
        else:
            print(db.owner_url if args.owner else db.url)
    return 0


def run_stop(args: argparse.Namespace) -> int:
    folder = Path(args.data_dir) if args.data_dir else embedded.default_data_dir()
    stopped = embedded.stop(folder)
    print(f"stopped the embedded PostgreSQL in {folder}" if stopped
          else f"no embedded PostgreSQL running in {folder}")
    return 0


def run_status(args: argparse.Namespace) -> int:
    """Exit 0 when the embedded server runs, 1 when it does not (for scripts)."""
    folder = (Path(args.data_dir) if args.data_dir else embedded.default_data_dir()
              ).expanduser().resolve()
    server, up = embedded.server_pid(folder), embedded.up_holder(folder)
    if args.json:
        print_json({"data_dir": str(folder), "running": server is not None,
                    "server_pid": server, "up_pid": up})
    elif server is None:
        print(f"no embedded PostgreSQL running in {folder}")
    else:
        print(f"embedded PostgreSQL running in {folder} (pid {server})"
              + ("; crondepot db stop stops it" if up is None else
                 f"; used by crondepot up{f' (pid {up})' if up else ''}, which stops it on "
                 "exit"))
    return 0 if server is not None else 1
