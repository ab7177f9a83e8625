"""A/B of schema variants under the workers benchmark's drain: the same crondepot-best drain
(``bench/workers.py``: 20,000 ready runs, P real worker processes at 100 slots) in fresh
databases that differ only by a few statements run after the migrations, interleaved round
by round so the machine's drift falls on every variant alike.

Variants (``--variants``, comma-separated, in the order they run each round):

- ``migrated``: the schema as the migrations leave it;
- ``full-listing-index``: ``runs_tenant_status_ended`` as it was before migration 0019, with
  running runs in it (a claim writes one more index entry per run);
- ``fillfactor-80``: ``runs`` with free space on each page, so that a row's new version
  may stay on its page;
- ``run-id-collate-c``: ``runs.run_id`` compared bytewise (``COLLATE "C"``) rather than by
  the database's collation;
- ``baseline``: the migrated schema, with workers running the code of another commit
  (``--baseline REV``, extracted with ``git archive``; its migrations must be the same) and
  that commit's SQL functions (``db/sql/functions``) put back where they differ, recorded
  at their revisions so its workers accept the schema. A change in the worker's Python or
  in a function such as the claim is measured this way.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/worker_ab.py --variants full-listing-index,migrated --processes 1,2,4 --rounds 4
    python bench/worker_ab.py --variants baseline,migrated --baseline 67d22f0 --processes 2,4

It prints one idle worker's start-up CPU per variant, each drain, then per variant and P the
medians of first->last runs/s, worker and PostgreSQL CPU µs per run and WAL bytes per run.
The variants run in the given order in even rounds and in the reverse order in odd ones.
Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from common import (
    DEFAULT_ADMIN_URL,
    BenchDatabases,
    compile_crondepot,
    run_interruptibly,
    variants_and_baseline,
)
from workers import (
    BEST_CONCURRENCY,
    Drain,
    SchemaChange,
    drain,
    load_line,
    server_report,
    startup_cpu,
)

VARIANTS: dict[str, list[str]] = {
    "migrated": [],
    "full-listing-index": [
        "DROP INDEX runs_tenant_status_ended",
        "CREATE INDEX runs_tenant_status_ended ON runs "
        "(tenant_id, status, (coalesce(finished_at, due_at)) DESC, run_id DESC)",
    ],
    "fillfactor-80": ["ALTER TABLE runs SET (fillfactor = 80)"],
    "run-id-collate-c": ['ALTER TABLE runs ALTER COLUMN run_id TYPE text COLLATE "C"'],
    "baseline": [],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--variants", default="full-listing-index,migrated",
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--processes", default="1,2,4", help="worker processes, e.g. 1,2,4")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--size", type=int, default=20_000, help="runs per drain (20000)")
    parser.add_argument("--baseline", metavar="REV",
                        help="the commit whose code the 'baseline' variant's workers run")
    args = parser.parse_args(argv)
    names = variants_and_baseline(parser, args, VARIANTS, "baseline")
    processes = [int(p) for p in args.processes.split(",")]
    with source_of(args.baseline) as source:
        return run_interruptibly(
            lambda: run(args.db, names, processes, args.rounds, args.size, source), load_line)


@contextlib.contextmanager
def source_of(rev: str | None) -> Iterator[str | None]:
    """A temporary folder holding the ``crondepot`` package as commit ``rev`` had it."""
    if rev is None:
        yield None
        return
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="crondepot-baseline-") as folder:
        archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src"],
                                 capture_output=True, check=False)
        if archive.returncode != 0:
            raise SystemExit(f"--baseline: git archive {rev}: "
                             f"{archive.stderr.decode(errors='replace').strip()}")
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        # Compiled now, as the installed code is: else the baseline's first processes would
        # count compiling every module in their start-up.
        subprocess.run([sys.executable, "-m", "compileall", "-q", folder], check=True)
        yield str(Path(folder) / "src")


def _functions_of(source: str) -> list[SchemaChange]:
    """Statements that put the SQL functions of the package in ``source`` in place of the
    current ones where their text differs, and record them at their own revisions (a worker
    refuses a schema whose functions are newer than its code)."""
    from crondepot.db import Q
    from crondepot.db.migrations import Definition, definitions

    current = {d.name: d.checksum for d in definitions()}
    files = sorted((Path(source) / "crondepot" / "db" / "sql" / "functions").glob("*.sql"))
    if {path.stem for path in files} != set(current):
        raise SystemExit("--baseline: its SQL functions are not the same set as the current "
                         "ones; compare commits with the same functions")
    statements: list[SchemaChange] = []
    for path in files:
        old = Definition(name=path.stem, sql=path.read_text())
        if current[old.name] == old.checksum:
            continue
        statements += [old.sql, (Q.record_definition, {
            "name": old.name, "revision": old.revision, "checksum": old.checksum})]
    return statements


def run(admin_url: str, names: list[str], processes: list[int], rounds: int,
        size: int, baseline: str | None = None) -> None:
    for line in server_report(admin_url):
        print(line)
    print(f"command: {' '.join(['python', *sys.argv])}\n", flush=True)
    compile_crondepot()
    databases = BenchDatabases(admin_url, "crondepot_wab_")

    def source(name: str) -> str | None:
        return baseline if name == "baseline" else None

    def changes(name: str) -> list[SchemaChange]:
        return VARIANTS[name] + (_functions_of(baseline) if baseline and name == "baseline"
                                 else [])

    for name in names:
        cpu = startup_cpu(databases, "crondepot-best", BEST_CONCURRENCY, source(name),
                          changes(name))
        print(f"  {name:>20}: one idle worker process, start-up CPU {cpu:.2f} s", flush=True)
    results: dict[tuple[str, int], list[Drain]] = {}
    for round_ in range(max(1, rounds)):
        for p in processes:
            # Every other round in the reverse order: the drain that comes second in a round
            # ran slower in some runs, whichever variant it was.
            for name in names if round_ % 2 == 0 else names[::-1]:
                d = drain(databases, "crondepot-best", size, p, BEST_CONCURRENCY,
                          changes(name), source(name))
                results.setdefault((name, p), []).append(d)
                print(f"  {name:>20} P={p}: first->last {d.rate_f2l:>7,.0f} runs/s, "
                      f"worker {d.worker_cpu / d.size * 1e6:5.1f} us/run, "
                      f"PostgreSQL {d.postgres_cpu / d.size * 1e6:5.1f} us/run, "
                      f"WAL {d.wal_bytes / d.size:5.0f} B/run", flush=True)
    print(f"\nmedians of {rounds} rounds:")
    for p in processes:
        for name in names:
            ds = results[(name, p)]
            print(f"  {name:>20} P={p}: first->last "
                  f"{statistics.median(d.rate_f2l for d in ds):>7,.0f} runs/s, worker "
                  f"{statistics.median(d.worker_cpu / d.size * 1e6 for d in ds):5.1f} us/run, "
                  "PostgreSQL "
                  f"{statistics.median(d.postgres_cpu / d.size * 1e6 for d in ds):5.1f} us/run,"
                  f" WAL {statistics.median(d.wal_bytes / d.size for d in ds):5.0f} B/run")


if __name__ == "__main__":
    sys.exit(main())
