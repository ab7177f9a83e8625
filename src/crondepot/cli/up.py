"""``crondepot up``: the whole system in one command, under one supervisor.

Resolves the database (starting the embedded PostgreSQL when no URL is given), migrates as
the owner (``--db``, or the embedded server's superuser), then runs the API, the scheduler
copies and the workers as child processes connected as the runtime role (db/roles.py). A
child that dies is restarted (with a short, growing pause so a crash loop does not spin);
Ctrl-C or SIGTERM stops them all and waits for them. Children get the runtime role's URL
explicitly, in their environment (not on a command line any user of the host can read),
so they never start a server of their own.

Children run in process groups of their own, so the terminal's signals (Ctrl-C, a closed
window's SIGHUP) reach only the supervisor, which stops them in order and then the embedded
server it started. Before anything starts, ``up`` checks that the ports it will serve on are
free and that no other ``up`` holds the same embedded data directory (a lock file beside
it): either is an error at once, never a child restarting forever.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.cli.migrate import embedded_role
from crondepot.cli.shared import demo
from crondepot.cli.shared.options import add_database, add_runtime_role, database, int_in
from crondepot.db import ALL_TENANTS, Database, connect, migrate, roles
from crondepot.db.connect import POOLED_URL_ENV, URL_ENV
from crondepot.db.embedded import default_data_dir, up_holder, up_lock_path
from crondepot.db.embedded import stop as stop_embedded
from crondepot.runtime import logs
from crondepot.runtime.lifecycle import STOP_SIGNALS, on_signals

CONSOLE_PATH = "/console"   # crondepot.api.console.session.PATH (not imported: FastAPI)

log = logging.getLogger("crondepot.up")


class UpRefused(CrondepotError):
    """``up`` cannot start: a port it would serve on is taken, or another ``up`` holds the
    embedded database."""


def register(commands: Any) -> None:
    parser = commands.add_parser("up", help="migrate, then run scheduler copies and workers "
                                            "under one supervisor (embedded PostgreSQL "
                                            "without --db)")
    add_database(parser)
    add_runtime_role(parser)
    parser.add_argument("--schedulers", type=int_in(1, 64, "a number of copies"), default=3,
                        metavar="N", help="scheduler copies, 1 to 64 (default 3)")
    parser.add_argument("--workers", type=int_in(0, 256, "a number of processes"), default=1,
                        metavar="N", help="worker processes, 0 to 256 (default 1)")
    parser.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="MODULE", help="module whose handlers the workers register")
    parser.add_argument("--tick", type=_tick, default="2s", metavar="DURATION",
                        help="scheduler tick, e.g. 2s or 500ms (default 2s)")
    parser.add_argument("--host", default="127.0.0.1", help="API address (default 127.0.0.1)")
    parser.add_argument("--port", type=int_in(1, 65535, "a port"), default=8080,
                        help="API and console port (default 8080)")
    parser.add_argument("--metrics-port", type=int_in(0, 65535 - 320, "a port"), default=0,
                        metavar="PORT",
                        help="serve Prometheus /metrics: scheduler-1 on PORT, the other "
                             "copies and then the workers on the ports after it, one each "
                             "(all printed at start; default 0: off)")
    parser.add_argument("--demo", action="store_true",
                        help="also create a demo tenant and sample reminder jobs; the workers "
                             "answer sms.send with a demo gateway that only logs")
    parser.set_defaults(run=run)


@dataclass
class Child:
    name: str
    argv: list[str]
    env: dict[str, str] | None = None
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    started_at: float = field(default=0.0)

    def start(self) -> None:
        # Its own process group: the terminal's signals are the supervisor's to pass on.
        self.process = subprocess.Popen(self.argv, env=self.env, process_group=0)
        self.started_at = time.monotonic()
        log.info("started %s", self.name, extra={"child_pid": self.process.pid})


def _tick(text: str) -> str:
    """The tick as the scheduler will read it, checked here: a bad one is a usage error of
    ``up`` (exit 2), not a scheduler crash-looping under the supervisor."""
    from crondepot.cli.shared.options import duration

    try:
        duration(text)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(f"expected a duration like 2s or 500ms, got {text!r}"
                                         ) from None
    return text


def metrics_ports(args: argparse.Namespace) -> dict[str, int]:
    """Child name -> its /metrics port (none when --metrics-port is 0)."""
    if not args.metrics_port:
        return {}
    names = [f"scheduler-{i}" for i in range(1, args.schedulers + 1)] + \
        [f"worker-{i}" for i in range(1, args.workers + 1)]
    return {name: args.metrics_port + n for n, name in enumerate(names)}


def run(args: argparse.Namespace) -> int:
    logs.setup()
    embedded_role(not args.db, args.runtime_role)
    ports = [args.port, *metrics_ports(args).values()]
    # "Stops what it started": the embedded server is stopped at the end if this command
    # started it; one that was already running (a `crondepot db` session, a scheduler
    # started by hand) is left running.
    data_dir = None if (args.db or os.environ.get(URL_ENV)) else \
        Path(args.data_dir or default_data_dir()).expanduser().resolve()
    if data_dir is None:
        check_ports_free(args.host, ports)
        return _run(args)
    # The lock first: a second `up` on the same directory is told which `up` holds it, not
    # that the port that one serves on is taken.
    with sole_up(data_dir):
        check_ports_free(args.host, ports)
        started_server = not (data_dir / "postmaster.pid").exists()
        return _run_and_stop(args, data_dir if started_server else None)


def _run_and_stop(args: argparse.Namespace, data_dir: Path | None) -> int:
    """Run; then stop the embedded server in ``data_dir`` if this ``up`` started it."""
    try:
        return _run(args)
    finally:
        # pgserver stops the server when its last user lets go, but not if it counts a
        # process that is gone or still closing: stop it by its data directory.
        if data_dir is not None:
            stop_embedded(data_dir)
            if not (data_dir / "postmaster.pid").exists():
                log.info("embedded PostgreSQL stopped (%s)", data_dir)
                print(f"embedded PostgreSQL in {data_dir} stopped", flush=True)


def check_ports_free(host: str, ports: list[int]) -> None:
    """Refuse to start when a port the API or a metrics server will bind is taken (another
    ``up``, another program): its child would otherwise fail and restart for ever."""
    for port in ports:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            # As uvicorn binds: a port in TIME_WAIT from a previous run is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound: {exc}"
                raise UpRefused(f"port {port} on {host} {why} (another crondepot up?); "
                                "choose another with --port (or --metrics-port)") from None


@contextlib.contextmanager
def sole_up(data_dir: Path) -> Iterator[None]:
    """Hold the embedded data directory's ``up`` lock while this ``up`` runs. A second
    ``up`` on the same directory is refused: it would report itself up while its API cannot
    bind, and the first one's exit would stop the server under it."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(up_lock_path(data_dir), "a+") as lock:
        if not _lock(lock):
            holder = up_holder(data_dir)
            raise UpRefused(f"another crondepot up{f' (pid {holder})' if holder else ''} is "
                            f"running on the embedded database in {data_dir}: use that one, "
                            "stop it (Ctrl-C in its terminal), or give this one another "
                            "--data-dir") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        yield   # the lock goes with the file's closing, or with the process


