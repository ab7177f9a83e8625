"""``crondepot db url|status|stop|restored|partition-runs``: find, look at or stop the
database crondepot uses, say what to do once it was restored from a backup, and partition
the runs of a database that had runs before migration 0040."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from crondepot.cli.shared.options import (
    add_database,
    add_json,
    add_runtime_role,
    database,
    operator_connection,
)
from crondepot.cli.shared.output import fail, print_json
from crondepot.db import ALL_TENANTS, connect, embedded, roles
from crondepot.db.restore import inspect
from crondepot.runs import partitions, restored
from crondepot.tenancy.audit import cli_actor


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
    after = actions.add_parser(
        "restored", help="after a restore from a backup: skip the fires the lost timeline "
                         "most likely sent, or send them again (processes refuse to start "
                         "until this is said)")
    add_database(after)
    add_json(after)
    how = after.add_mutually_exclusive_group()
    how.add_argument("--skip-repeats", action="store_true",
                     help="record skipped (reason restored) the fires since the restore "
                          "point of jobs whose targets do not drop repeats, and their runs "
                          "queued or running; other jobs catch up")
    how.add_argument("--resend", action="store_true",
                     help="skip nothing: every fire since the restore point is sent again")
    after.set_defaults(run=run_restored)
    split = actions.add_parser(
        "partition-runs", help="partition runs by day, online, on a database that had runs "
                               "before this release (connect as the owner; every process "
                               "must run this release first)")
    add_database(split)
    add_runtime_role(split)
    add_json(split)
    split.set_defaults(run=run_partition_runs)


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


def run_restored(args: argparse.Namespace) -> int:
    """Without --skip-repeats or --resend: say whether a restore waits for a decision (exit
    1 if one does, for scripts)."""
    with operator_connection(args, "crondepot-db-restored") as conn:
        found = inspect(conn)
        if not (args.skip_repeats or args.resend):
            if args.json:
                print_json({"restore": found.document() if found else None})
            elif found is None:
                print("no restore waits for a decision: crondepot's newest mark is this "
                      "cluster and timeline")
            else:
                print(f"restore detected at {found.detected_at.isoformat(timespec='seconds')}"
                      f": the restored data's newest mark is from "
                      f"{found.last_seen_at.isoformat(timespec='seconds')}; run again with "
                      "--skip-repeats or --resend")
            return 0 if found is None else 1
        if found is None:
            return fail("no restore waits for a decision (crondepot db restored shows it)",
                        as_json=args.json, code=2)
        done = (restored.skip_repeats(conn, found, cli_actor()) if args.skip_repeats
                else restored.resend(conn, found, cli_actor()))
    if args.json:
        print_json(done.document())
    elif args.skip_repeats:
        print(f"restore resolved: {done.fires_skipped} fires of {done.jobs} jobs whose "
              f"targets do not drop repeats written skipped (restored), {done.runs_skipped} "
              "queued or running runs skipped; the processes may start")
    else:
        print("restore resolved: every fire since the restore point will be sent again; "
              "the processes may start")
    return 0


def run_partition_runs(args: argparse.Namespace) -> int:
    """Convert a one-table runs (docs/operations.md, "Partitions of runs"); 0 also when it
    was partitioned already, 1 when the conversion could not be made (nothing changed)."""
    with database(args) as db, \
            connect(db.owner_url, application_name="crondepot-partition-runs",
                    tenants=ALL_TENANTS) as conn:
        try:
            done = partitions.convert(conn)
        except partitions.ConversionError as exc:
            return fail(str(exc), as_json=args.json, code=1)
        roles.grant(conn, args.runtime_role)
    if args.json:
        print_json({"already": done.already,
                    "history_until": done.history_until.isoformat()
                    if done.history_until else None,
                    "validate_seconds": round(done.validate_seconds, 3),
                    "attach_seconds": round(done.attach_seconds, 3),
                    "made": done.made})
    elif done.already:
        print("runs is partitioned already: nothing to do")
    else:
        assert done.history_until is not None
        print(f"runs partitioned: the table before it is runs_history, for nominal times "
              f"before {done.history_until.isoformat()} (validated in "
              f"{done.validate_seconds:.1f} s with writes going on, attached in "
              f"{done.attach_seconds:.2f} s); day partitions made: "
              f"{', '.join(done.made) or 'none'}")
    return 0
