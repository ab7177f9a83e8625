"""``crondepot scheduler``: one scheduler copy. Run as many as you like, on any hosts."""

from __future__ import annotations

import argparse
import os
from typing import Any

from crondepot.cli.prune import add_maintenance, maintenance_config
from crondepot.cli.shared.metrics import add_metrics_host, add_metrics_token
from crondepot.cli.shared.options import (
    add_database,
    add_pooled_database,
    check_pooled_database,
    check_schema,
    database,
    duration,
    int_in,
)
from crondepot.cli.shared.output import fail
from crondepot.runtime import logs, metrics, tracing
from crondepot.scheduler.loop import Scheduler, SchedulerConfig


def register(commands: Any) -> None:
    parser = commands.add_parser("scheduler", help="run a scheduler copy (claims due jobs, "
                                                   "writes their runs)")
    add_database(parser)
    add_pooled_database(parser)
    parser.add_argument("--tick", type=duration, metavar="DURATION",
                        default=os.environ.get("CRONDEPOT_TICK", "2s"),
                        help="longest sleep between ticks, e.g. 2s or 500ms (default 2s)")
    parser.add_argument("--batch", type=int_in(1, 100_000, "an integer"), metavar="N",
                        default=os.environ.get("CRONDEPOT_BATCH", "2000"),
                        help="due jobs claimed per transaction (default 2000)")
    parser.add_argument("--metrics-port", type=int_in(0, 65535, "a port"), metavar="PORT",
                        default=os.environ.get("CRONDEPOT_METRICS_PORT", "0"),
                        help="serve Prometheus /metrics on this port (default: off)")
    add_metrics_host(parser)
    add_metrics_token(parser)
    parser.add_argument("--name", default=os.environ.get("CRONDEPOT_NAME", "scheduler"),
                        help="name shown in pg_stat_activity and logs")
    add_maintenance(parser)
    parser.add_argument("--log-json", action="store_true", default=None,
                        help="log one JSON object per line")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logs.setup(as_json=args.log_json)
    try:
        tracing.configure("crondepot-scheduler")
    except ValueError as exc:
        return fail(str(exc))
    metrics.serve(args.metrics_port, args.metrics_host, token=args.metrics_token)
    with database(args) as db:
        check_schema(db, "crondepot-scheduler")
        if problem := check_pooled_database(args.pooled_db, "crondepot-scheduler"):
            return fail(problem)
        scheduler = Scheduler(SchedulerConfig(url=db.url, pooled_url=args.pooled_db,
                                              tick_seconds=args.tick,
                                              batch=args.batch, name=args.name,
                                              maintenance=maintenance_config(
                                                  args, db.url, args.name)))
        scheduler.install_signal_handlers()
        scheduler.run()
    return 0
