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
  the database's collation.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/worker_ab.py --variants full-listing-index,migrated --processes 1,2,4 --rounds 4

It prints each drain, then per variant and P the medians of first->last runs/s, PostgreSQL
CPU µs per run and WAL bytes per run. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from common import DEFAULT_ADMIN_URL, BenchDatabases, run_interruptibly
from workers import BEST_CONCURRENCY, Drain, drain, load_line, server_report

VARIANTS: dict[str, list[str]] = {
    "migrated": [],
    "full-listing-index": [
        "DROP INDEX runs_tenant_status_ended",
        "CREATE INDEX runs_tenant_status_ended ON runs "
        "(tenant_id, status, (coalesce(finished_at, due_at)) DESC, run_id DESC)",
    ],
    "fillfactor-80": ["ALTER TABLE runs SET (fillfactor = 80)"],
    "run-id-collate-c": ['ALTER TABLE runs ALTER COLUMN run_id TYPE text COLLATE "C"'],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--variants", default="full-listing-index,migrated",
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--processes", default="1,2,4", help="worker processes, e.g. 1,2,4")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--size", type=int, default=20_000, help="runs per drain (20000)")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = set(names) - set(VARIANTS)
    if unknown:
        parser.error(f"--variants: unknown {sorted(unknown)}; choose from {list(VARIANTS)}")
    processes = [int(p) for p in args.processes.split(",")]
    return run_interruptibly(lambda: run(args.db, names, processes, args.rounds, args.size),
                             load_line)


def run(admin_url: str, names: list[str], processes: list[int], rounds: int,
        size: int) -> None:
    for line in server_report(admin_url):
        print(line)
    print(f"command: {' '.join(['python', *sys.argv])}\n", flush=True)
    databases = BenchDatabases(admin_url, "crondepot_wab_")
    results: dict[tuple[str, int], list[Drain]] = {}
    for _ in range(max(1, rounds)):
        for p in processes:
            for name in names:
                d = drain(databases, "crondepot-best", size, p, BEST_CONCURRENCY,
                          VARIANTS[name])
                results.setdefault((name, p), []).append(d)
                print(f"  {name:>20} P={p}: first->last {d.rate_f2l:>7,.0f} runs/s, "
                      f"PostgreSQL {d.postgres_cpu / d.size * 1e6:5.1f} us/run, "
                      f"WAL {d.wal_bytes / d.size:5.0f} B/run", flush=True)
    print(f"\nmedians of {rounds} rounds:")
    for p in processes:
        for name in names:
            ds = results[(name, p)]
            print(f"  {name:>20} P={p}: first->last "
                  f"{statistics.median(d.rate_f2l for d in ds):>7,.0f} runs/s, PostgreSQL "
                  f"{statistics.median(d.postgres_cpu / d.size * 1e6 for d in ds):5.1f} us/run,"
                  f" WAL {statistics.median(d.wal_bytes / d.size for d in ds):5.0f} B/run")


if __name__ == "__main__":
    sys.exit(main())
