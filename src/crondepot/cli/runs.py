"""``crondepot runs list|show``: a job's runs, newest first, and one run by id.

The reads the HTTP API serves (``crondepot.api.reads``), scoped by tenant: another tenant's
job or run is "not found", like a missing one. Cursors are the API's ``next_cursor``.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from rich.table import Table

from crondepot.cli.jobs import console, get_job, iso, utc_text
from crondepot.cli.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.output import print_json
from crondepot.cli.tenants import add_tenant, tenant_id
from crondepot.errors import CrondepotError
from crondepot.job.store import JobNotFound


class InvalidCursor(CrondepotError, ValueError):
    pass


def register(commands: Any) -> None:
    parser = commands.add_parser("runs", help="runs of a tenant's jobs: list, show")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="a job's runs, newest first")
    _common(listing)
    listing.add_argument("--job", type=int, required=True, dest="job_id", metavar="ID",
                         help="the job")
    listing.add_argument("--limit", type=int_in(1, 1000, "a limit"), default=20,
                         help="at most this many, 1 to 1000 (20)")
    listing.add_argument("--cursor", help="next_cursor of the previous page")
    listing.set_defaults(run=run_list)
    showing = actions.add_parser("show", help="one run: its state, attempts and last error")
    _common(showing)
    showing.add_argument("run_id", metavar="RUN_ID")
    showing.set_defaults(run=run_show)


def _common(parser: argparse.ArgumentParser) -> None:
    add_database(parser)
    add_json(parser)
    add_tenant(parser)


def run_list(args: argparse.Namespace) -> int:
    # imported here: crondepot.api loads FastAPI
    from crondepot.api.reads import encode_run_cursor, job_runs

    before = _decode(args.cursor)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        job = get_job(conn, tenant, args.job_id)
        rows = job_runs(conn, tenant, job.id, before=before, limit=args.limit + 1)
    page = rows[:args.limit]
    next_cursor = encode_run_cursor(page[-1]["nominal_at"], page[-1]["run_id"]) \
        if len(rows) > args.limit else None
    if args.json:
        print_json({"items": [run_json(r) for r in page], "next_cursor": next_cursor})
        return 0
    title = f"runs of job {job.id}" + (f" ({job.spec.key})" if job.spec.key else "")
    table = Table(title=title)
    table.add_column("run id", no_wrap=True)
    table.add_column("status")
    table.add_column("scheduled (UTC)", no_wrap=True)
    table.add_column("due (UTC)", no_wrap=True)
    table.add_column("attempt", justify="right")
    table.add_column("finished (UTC)")
    table.add_column("error", overflow="fold")
    for r in page:
        table.add_row(r["run_id"], _status(r), utc_text(r["nominal_at"]), utc_text(r["due_at"]),
                      str(r["attempt"]), utc_text(r["finished_at"]), _error(r))
    console().print(table)
    if next_cursor is not None:
        print(f"more: --cursor {next_cursor}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from crondepot.api.reads import RunNotFound, get_run

    with operator_connection(args) as conn:
        try:
            row = get_run(conn, tenant_id(conn, args.tenant), args.run_id)
        except RunNotFound:
            raise JobNotFound(f"run {args.run_id} not found") from None
    if args.json:
        print_json(run_json(row))
        return 0
    for name, value in row.items():
        if value is None:
            continue
        text = json.dumps(value) if isinstance(value, dict | list) else \
            utc_text(value) if isinstance(value, datetime) else str(value)
        print(f"{name:<17} {text}")
    return 0


def run_json(row: dict[str, Any]) -> dict[str, Any]:
    """A run as the HTTP API returns it (``crondepot.api.render.run_json``)."""
    return {name: iso(value) if isinstance(value, datetime) else value
            for name, value in row.items()}


def _status(row: dict[str, Any]) -> str:
    return f"{row['status']} ({row['skip_reason']})" if row.get("skip_reason") else row["status"]


def _error(row: dict[str, Any]) -> str:
    if not row.get("last_error") and not row.get("error_class"):
        return ""
    text = f"{row.get('error_class') or 'error'}: {row.get('last_error') or ''}"
    return text if len(text) <= 80 else text[:77] + "..."


def _decode(cursor: str | None) -> tuple[datetime, str] | None:
    from crondepot.api.reads import decode_run_cursor

    if cursor is None:
        return None
    try:
        return decode_run_cursor(cursor)
    except ValueError:
        raise InvalidCursor("--cursor: expected a next_cursor value") from None

