"""``crondepot backfill JOB --from T --to T``: write the fires of a past range that have no row.

The same code as the HTTP API (``crondepot.runs.backfill``). A range of more than
``MAX_FIRES`` fires goes in batches of that many, one transaction each, with a progress line
per batch on stderr; an interrupted backfill is simply run again (a fire that got its row is
left as it is). Exit status 0 when done, 2 for a bad range or an unknown job.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crondepot.cli.shared.job_ref import HELP as JOB_HELP
from crondepot.cli.shared.job_ref import job_ref, not_found, resolve
from crondepot.cli.shared.options import add_database, add_json, instant, operator_connection
from crondepot.cli.shared.output import fail, print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.job import store
from crondepot.runs.backfill import MAX_FIRES, MAX_LISTED, MAX_RANGE, Backfill, BackfillRangeError
from crondepot.runs.backfill import backfill as run_backfill


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "backfill", help="write the fires of a past range that have no run row",
        description="Write a run for each fire of JOB with FROM <= nominal time < TO that "
                    "has no row (after an outage, a restore, rows removed by hand), with "
                    "the run id the scheduler would have given it: a fire never gets a "
                    "second row. Fires whose misfire deadline has passed are written "
                    "skipped, as the scheduler would. Fires the scheduler has not reached "
                    "yet (a paused job) are left to it. The range may span at most "
                    f"{MAX_RANGE.days} days and must end by now; it goes in batches of "
                    f"{MAX_FIRES} fires.")
    add_database(parser)
    add_json(parser)
    add_tenant(parser)
    parser.add_argument("job_id", type=job_ref, metavar="JOB", help=JOB_HELP)
    parser.add_argument("--from", dest="since", type=instant, required=True, metavar="T",
                        help="earliest nominal time, included (ISO-8601 with offset)")
    parser.add_argument("--to", dest="until", type=instant, metavar="T",
                        help="latest nominal time, excluded (ISO-8601 with offset; "
                             "default and at most: now)")
    parser.add_argument("--include-skipped", action="store_true",
                        help="also queue again the fires whose row is skipped (a pause, a "
                             "catch-up bound), unless past their misfire deadline")
    parser.add_argument("--dry-run", action="store_true",
                        help="report what would be written; write nothing")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    total: Backfill | None = None
    batches = 0
    with operator_connection(args, "crondepot-backfill") as conn:
        tenant = tenant_id(conn, args.tenant)
        job_id = resolve(conn, tenant, args.job_id)
        since = args.since
        while True:
            try:
                done = run_backfill(conn, tenant, job_id, since=since,
                                    until=args.until, include_skipped=args.include_skipped,
                                    dry_run=args.dry_run)
            except BackfillRangeError as exc:
                return fail(str(exc), as_json=args.json, code=2)
            except store.JobNotFound:
                raise not_found(args.job_id) from None
            batches += 1
            total = done if total is None else _add(total, done)
            if done.next_since is None:
                break
            _progress(total, batches, done.next_since.isoformat())
            since = done.next_since
            args.until = done.until       # "now" stays the instant of the first batch
    assert total is not None
    if args.json:
        print_json({**total.document(), "batches": batches})
    else:
        _show(total)
    return 0


def _add(total: Backfill, done: Backfill) -> Backfill:
    total.fires += done.fires
    total.had_row += done.had_row
    # Whole lists: a range holds at most 31 days of minutes (44,640 fires); the document
    # lists the first MAX_LISTED of each.
    total.written += done.written
    total.written_skipped += done.written_skipped
    total.requeued += done.requeued
    total.held_past_deadline += done.held_past_deadline
    total.pending_since = done.pending_since
    total.next_since = None
    return total


def _progress(total: Backfill, batches: int, next_from: str) -> None:
    print(f"backfill: batch {batches}: {total.fires} fires so far, {len(total.written)} "
          f"written, {len(total.requeued)} queued again; going on from {next_from}",
          file=sys.stderr, flush=True)


def _show(report: Backfill) -> None:
    dry = " (dry run: nothing written)" if report.dry_run else ""
    verb = "would write" if report.dry_run else "wrote"
    print(f"job {report.job_id}, {report.since.isoformat()} .. {report.until.isoformat()}: "
          f"{report.fires} fires{dry}")
    print(f"  {verb} {len(report.written)} queued (due now)")
    if report.written_skipped:
        print(f"  {verb} {len(report.written_skipped)} skipped (past their misfire deadline)")
    if report.requeued or report.held_past_deadline:
        print(f"  queued again {len(report.requeued)} skipped"
              + (f"; left {len(report.held_past_deadline)} skipped, past their misfire "
                 "deadline" if report.held_past_deadline else ""))
    print(f"  {report.had_row} already had a row (left as it was)")
    if report.pending_since is not None:
        print(f"  fires from {report.pending_since.isoformat()} on are the scheduler's (the "
              "job is paused or a scheduler is behind): not written. After a resume, "
              "backfill with --include-skipped to send the ones the pause recorded skipped.")
    for rid in report.written[:20]:
        print(f"    {rid}")
    if len(report.written) > 20:
        print(f"    ... and {len(report.written) - 20} more (--json lists "
              f"{MAX_LISTED})")
