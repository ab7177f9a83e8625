"""``crondepot runs list|show|retry``: runs across jobs or of one job, one run by id, and
retrying a failed or dead run.

The reads the HTTP API serves (``crondepot.runs.reads``), scoped by tenant: another tenant's
job or run is "not found", like a missing one. Cursors are the API's ``next_cursor``.

``runs list`` with any of ``--status``, ``--since``, ``--until``, ``--error`` (or without
``--job``) lists the tenant's runs across jobs, newest first by when they ended (a run not
ended yet: by its due time), like ``GET /v1/runs``; ``runs list --job ID`` alone is the job's
history by nominal time, like ``GET /v1/jobs/{id}/runs``. A cursor belongs to the listing
that printed it.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.table import Table

from crondepot.base.errors import CrondepotError
from crondepot.base.vocab import RUN_STATES
from crondepot.cli.jobs import console, get_job, utc_text
from crondepot.cli.shared.job_ref import HELP as JOB_HELP
from crondepot.cli.shared.job_ref import job_ref, resolve
from crondepot.cli.shared.options import (
    add_database,
    add_json,
    instant,
    int_in,
    operator_connection,
)
from crondepot.cli.shared.output import print_json, print_more
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.job.store import JobNotFound
from crondepot.runs.reads import (
    RunFilter,
    RunNotFound,
    encode_run_cursor,
    get_run,
    job_runs,
    run_cursor_or_none,
    runs_page,
)
from crondepot.runs.render import run_json


class InvalidCursor(CrondepotError, ValueError):
    pass


class InvalidWindow(CrondepotError, ValueError):
    pass




def register(commands: Any) -> None:
    parser = commands.add_parser("runs", help="runs of a tenant's jobs: list, show, retry")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list", help="runs across jobs (newest ended first), or one job's runs (--job alone)")
    _common(listing)
    listing.add_argument("--job", type=job_ref, dest="job_id", metavar="JOB",
                         help="this job's runs only: " + JOB_HELP)
    listing.add_argument("--status", choices=RUN_STATES, metavar="STATE",
                         help="runs in this state only: " + ", ".join(RUN_STATES))
    listing.add_argument("--since", type=since_arg, metavar="T",
                         help="ended at or after T: an ISO-8601 instant or an age such as "
                              "30m, 1h, 2d (before now)")
    listing.add_argument("--until", type=since_arg, metavar="T",
                         help="ended before T (same forms as --since)")
    listing.add_argument("--error", metavar="TEXT",
                         help="error class, or a part of the error message")
    listing.add_argument("--limit", type=int_in(1, 1000, "a limit"), default=20,
                         help="at most this many, 1 to 1000 (20)")
    listing.add_argument("--cursor", help="next_cursor of the previous page")
    listing.set_defaults(run=run_list)
    showing = actions.add_parser("show", help="one run: its state, attempts and last error")
    _common(showing)
    showing.add_argument("run_id", metavar="RUN_ID", help="the run's id (JOB_ID:EPOCH)")
    showing.set_defaults(run=run_show)
    retrying = actions.add_parser(
        "retry", help="queue a failed or dead run again (same run id, fresh attempt budget)")
    _common(retrying)
    retrying.add_argument("run_id", metavar="RUN_ID", help="the run's id (JOB_ID:EPOCH)")
    retrying.add_argument("--ignore-deadline", action="store_true",
                          help="also retry a run past its misfire deadline (it goes without "
                               "one); by default such a run is refused")
    retrying.set_defaults(run=run_retry)


_AGE = re.compile(r"(\d{1,7})([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def since_arg(text: str) -> datetime:
    """An argparse ``type``: an ISO-8601 instant with an offset, or an age before now
    (``90s``, ``30m``, ``1h``, ``2d``)."""
    age = _AGE.fullmatch(text.strip())
    if age is not None:
        return datetime.now(UTC) - timedelta(**{_UNITS[age[2]]: int(age[1])})
    try:
        return instant(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO-8601 instant with an offset or an age like 30m, 1h, 2d; "
            f"got {text!r}") from None


def _common(parser: argparse.ArgumentParser) -> None:
    add_database(parser)
    add_json(parser)
    add_tenant(parser)


def _across_jobs(args: argparse.Namespace) -> bool:
    return args.job_id is None or any(
        v is not None for v in (args.status, args.since, args.until, args.error))


def run_list(args: argparse.Namespace) -> int:
    if _across_jobs(args):
        return _list_across(args)
    before = _decode(args.cursor)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        job = get_job(conn, tenant, resolve(conn, tenant, args.job_id))
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
    print_more(next_cursor)
    return 0


def _list_across(args: argparse.Namespace) -> int:
    if args.since is not None and args.until is not None and args.since > args.until:
        raise InvalidWindow(f"--since ({args.since.isoformat(timespec='seconds')}) is after "
                            f"--until ({args.until.isoformat(timespec='seconds')})")
    before = _decode(args.cursor)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        job_id = None if args.job_id is None else resolve(conn, tenant, args.job_id)
        where = RunFilter(status=args.status, job_id=job_id, error=args.error,
                          since=args.since, until=args.until)
        page, next_cursor = runs_page(conn, tenant, where, before=before, limit=args.limit)
    if args.json:
        print_json({"items": [run_json(r) for r in page], "next_cursor": next_cursor})
        return 0
    shown = [f"status {args.status}" if args.status else "",
             f"job {args.job_id}" if args.job_id else "",
             f"error ~ {args.error!r}" if args.error else "",
             f"since {utc_text(args.since)}" if args.since else "",
             f"until {utc_text(args.until)}" if args.until else ""]
    table = Table(title="runs, newest first" + (": " + ", ".join(t for t in shown if t)
                                                if any(shown) else ""))
    table.add_column("run id", no_wrap=True)
    table.add_column("job")
    table.add_column("status")
    table.add_column("ended (UTC)", no_wrap=True)
    table.add_column("attempt", justify="right")
    table.add_column("error", overflow="fold")
    for r in page:
        table.add_row(r["run_id"], r["job_key"] or str(r["job_id"]), _status(r),
                      utc_text(r["finished_at"]) if r["finished_at"] else
                      f"due {utc_text(r['due_at'])}", str(r["attempt"]), _error(r))
    console().print(table)
    print_more(next_cursor)
    return 0


def run_retry(args: argparse.Namespace) -> int:
    from crondepot.runs.deadletter import RunNotFound, retry

    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        try:
            done = retry(conn, tenant, args.run_id, ignore_deadline=args.ignore_deadline)
        except RunNotFound:
            raise JobNotFound(f"run {args.run_id} not found") from None
        row = get_run(conn, tenant, args.run_id)
    if args.json:
        print_json({"run_id": args.run_id, "previous_status": done.previous_status,
                    "run": run_json(row)})
    else:
        print(f"run {args.run_id} ({done.previous_status}) queued again: same run id, "
              f"fresh attempt budget")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from crondepot.runs.attempts import run_attempts, run_worker

    with operator_connection(args) as conn:
        try:
            row = get_run(conn, tenant_id(conn, args.tenant), args.run_id)
        except RunNotFound:
            raise JobNotFound(f"run {args.run_id} not found") from None
        attempts = run_attempts(conn, row)
        worker = run_worker(conn, args.run_id)
    if args.json:
        print_json(run_json(row) | {"worker": worker,
                                    "attempts": [run_json(a) for a in attempts]})
        return 0
    for name, value in (row | {"worker": worker}).items():
        if value is None:
            continue
        text = json.dumps(value) if isinstance(value, dict | list) else \
            utc_text(value) if isinstance(value, datetime) else str(value)
        print(f"{name:<17} {text}")
    _print_attempts(attempts)
    return 0


def _print_attempts(attempts: list[dict[str, Any]]) -> None:
    """The run's attempts, oldest first: one line each."""
    if not attempts:
        print("\nattempts: none yet")
        return
    print("\nattempts:")
    for a in attempts:
        ended = utc_text(a["ended_at"]) if a["ended_at"] else "-"
        error = _error({"last_error": a["error"], "error_class": a["error_class"]})
        print(f"  #{a['attempt']:<3} {a['outcome']:<13} {utc_text(a['started_at'])} -> "
              f"{ended}  {a['worker'] or '?'}" + (f"  {error}" if error else ""))


def _status(row: dict[str, Any]) -> str:
    return f"{row['status']} ({row['skip_reason']})" if row.get("skip_reason") else row["status"]


def _error(row: dict[str, Any]) -> str:
    if not row.get("last_error") and not row.get("error_class"):
        return ""
    text = f"{row.get('error_class') or 'error'}: {row.get('last_error') or ''}"
    return text if len(text) <= 80 else text[:77] + "..."


def _decode(cursor: str | None) -> tuple[datetime, str] | None:
    return run_cursor_or_none(
        cursor, lambda _: InvalidCursor("--cursor: expected a next_cursor value"))

