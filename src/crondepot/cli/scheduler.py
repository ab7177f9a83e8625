"""``crondepot scheduler``: one scheduler copy. Run as many as you like, on any hosts."""

from __future__ import annotations

import argparse
import os
from typing import Any

from crondepot import logs, metrics
from crondepot.cli.options import add_database, check_schema, database, int_in
from crondepot.scheduler.loop import Scheduler, SchedulerConfig


def register(commands: Any) -> None:
    parser = commands.add_parser("scheduler", help="run a scheduler copy (claims due jobs, "
                                                   "writes their runs)")
    add_database(parser)
    parser.add_argument("--tick", type=_seconds, metavar="DURATION",
                        default=os.environ.get("CRONDEPOT_TICK", "2s"),
                        help="longest sleep between ticks, e.g. 2s or 500ms (default 2s)")
    parser.add_argument("--batch", type=int_in(1, 100_000, "an integer"), metavar="N",
                        default=os.environ.get("CRONDEPOT_BATCH", "2000"),
                        help="due jobs claimed per transaction (default 2000)")
    parser.add_argument("--metrics-port", type=int_in(0, 65535, "a port"), metavar="PORT",
                        default=os.environ.get("CRONDEPOT_METRICS_PORT", "0"),
                        help="serve Prometheus /metrics on this port (default: off)")
    parser.add_argument("--name", default=os.environ.get("CRONDEPOT_NAME", "scheduler"),
                        help="name shown in pg_stat_activity and logs")
    parser.add_argument("--verify-every", type=_seconds_or_off, metavar="DURATION",
                        default=os.environ.get("CRONDEPOT_VERIFY_EVERY", "5m"),
                        help="check the ledger (crondepot verify) this often, one copy at a "
                             "time; 0 turns it off (default 5m)")
    parser.add_argument("--verify-window", type=_window, metavar="DURATION",
                        default=os.environ.get("CRONDEPOT_VERIFY_WINDOW", "1h"),
                        help="how far back each check looks, e.g. 90m, 6h or 2d, at most "
                             "31d (default 1h); it also reaches back to the oldest fire the "
                             "last check found pending")
    parser.add_argument("--log-json", action="store_true", default=None,
                        help="log one JSON object per line")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    logs.setup(as_json=args.log_json)
    metrics.serve(args.metrics_port)
    with database(args) as db:
        check_schema(db, "crondepot-scheduler")
        scheduler = Scheduler(SchedulerConfig(url=db.url, tick_seconds=args.tick,
                                              batch=args.batch, name=args.name,
                                              verify_every=args.verify_every,
                                              verify_window=args.verify_window))
        scheduler.install_signal_handlers()
        scheduler.run()
    return 0


def _seconds(text: str) -> float:
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
    if not 0.01 <= value <= 3600:
        raise argparse.ArgumentTypeError(
            f"expected a duration from 10ms to 60m like 2s or 500ms, got {text!r}")
    return value



def _seconds_or_off(text: str) -> float:
    return 0.0 if text.strip() in ("0", "off") else _seconds(text)


def _window(text: str) -> float:
    units = {"m": 60.0, "h": 3600.0, "d": 86400.0}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1:] in units else float(text)
    except ValueError:
        value = -1.0
    if not 60 <= value <= 31 * 86400:
        raise argparse.ArgumentTypeError(
            f"expected a duration from 1m to 31d like 90m, 6h or 2d, got {text!r}")
    return value