def _lock(lock: IO[str], tries: int = 5) -> bool:
    """Take the lock, or say it is held. A few tries: `crondepot db status` holds it shared
    for an instant to ask whether an ``up`` runs."""
    for _ in range(tries):
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.05)
    return False


def _run(args: argparse.Namespace) -> int:
    ports = metrics_ports(args)
    with database(args) as db:
        with connect(db.owner_url, application_name="crondepot-up",
                     tenants=ALL_TENANTS) as conn:
            applied = migrate(conn, runtime_role=args.runtime_role,
                              runtime_password=args.runtime_password)
        runtime = roles.runtime_url(db.owner_url, args.runtime_role, args.runtime_password)
        demo_token = _as_runtime(runtime, args.runtime_role, args.demo)
        log.info("database %s ready (%d migrations applied); processes connect as %s",
                 db.describe(), len(applied), args.runtime_role)
        env = {**os.environ, URL_ENV: runtime}
        # A pooled URL in the environment is the workers' and schedulers' (a role that sees
        # every tenant), which the API refuses: up runs its API on the direct URL.
        api_env = {k: v for k, v in env.items() if k != POOLED_URL_ENV}
        run_ = [sys.executable, "-m", "crondepot"]
        children = [
            Child("api", [*run_, "api", "--host", args.host, "--port", str(args.port)],
                  api_env),
        ] + [
            Child(f"scheduler-{i}", [*run_, "scheduler", "--tick", args.tick,
                                     "--name", f"scheduler-{i}",
                                     *_metrics(ports, f"scheduler-{i}", args.host)], env)
            for i in range(1, args.schedulers + 1)
        ]
        # --demo: the tour's reminders name sms.send; the demo gateway answers them.
        modules = [*args.imports, *([demo.SMS_HANDLERS] if args.demo else [])]
        imports = [arg for module in modules for arg in ("--import", module)]
        children += [
            Child(f"worker-{i}", [*run_, "worker", "--name", f"worker-{i}", *imports,
                                  *_metrics(ports, f"worker-{i}", args.host)], env)
            for i in range(1, args.workers + 1)
        ]
        _welcome(args, demo_token, ports)
        return supervise(children)


