"""Options shared by command groups: where the database is, and machine-readable output."""

from __future__ import annotations

import argparse
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from crondepot.db import roles
from crondepot.db.connect import (
    ALL_TENANTS,
    DATA_DIR_ENV,
    POOLED_URL_ENV,
    URL_ENV,
    Database,
    TenantSettingError,
    connect,
    connect_pooled,
    connect_request_pooled,
    open_database,
    refuse_all_tenants_role,
)
from crondepot.db.migrations import require_current
from crondepot.db.restore import refuse_if_restored
from crondepot.runtime.lifecycle import Backoff
from crondepot.tenancy.audit import act_as, cli_actor

log = logging.getLogger("crondepot.cli")


def int_in(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse ``type`` for an integer from ``low`` to ``high``; the error names ``what``
    ("a port", "a limit") and the range, as every option of this CLI does."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"expected {what} from {low} to {high}, got {text!r}")
        return value
    return parse


def add_database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db", metavar="URL", default=os.environ.get(URL_ENV), type=_database_url,
        help=f"PostgreSQL URL (env {URL_ENV}); without one, the embedded PostgreSQL is used",
    )
    parser.add_argument(
        "--data-dir", metavar="DIR", default=os.environ.get(DATA_DIR_ENV),
        help=f"data directory of the embedded PostgreSQL (env {DATA_DIR_ENV})",
    )


WORKER_POOLED_HELP = (
    f"URL of a transaction-mode PgBouncer in front of --db, as a role that sees every tenant "
    f"(env {POOLED_URL_ENV}); claims, heartbeats, outcomes and ticks go through it, LISTEN "
    f"and maintenance stay on --db (default: --db for all)")
API_POOLED_HELP = (
    f"URL of a transaction-mode PgBouncer in front of --db, as the API's own role (never the "
    f"workers' pooled role, which sees every tenant; env {POOLED_URL_ENV}): every request's "
    f"database work goes through it as one transaction; --db stays direct and is only "
    f"checked at start (default: requests on --db)")


def add_pooled_database(parser: argparse.ArgumentParser, *,
                        text: str = WORKER_POOLED_HELP) -> None:
    """The transaction-mode pooler in front of the database: for the hot path of the
    cross-tenant processes (worker, scheduler), or the API's requests; db/connect.py says
    what goes through it."""
    parser.add_argument(
        "--pooled-db", metavar="URL", default=os.environ.get(POOLED_URL_ENV) or None,
        type=_database_url, help=text)


def check_pooled_database(url: str | None, name: str, *, api: bool = False) -> str | None:
    """A message saying why the pooled URL cannot be used, or None (also when not given).
    ``api``: the API's, whose role must NOT see every tenant by default."""
    if not url:
        return None
    try:
        if api:
            with connect_request_pooled(url, application_name=f"{name}-check") as conn:
                refuse_all_tenants_role(conn)
        else:
            connect_pooled(url, application_name=f"{name}-check").close()
    except TenantSettingError as exc:
        return f"--pooled-db: {exc}"
    except psycopg.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"--pooled-db: cannot connect through the pooler: {first}"
    return None


def _database_url(text: str) -> str:
    """A PostgreSQL URL or conninfo string, parsed here: a malformed one is a usage error
    naming --db (or CRONDEPOT_DATABASE_URL), not a traceback from the driver."""
    if not text:
        return text            # empty: the embedded PostgreSQL
    try:
        conninfo_to_dict(text)
    except psycopg.ProgrammingError as exc:
        raise argparse.ArgumentTypeError(
            f"expected a PostgreSQL URL like postgresql://user@host:5432/db: {exc}") from None
    return text


def add_runtime_role(parser: argparse.ArgumentParser) -> None:
    """The role the processes run as, for the commands that set it up (migrate, up)."""
    parser.add_argument(
        "--runtime-role", metavar="NAME", type=_role_name,
        default=os.environ.get(roles.RUNTIME_ROLE_ENV) or roles.DEFAULT_RUNTIME_ROLE,
        help=f"the role the API, schedulers and workers connect as: created if missing, "
             f"granted only what they need (env {roles.RUNTIME_ROLE_ENV}, default "
             f"{roles.DEFAULT_RUNTIME_ROLE})")
    parser.add_argument(
        "--runtime-password", metavar="PASSWORD",
        default=os.environ.get(roles.RUNTIME_PASSWORD_ENV) or None,
        help=f"give the runtime role this password (env {roles.RUNTIME_PASSWORD_ENV}; "
             "prefer it: a command line is visible to other users of the host)")


def _role_name(text: str) -> str:
    try:
        return roles.role_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON for scripts")


@contextmanager
def operator_connection(args: argparse.Namespace,
                        name: str = "crondepot-cli") -> Iterator[psycopg.Connection[Any]]:
    """A connection for an operator's command: what it changes is audited as this CLI user."""
    with database(args) as db, connect(db.url, application_name=name,
                                                tenants=ALL_TENANTS) as conn:
        act_as(conn, cli_actor())
        yield conn


@contextmanager
def database(args: argparse.Namespace) -> Iterator[Database]:
    db = open_database(args.db, args.data_dir)
    try:
        yield db
    finally:
        db.close()


def check_schema(db: Database, name: str, *, patience: float = 60.0) -> None:
    """Before a long-running process starts: wait (with backoff) for the database to accept
    connections — it may be restarting — then refuse a schema older than the code, or a
    database restored from a backup that the operator has not yet said what to do with
    (crondepot.db.restore)."""
    backoff = Backoff()
    deadline = time.monotonic() + patience
    while True:
        try:
            with connect(db.url, application_name=f"{name}-check") as conn:
                require_current(conn)
                refuse_if_restored(conn)
            return
        except psycopg.OperationalError as exc:
            if time.monotonic() >= deadline:
                raise
            wait = backoff.next()
            log.warning("database not reachable yet, retrying in %.1fs: %s", wait,
                        str(exc).strip().splitlines()[0] if str(exc).strip() else exc)
            time.sleep(wait)


def instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO-8601 instant, got {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no UTC offset; add Z or +HH:MM")
    return value


def duration(text: str, *, low: float = 0.01, high: float = 3600) -> float:
    """``2s``, ``500ms``, ``5m`` or plain seconds, from ``low`` to ``high`` seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0}
    for suffix in ("ms", "s", "m"):
        if text.endswith(suffix):
            number, scale = text[: -len(suffix)], units[suffix]
            break
    else:
        number, scale = text, 1.0
    try:
        value = float(number) * scale
    except ValueError:
        value = -1.0
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(
            f"expected a duration from 10ms to 60m like 2s or 500ms, got {text!r}")
    return value


def duration_or_off(text: str) -> float:
    return 0.0 if text.strip() in ("0", "off") else duration(text)


def window(text: str) -> float:
    units = {"m": 60.0, "h": 3600.0, "d": 86400.0}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1:] in units else float(text)
    except ValueError:
        value = -1.0
    if not 60 <= value <= 31 * 86400:
        raise argparse.ArgumentTypeError(
            f"expected a duration from 1m to 31d like 90m, 6h or 2d, got {text!r}")
    return value
