"""``crondepot worker``: a worker process. Run as many as you like, on any hosts."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from crondepot.cli.prune import add_maintenance, maintenance_config
from crondepot.cli.shared.metrics import add_metrics_host, add_metrics_token
from crondepot.cli.shared.options import (
    add_database,
    add_pooled_database,
    check_pooled_database,
    check_schema,
    database,
    int_in,
)
from crondepot.cli.shared.output import fail
from crondepot.cli.shared.tenant import add_tenant
from crondepot.runtime import logs, metrics, tracing

T = TypeVar("T", int, float)


def register(commands: Any) -> None:
    parser = commands.add_parser("worker", help="run a worker (claims runs, calls targets)")
    add_database(parser)
    add_pooled_database(parser)
    env = os.environ.get
    # Text defaults: argparse applies the ``type`` to them, so a bad CRONDEPOT_* value is a
    # usage error naming the option (exit 2), not a traceback while the parser is built.
    parser.add_argument("--concurrency", type=int_in(1, 10_000, "a number of slots"),
                        default=env("CRONDEPOT_CONCURRENCY", "20"), metavar="C",
                        help="concurrent slots (env CRONDEPOT_CONCURRENCY; default 20)")
    parser.add_argument("--urgent-only", type=int_in(0, 9_999, "a number of slots"),
                        metavar="K", default=env("CRONDEPOT_URGENT_ONLY"),
                        help="slots that take urgent runs only, fewer than --concurrency "
                             "(env CRONDEPOT_URGENT_ONLY; default 4, or concurrency - 1 if "
                             "that is smaller)")
    # A parser ``type`` (it was called in run() and raised SystemExit, exit code 1): a bad
    # value is now a usage error like any other option's, exit code 2, before anything runs.
    # argparse applies it to the CRONDEPOT_WEIGHTS default too.
    parser.add_argument("--weights", type=_weights, default=env("CRONDEPOT_WEIGHTS", "6:3:1"),
                        help="urgent:normal:bulk claim weights (default 6:3:1)")
    parser.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="MODULE", help="import MODULE to register its handlers")
    parser.add_argument("--sync-schedules", action="store_true",
                        help="before starting, apply the @crondepot.periodic declarations of "
                             "each --import module to --tenant (scope crondepot.module=MODULE, "
                             "pruning what the module no longer declares); workers started "
                             "together converge on one job per declaration")
    add_tenant(parser, required=False,
               help_text="with --sync-schedules: the tenant the declared jobs belong to")
    parser.add_argument("--grace", type=_seconds_or_zero, default=30.0, metavar="SECONDS",
                        help="on SIGTERM, how long calls in progress may finish (default 30)")
    parser.add_argument("--max-abandoned", type=int_in(1, 10_000, "a number of threads"),
                        metavar="N", default=env("CRONDEPOT_MAX_ABANDONED", "20"),
                        help="restart this worker (drain, then start afresh) once N sync "
                             "handler calls abandoned at their target's timeout_s are still "
                             "running (env CRONDEPOT_MAX_ABANDONED; default 20)")
    parser.add_argument("--heartbeat", type=_positive_float, default=5.0, metavar="SECONDS",
                        help="lease renewal interval (default 5)")
    parser.add_argument("--metrics-port", type=int_in(0, 65535, "a port"), metavar="PORT",
                        default=env("CRONDEPOT_METRICS_PORT", "0"),
                        help="serve Prometheus /metrics on this port (env "
                             "CRONDEPOT_METRICS_PORT; default 0: off)")
    add_metrics_host(parser)
    add_metrics_token(parser)
    parser.add_argument("--name", default=None, help="worker name (default host:pid)")
    parser.add_argument("--log-json", action="store_true", default=None,
                        help="log one JSON object per line (env CRONDEPOT_LOG_FORMAT=json)")
    add_maintenance(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from crondepot.worker.loop import Worker, WorkerConfig

    urgent_only = args.urgent_only if args.urgent_only is not None \
        else min(4, args.concurrency - 1)
    if urgent_only >= args.concurrency:
        return fail(f"--urgent-only ({urgent_only}) must be below --concurrency "
                    f"({args.concurrency}): at least one slot takes runs of any priority")
    logs.setup(as_json=args.log_json)
    try:
        # before the --import modules: a handler's spans nest under crondepot's calls
        tracing.configure("crondepot-worker")
    except ValueError as exc:
        return fail(str(exc))
    weights: tuple[int, int, int] = args.weights
    sys.path.insert(0, os.getcwd())   # --import mymodule from the current directory
    for module in args.imports:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            return fail(f"--import {module}: {exc}")
    if args.sync_schedules and (not args.tenant or not args.imports):
        return fail("--sync-schedules needs --tenant and at least one --import MODULE")
    metrics.serve(args.metrics_port, args.metrics_host, token=args.metrics_token)
    with database(args) as db:
        check_schema(db, "crondepot-worker")
        if args.sync_schedules:
            sync_schedules(db.url, args.tenant, args.imports)
        if problem := check_pooled_database(args.pooled_db, "crondepot-worker"):
            return fail(problem)
        config = WorkerConfig(url=db.url, pooled_url=args.pooled_db,
                              concurrency=args.concurrency,
                              urgent_only=urgent_only, weights=weights,
                              grace_seconds=args.grace, heartbeat_seconds=args.heartbeat,
                              max_lease_seconds=args.max_lease,
                              max_abandoned=args.max_abandoned,
                              maintenance=maintenance_config(
                                  args, db.url, f"worker-{args.name or os.getpid()}"),
                              **({"name": args.name} if args.name else {}))
        try:
            worker = Worker(config)
        except ValueError as exc:     # the environment's settings: the allow-list, the CAs
            return fail(str(exc))
        worker.install_signal_handlers()
        worker.run()
    if worker.restart_wanted:
        # Hung handler threads cannot be stopped, only left behind with the process: start
        # this same command afresh, in this same process (a supervisor sees no exit).
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])
    if worker.abandoned:
        # A call abandoned at the end of the grace period may hold threads the interpreter
        # would wait for at exit (asyncio.to_thread's executor, a handler's own pool): leave
        # now, as promised. Its run comes back after its lease.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def sync_schedules(url: str, tenant: str, modules: list[str]) -> None:
    """Apply each module's declared schedules (crondepot.worker.periodic) through the same
    apply as ``crondepot apply --from-module``: one transaction per module, under the
    scope's advisory lock, so workers starting at once take turns and the later ones find
    nothing to change."""
    from crondepot.cli.shared.tenant import tenant_id
    from crondepot.db.connect import ALL_TENANTS, connect
    from crondepot.job.apply import apply_set, read_documents
    from crondepot.tenancy.audit import act_as, cli_actor
    from crondepot.worker.periodic import declared, module_scope

    log = logging.getLogger("crondepot.worker")
    with connect(url, application_name="crondepot-worker-sync", tenants=ALL_TENANTS) as conn:
        act_as(conn, cli_actor())
        owner = tenant_id(conn, tenant)
        for module in modules:
            scope = module_scope(module)
            plan = apply_set(conn, owner, read_documents(declared(module), scope),
                             scope=scope, prune=True)
            log.info("schedules of %s synced: %s", module, plan.counts)


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


def _zero_or_more(what: str) -> Callable[[str], float]:
    """An argparse ``type``: a finite number, 0 or more."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"expected {what}, 0 or more, got {text!r}")
        return value
    return parse


_seconds_or_zero = _zero_or_more("a number of seconds")


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
