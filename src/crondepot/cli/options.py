"""Options shared by command groups: where the database is, and machine-readable output."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from crondepot.audit import act_as, cli_actor
from crondepot.db.connect import DATA_DIR_ENV, URL_ENV, Database, connect, open_database


def add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", metavar="URL", default=os.environ.get(URL_ENV),
        help=f"PostgreSQL URL (env {URL_ENV}); without one, the embedded PostgreSQL is used",
    )
    parser.add_argument(
        "--data-dir", metavar="DIR", default=os.environ.get(DATA_DIR_ENV),
        help=f"data directory of the embedded PostgreSQL (env {DATA_DIR_ENV})",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


@contextmanager
def operator_connection(args: argparse.Namespace,
                        name: str = "crondepot-cli") -> Iterator[psycopg.Connection[Any]]:
    """A connection for an operator's command: what it changes is audited as this CLI user."""
    with database(args) as db, connect(db.url, application_name=name) as conn:
        act_as(conn, cli_actor())
        yield conn


@contextmanager
def database(args: argparse.Namespace) -> Iterator[Database]:
    db = open_database(args.db, args.data_dir)
    try:
        yield db
    finally:
        db.close()
