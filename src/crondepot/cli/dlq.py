"""``crondepot dlq list|replay``: inspect and replay the dead letter."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from crondepot.cli.options import add_database, add_json, instant, operator_connection
from crondepot.cli.output import fail, print_json
from crondepot.deadletter import DeadFilter, DeadRun, list_dead, replay


def register(commands: Any) -> None:
    parser = commands.add_parser("dlq", help="the dead letter: runs that will not be retried")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list dead runs, newest first")
    _filters(listing)
    listing.add_argument("--limit", type=int, default=100, help="at most this many (100)")
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
    parser.add_argument("--tenant", help="tenant name")
    parser.add_argument("--job", type=int, dest="job_id", help="job id")
    parser.add_argument("--error", help="error class, or a part of the error message")
    parser.add_argument("--since", type=instant, help="died at or after (ISO-8601)")
    parser.add_argument("--until", type=instant, help="died before (ISO-8601)")


def _where(args: argparse.Namespace, limit: int = 100_000) -> DeadFilter:
    return DeadFilter(tenant=args.tenant, job_id=args.job_id, run_ids=args.run_ids or None,
                      error=args.error, since=args.since, until=args.until, limit=limit)


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        runs = list_dead(conn, _where(args, args.limit))
    _show(runs, args.json, title="dead letter")
    return 0


def run_replay(args: argparse.Namespace) -> int:
    where = _where(args)
    if where.is_empty() and not args.all:
        return fail("replay needs a filter (run ids, --job, --error, --tenant, --since, "
                    "--until) or --all", as_json=args.json)
    with operator_connection(args) as conn:
        done = replay(conn, where, dry_run=args.dry_run, ignore_deadline=args.ignore_deadline)
    verb = "would replay" if args.dry_run else "replayed"
    held = done.past_deadline
    if args.json:
        print_json({"dry_run": args.dry_run, "count": len(done.replayed),
                    "run_ids": [r.run_id for r in done.replayed],
                    "past_deadline": len(held),
                    "past_deadline_run_ids": [r.run_id for r in held]})
    else:
        _show(done.replayed, False, title=f"{verb} {len(done.replayed)} runs")
        if held:
            print(f"{len(held)} matching runs are past their misfire deadline and stay in "
                  "the dead letter (--ignore-deadline sends them)")
    return 0


def _show(runs: list[DeadRun], as_json: bool, *, title: str) -> None:
    if as_json:
        print_json([{"run_id": r.run_id, "job_id": r.job_id, "job_key": r.job_key,
                     "tenant": r.tenant, "priority": r.priority,
                     "scheduled_at": r.nominal_at.isoformat(), "attempt": r.attempt,
                     "died_at": r.finished_at.isoformat(), "error_class": r.error_class,
                     "error": r.last_error} for r in runs])
        return
    table = Table(title=title)
    for column in ("run id", "tenant", "job", "attempts", "died at", "error"):
        table.add_column(column)
    for r in runs:
        table.add_row(r.run_id, r.tenant, r.job_key or str(r.job_id), str(r.attempt),
                      r.finished_at.isoformat(timespec="seconds"),
                      f"{r.error_class}: {(r.last_error or '')[:80]}")
    Console().print(table)
