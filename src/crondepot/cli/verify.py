"""``crondepot verify``: the ledger rule, checked — every fire has exactly one row in runs.

Prints each fire owed a row that has none (job, key, nominal time, the run id it would have)
and each fire with more than one; exit status 1 if there is any. Pending fires (a paused
job, a scheduler behind) are counted, not reported: they will be written or recorded.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from crondepot.cli.shared.options import (
    add_database,
    add_json,
    instant,
    int_in,
    operator_connection,
)
from crondepot.cli.shared.output import console, fail, print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.scheduler.ledger import MAX_LISTED, FireRecord, Report, WindowError, verify


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "verify", help="check that every fire of every job has exactly one run row",
        description="Rebuild the fires of each job's timetable in a window (as it was in "
                    "force: edits of cron or tz and cancels included) and compare them with "
                    "the rows in runs. Exit status 1 if any fire has no row or more than "
                    "one. The window defaults to the 24 hours before now (at most 31 days; "
                    "runs older than the retention period are pruned, so keep it inside).")
    add_database(parser)
    add_json(parser)
    add_tenant(parser, required=False, help_text="only this tenant's jobs")
    parser.add_argument("--since", type=instant, help="earliest nominal time (ISO-8601)")
    parser.add_argument("--until", type=instant,
                        help="latest nominal time (ISO-8601; default and at most: now)")
    parser.add_argument("--limit", type=int_in(0, 100_000, "a count"), default=MAX_LISTED,
                        help=f"list at most this many problem fires ({MAX_LISTED}); all are "
                             "counted")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with operator_connection(args, "crondepot-verify") as conn:
        tenant = tenant_id(conn, args.tenant) if args.tenant else None
        try:
            report = verify(conn, tenant_id=tenant, since=args.since, until=args.until,
                            listed=args.limit)
        except WindowError as exc:
            return fail(str(exc), as_json=args.json, code=2)
    if args.json:
        print_json(report.document())
    else:
        _show(report)
    return 0 if report.clean else 1


def _show(report: Report) -> None:
    print(f"{report.since.isoformat()} .. {report.until.isoformat()}: {report.fires} fires, "
          f"{report.unaccounted_count} unaccounted, {report.duplicated_count} duplicated, "
          f"{report.pending} pending ({report.seconds:.2f} s)")
    for title, fires in (("fires without a row", report.unaccounted),
                         ("fires with more than one row", report.duplicated)):
        if fires:
            console().print(_table(title, fires))
    if report.unreadable:
        table = Table(title="timetables that no longer parse (their fires are not checked)")
        for column in ("cron", "tz", "jobs", "error"):
            table.add_column(column)
        for u in report.unreadable:
            table.add_row(u.cron, u.tz, " ".join(str(i) for i in u.job_ids), u.error)
        console().print(table)


def _table(title: str, fires: list[FireRecord]) -> Table:
    table = Table(title=title)
    for column in ("job", "key", "tenant", "nominal time", "run id", "rows"):
        table.add_column(column)
    for f in fires:
        table.add_row(str(f.job_id), f.job_key or "", str(f.tenant_id),
                      f.nominal_at.isoformat(), f.run_id, str(f.rows))
    return table
