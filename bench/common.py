"""What the benchmarks share: a fresh database per measurement, the server's CPU and WAL,
the PostgreSQL facts printed with every run, and child processes that die with the
benchmark.

Imported by ``bench/*.py`` run as scripts (Python puts a script's folder first on the import
path), and by crondepot worker processes that import ``workers`` as a module. So
module-level imports stay at what every process here loads anyway (psycopg); psutil and
crondepot are imported inside the functions that use them, and a worker's RSS figure stays
crondepot's own.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import signal
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.conninfo import make_conninfo

if TYPE_CHECKING:
    import psutil  # type: ignore[import-untyped]

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SETUP_STATEMENT_TIMEOUT_MS = 15 * 60 * 1000


def admin_connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, connect_timeout=10,
                           options=f"-c statement_timeout={SETUP_STATEMENT_TIMEOUT_MS}")


@contextlib.contextmanager
def fresh_database(admin_url: str, name: str) -> Iterator[str]:
    """A new database ``name`` migrated by crondepot; its URL while in use; dropped after
    (also after a failed measurement, so runs never see each other's rows)."""
    from crondepot.db import migrate

    with admin_connect(admin_url) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_conninfo(admin_url, dbname=name)
    try:
        with admin_connect(url) as conn:
            migrate(conn)
        yield url
    finally:
        with admin_connect(admin_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def compile_crondepot() -> None:
    """Compile crondepot's modules where they are installed, as a regular install does. An
    editable install run with PYTHONDONTWRITEBYTECODE=1 (this machine's sessions set it) has
    none, so every worker process compiled every module it imported: 0.42 s of start-up CPU
    instead of 0.26 s, counted in its drain against peers that pip compiled."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("crondepot")
    if spec is None or not spec.submodule_search_locations:
        return
    for folder in spec.submodule_search_locations:
        compileall.compile_dir(folder, quiet=1)


class BenchDatabases:
    """Fresh databases ``<prefix><n>``, one per measurement: each migrated, with the tenant
    the benchmarks' jobs belong to (id 1), and dropped afterwards."""

    def __init__(self, admin_url: str, prefix: str) -> None:
        self.admin_url = admin_url
        self.prefix = prefix
        self.count = 0

    @contextlib.contextmanager
    def fresh(self) -> Iterator[str]:
        with self.empty() as url:
            with admin_connect(url) as conn:
                conn.execute("INSERT INTO tenants (name, signing_secret) "
                             "VALUES ('bank42', 'whsec_bench')")
            yield url

    @contextlib.contextmanager
    def empty(self) -> Iterator[str]:
        """The next database, migrated, without a tenant (for a benchmark that makes its
        own, with a token)."""
        self.count += 1
        with fresh_database(self.admin_url, f"{self.prefix}{self.count}") as url:
            yield url


def timed_calls(calls: int, call: Callable[[int], object]) -> str:
    """p50 and p99 in ms of ``calls`` calls of ``call`` (given the call's index), less the
    first twentieth: those plan the statements and warm the caches."""
    took = []
    for i in range(calls):
        start = time.perf_counter()
        call(i)
        took.append((time.perf_counter() - start) * 1000)
    took = sorted(took[calls // 20:])
    return (f"p50 {statistics.median(took):6.2f} ms, "
            f"p99 {took[int(len(took) * 0.99)]:6.2f} ms")


def server_processes(conn: psycopg.Connection[Any]) -> list[psutil.Process]:
    """The postmaster of the server behind ``conn`` and all its children."""
    import psutil

    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    postmaster = psutil.Process(psutil.Process(row[0]).ppid())
    return [postmaster, *postmaster.children()]


def server_cpu(conn: psycopg.Connection[Any]) -> dict[tuple[int, float], float]:
    """CPU seconds of every server process, keyed by (pid, start time): a backend that
    exits and a new one that reuses its pid are told apart."""
    import psutil

    times: dict[tuple[int, float], float] = {}
    for proc in server_processes(conn):
        with contextlib.suppress(psutil.Error):
            cpu = proc.cpu_times()
            times[(proc.pid, proc.create_time())] = cpu.user + cpu.system
    return times


def backend_cpu(conn: psycopg.Connection[Any]) -> Callable[[], float]:
    """A reader of the CPU seconds used so far by ``conn``'s server process."""
    import psutil

    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    process = psutil.Process(row[0])

    def used() -> float:
        times = process.cpu_times()
        return float(times.user + times.system)

    return used


def wal_lsn(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def server_lines(admin_url: str, settings: Sequence[str]) -> list[str]:
    """The server's version and the settings that decide a benchmark's figures."""
    with admin_connect(admin_url) as conn:
        version = conn.execute("SELECT version()").fetchone()
        values = []
        for name in settings:
            row = conn.execute(f"SHOW {name}").fetchone()
            values.append(f"{name}={row[0] if row else '?'}")
    return [f"PostgreSQL: {version[0] if version else '?'}",
            "settings: " + ", ".join(values)]


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the benchmark dies (Linux PR_SET_PDEATHSIG)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def run_interruptibly(run: Callable[[], None], after: Callable[[], str] = lambda: "") -> int:
    """A benchmark's main body: SIGTERM and SIGHUP end it through the same ``finally``
    blocks as Ctrl-C (children stopped, databases dropped); 130 if interrupted, else 0 after
    printing ``after()`` and the total time."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
    started = time.monotonic()
    try:
        run()
    except KeyboardInterrupt:
        print("\ninterrupted; child processes stopped, databases dropped", file=sys.stderr)
        return 130
    extra = after()
    print(f"\n{extra + chr(10) if extra else ''}total {time.monotonic() - started:.0f}s")
    return 0


def two_banks(conn: psycopg.Connection[Any]) -> tuple[tuple[int, int], tuple[int, int]]:
    """Two tenants, ``bank-a`` and ``bank-b``, each with one 9 a.m. webhook job: (tenant id,
    job id) of each. What the claim benchmarks queue their runs under."""
    from crondepot.job import JobSpec, create_jobs
    from crondepot.tenancy.tenants import create_tenant

    out = []
    for name, key, host in (("bank-a", "sms", "sms"), ("bank-b", "mail", "mail")):
        tenant = create_tenant(conn, name).id
        (job,) = create_jobs(conn, tenant, [JobSpec.from_document({
            "key": key, "cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "http", "url": f"https://{host}.example.com/send"}})])
        out.append((tenant, job.id))
    return out[0], out[1]


def variants_and_baseline(parser: argparse.ArgumentParser, args: argparse.Namespace,
                          known: Iterable[str], needs_baseline: str) -> list[str]:
    """The A/B benchmarks' ``--variants`` (comma-separated, each one of ``known``), checked
    with ``--baseline REV``, which the variant ``needs_baseline`` and only it requires.
    Errors go through ``parser.error`` (exit 2, the usage printed)."""
    known = list(known)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = set(names) - set(known)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}; choose from {known}")
    if (needs_baseline in names) != (args.baseline is not None):
        parser.error(f"--baseline REV and the variant {needs_baseline!r} go together")
    return names