def _as_runtime(url: str, role: str, install_demo: bool) -> str | None:
    """Connect as the runtime role before starting anything that will (a role it cannot log
    in as is one clear error, not every child crash-looping); install the demo if asked."""
    try:
        with connect(url, application_name="crondepot-up", tenants=ALL_TENANTS) as conn:
            return demo.install(conn).token if install_demo else None
    except psycopg.OperationalError as exc:
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise roles.RoleError(
            f"cannot connect as the runtime role {role} ({Database(url=url).describe()}): "
            f"{detail}. Give its password in {roles.RUNTIME_PASSWORD_ENV} (migrate and up "
            "set it) or in ~/.pgpass") from None


def _metrics(ports: dict[str, int], name: str, host: str) -> list[str]:
    """A child's metrics options: on the API's address, so the welcome's URLs are true."""
    return ["--metrics-port", str(ports[name]), "--metrics-host", host] if name in ports \
        else []


def _welcome(args: argparse.Namespace, demo_token: str | None,
             ports: dict[str, int]) -> None:
    base = f"http://{args.host}:{args.port}"
    lines = [f"crondepot is up: API {base}/v1, docs {base}/docs, OpenAPI {base}/openapi.json",
             f"console: {base}{CONSOLE_PATH}/ (sign in with a tenant's API token)"]
    if ports:
        lines.append("metrics: " + ", ".join(
            f"{name} http://{args.host}:{port}/metrics" for name, port in ports.items()))
    if demo_token:
        lines += [
            f"demo tenant token (shown once): {demo_token}",
            f"  curl -H 'Authorization: Bearer {demo_token}' {base}/v1/jobs",
            "runs of the demo jobs appear in this log within a minute "
            "(handler crondepot.log); Ctrl-C stops everything",
        ]
    print("\n".join(lines), flush=True)


def supervise(children: list[Child]) -> int:
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        log.info("received %s, stopping", signal.Signals(signum).name)
        stop.set()

    on_signals(STOP_SIGNALS, on_signal)
    for child in children:
        child.start()
    while not stop.wait(0.5):
        for child in children:
            if not stop.is_set():
                _restart_if_dead(child)
    _stop_all(children)
    return 0


def _restart_if_dead(child: Child) -> None:
    assert child.process is not None
    code = child.process.poll()
    if code is None:
        return
    # A child that ran for a while restarts at once; one that keeps dying waits longer.
    lived = time.monotonic() - child.started_at
    child.restarts = 0 if lived > 30 else child.restarts + 1
    pause = min(2 ** child.restarts * 0.25, 10.0)
    log.warning("%s exited with %s; restarting in %.2fs", child.name, code, pause)
    time.sleep(pause)
    child.start()


def _stop_all(children: list[Child], grace: float = 30.0) -> None:
    for child in children:
        if child.process and child.process.poll() is None:
            child.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for child in children:
        if child.process is None:
            continue
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("%s did not stop in %.0fs; killing it", child.name, grace)
            child.process.kill()
            child.process.wait()
    log.info("all stopped")
