"""``crondepot db url|stop``: find or stop the database crondepot uses."""

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
