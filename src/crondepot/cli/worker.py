"""``crondepot worker``: a worker process. Run as many as you like, on any hosts."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from crondepot import logs, metrics
from crondepot.cli.maintenance import add_maintenance, maintenance_config
from crondepot.cli.options import add_database, check_schema, database
from crondepot.queue.lease import DEFAULT_MAX_LEASE_SECONDS

T = TypeVar("T", int, float)


def register(commands: Any) -> None:
    parser = commands.add_parser("worker", help="run a worker (claims runs, calls targets)")
    add_database(parser)
    env = os.environ.get
    parser.add_argument("--concurrency", type=int, default=int(env("CRONDEPOT_CONCURRENCY", "20")),
                        metavar="C", help="concurrent slots (default 20)")
    parser.add_argument("--urgent-only", type=int, metavar="K",
                        default=int(env("CRONDEPOT_URGENT_ONLY", "4")),
                        help="slots that take urgent runs only (default 4)")
    # A parser ``type`` (it was called in run() and raised SystemExit, exit code 1): a bad
    # value is now a usage error like any other option's, exit code 2, before anything runs.
    # argparse applies it to the CRONDEPOT_WEIGHTS default too.
    parser.add_argument("--weights", type=_weights, default=env("CRONDEPOT_WEIGHTS", "6:3:1"),
                        help="urgent:normal:bulk claim weights (default 6:3:1)")
    parser.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="MODULE", help="import MODULE to register its handlers")
    parser.add_argument("--grace", type=float, default=30.0, metavar="SECONDS",
                        help="on SIGTERM, how long calls in progress may finish (default 30)")
    parser.add_argument("--heartbeat", type=_positive_float, default=5.0, metavar="SECONDS",
                        help="lease renewal interval (default 5)")
    parser.add_argument("--max-lease", type=_positive_seconds, metavar="SECONDS",
                        default=env("CRONDEPOT_MAX_LEASE_SECONDS",
                                    str(DEFAULT_MAX_LEASE_SECONDS)),
                        help="a run's lease time over all its attempts, at most; a run that "
                             f"used it all goes to the dead letter (default "
                             f"{DEFAULT_MAX_LEASE_SECONDS} = 12 h)")
    parser.add_argument("--metrics-port", type=int, metavar="PORT",
                        default=int(env("CRONDEPOT_METRICS_PORT", "0")))
    parser.add_argument("--name", default=None, help="worker name (default host:pid)")
    parser.add_argument("--log-json", action="store_true", default=None)
    add_maintenance(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from crondepot.worker.loop import Worker, WorkerConfig

    logs.setup(as_json=args.log_json)
    weights: tuple[int, int, int] = args.weights
    sys.path.insert(0, os.getcwd())   # --import mymodule from the current directory
    for module in args.imports:
        importlib.import_module(module)
    metrics.serve(args.metrics_port)
    with database(args) as db:
        check_schema(db, "crondepot-worker")
        config = WorkerConfig(url=db.url, concurrency=args.concurrency,
                              urgent_only=args.urgent_only, weights=weights,
                              grace_seconds=args.grace, heartbeat_seconds=args.heartbeat,
                              max_lease_seconds=args.max_lease,
                              maintenance=maintenance_config(
                                  args, db.url, f"worker-{args.name or os.getpid()}",
                                  max_lease_seconds=args.max_lease),
                              **({"name": args.name} if args.name else {}))
        worker = Worker(config)
        worker.install_signal_handlers()
        worker.run()
    if worker.abandoned:
        # A call abandoned at the end of the grace period may hold threads the interpreter
        # would wait for at exit (asyncio.to_thread's executor, a handler's own pool): leave
        # now, as promised. Its run comes back after its lease.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _above_zero(convert: Callable[[str], T], what: str) -> Callable[[str], T]:
    """An argparse ``type``: ``convert``, refusing 0, negatives, infinity and non-numbers."""
    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not 0 < value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected {what} above 0, got {text!r}")
        return value
    return parse


_positive_float = _above_zero(float, "a number of seconds")
_positive_seconds = _above_zero(int, "a whole number of seconds")


def _weights(text: str) -> tuple[int, int, int]:
    parts = text.split(":")
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or any(v < 0 for v in values) or not any(values):
        raise argparse.ArgumentTypeError(f"expected three non-negative integers, not all "
                                         f"zero, like 6:3:1, got {text!r}")
    return (values[0], values[1], values[2])
