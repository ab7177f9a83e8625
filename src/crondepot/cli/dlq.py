"""``crondepot dlq list|replay``: inspect and replay the dead letter.

Like every tenant-scoped command, the tenant comes from ``--tenant NAME`` or
``CRONDEPOT_TENANT`` (here optional: without either, every tenant's dead runs). ``--json``
prints the API's shape and field names (``GET /v1/dead-letter``): ``items`` of
``nominal_at``, ``finished_at``, ``last_error`` ..., and ``next_cursor`` for ``--cursor``.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from crondepot.base.errors import CrondepotError
from crondepot.cli.jobs import console
from crondepot.cli.shared.job_ref import HELP as JOB_HELP
from crondepot.cli.shared.job_ref import JobRef, job_ref, not_found, resolve
from crondepot.cli.shared.options import (
    add_database,
    add_json,
    instant,
    int_in,
    operator_connection,
)
from crondepot.cli.shared.output import fail, print_json, print_more
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.runs import render
from crondepot.runs.deadletter import DeadFilter, DeadRun, dead_page, replay
from crondepot.runs.reads import encode_run_cursor, run_cursor_or_none


class InvalidDeadFilter(CrondepotError, ValueError):
    pass


def register(commands: Any) -> None:
    parser = commands.add_parser("dlq", help="the dead letter: runs that will not be retried")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list dead runs, newest first, a page at a time")
    _filters(listing)
    listing.add_argument("--limit", type=int_in(1, 10_000, "a limit"), default=100,
                         help="page size, 1 to 10000 (100)")
    listing.add_argument("--cursor", metavar="CURSOR", help="next_cursor of the previous page")
    listing.set_defaults(run=run_list)
    replaying = actions.add_parser("replay", help="queue dead runs again (same run id, fresh "
                                                  "attempt budget)")
    _filters(replaying)
    replaying.add_argument("--dry-run", action="store_true", help="show what would go")
    replaying.add_argument("--all", action="store_true",
                           help="replay every dead run (needed when no filter is given)")
    replaying.add_argument("--ignore-deadline", action="store_true",
                           help="also replay runs past their misfire deadline (by default "
                                "they stay and are counted)")
    replaying.set_defaults(run=run_replay)


def _filters(parser: argparse.ArgumentParser) -> None:
    add_database(parser)
    add_json(parser)
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="these runs only")
    add_tenant(parser, required=False, help_text="only this tenant's runs (default: every "
                                                 "tenant's)")
    parser.add_argument("--job", type=job_ref, dest="job_id", metavar="JOB",
                        help="this job's runs only (a key needs a tenant): " + JOB_HELP)
    parser.add_argument("--error", help="error class, or a part of the error message")
    parser.add_argument("--since", type=instant, help="died at or after (ISO-8601)")
    parser.add_argument("--until", type=instant, help="died before (ISO-8601)")


def _where(conn: Any, args: argparse.Namespace, limit: int = 100_000) -> DeadFilter:
    ref: JobRef | None = args.job_id
    job_id = None
    if ref is not None and ref.id is not None and not args.tenant:
        if ref.id == 0:                     # beyond bigint: no such job (0 means "any")
            raise not_found(ref)
        job_id = ref.id                     # an id is unique across tenants
    elif ref is not None:
        if not args.tenant:
            raise InvalidDeadFilter("--job KEY needs --tenant NAME (or CRONDEPOT_TENANT): "
                                    "a key belongs to one tenant")
        job_id = resolve(conn, tenant_id(conn, args.tenant), ref)
    elif args.tenant:
        tenant_id(conn, args.tenant)        # an unknown tenant is an error, not an empty list
    after = run_cursor_or_none(
        getattr(args, "cursor", None) or None,
        lambda _: InvalidDeadFilter("--cursor: expected a next_cursor value"))
    return DeadFilter(tenant=args.tenant, job_id=job_id, run_ids=args.run_ids or None,
                      error=args.error, since=args.since, until=args.until, limit=limit,
                      after=after)


def run_list(args: argparse.Namespace) -> int:

    with operator_connection(args) as conn:
        runs, after = dead_page(conn, _where(conn, args, args.limit))
    next_cursor = encode_run_cursor(*after) if after is not None else None
    if args.json:
        print_json({"items": [dead_json(r) for r in runs], "next_cursor": next_cursor})
        return 0
    _table(runs, title="dead letter")
    print_more(next_cursor)
    return 0


def run_replay(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        where = _where(conn, args)
        if where.is_empty() and not args.all:
            return fail("replay needs a filter (run ids, --job, --error, --tenant, --since, "
                        "--until) or --all", as_json=args.json)
        done = replay(conn, where, dry_run=args.dry_run, ignore_deadline=args.ignore_deadline)
    verb = "would replay" if args.dry_run else "replayed"
    held = done.past_deadline
    if args.json:
        # the API's shape (POST /v1/dead-letter/replay), plus run_ids as before
        print_json({"dry_run": args.dry_run, "count": len(done.replayed),
                    "items": [dead_json(r) for r in done.replayed],
                    "run_ids": [r.run_id for r in done.replayed],
                    "past_deadline": len(held),
                    "past_deadline_run_ids": [r.run_id for r in held]})
    else:
        _table(done.replayed, title=f"{verb} {len(done.replayed)} runs")
        if held:
            print(f"{len(held)} matching runs are past their misfire deadline and stay in "
                  "the dead letter (--ignore-deadline sends them)")
    return 0


def dead_json(run: DeadRun) -> dict[str, Any]:
    """A dead run as the API returns it (``crondepot.runs.render.dead_json``), and its
    tenant: this command may list every tenant's."""
    return {**render.dead_json(run), "tenant": run.tenant}


def _table(runs: list[DeadRun], *, title: str) -> None:
    table = Table(title=title)
    for column in ("run id", "tenant", "job", "attempts", "died at", "error"):
        table.add_column(column)
    for r in runs:
        table.add_row(r.run_id, r.tenant, r.job_key or str(r.job_id), str(r.attempt),
                      r.finished_at.isoformat(timespec="seconds"),
                      f"{r.error_class}: {(r.last_error or '')[:80]}")
    console().print(table)
