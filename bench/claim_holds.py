"""A claim while a hold covers many queued runs (docs/operations.md, holds): in a fresh database
(``crondepot_holdbench``, migrated, dropped after), tenant A has N queued runs (default
100,000) of one job calling sms.example.com, tenant B 200 free runs of another; A holds the
host. Times the hold, then ``SELECT crondepot_claim_runs(...)`` called directly (20 normal
turns, as queue/claim.py calls it; each call rolled back so every call meets the same
queue), median of ``--calls``, before and after a VACUUM of runs, and with 1,000 held runs
queued since the last sweep (the rescuer's); then the sweep and the release.

    python bench/claim_holds.py --db postgresql://postgres@127.0.0.1:5432/postgres [-n N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import psycopg

from common import admin_connect, fresh_database, two_banks
from crondepot.limits import holds

CLAIM = ("SELECT count(*) FROM crondepot_claim_runs('bench', ARRAY[0, 20, 0], "
         "ARRAY[0, 0, 0], NULL)")


def _runs(conn: psycopg.Connection[Any], tenant_id: int, job_id: int, count: int,
          tag: str = "r") -> None:
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "available_at) SELECT %s || '-' || g, %s, %s, 'normal', "
        "now() - make_interval(secs => g), now() - make_interval(secs => g), "
        "now() - make_interval(secs => g) FROM generate_series(1, %s) AS g",
        (f"{tag}{job_id}", job_id, tenant_id, count))


def _claims(conn: psycopg.Connection[Any], calls: int) -> tuple[float, int]:
    times = []
    got = 0
    for _ in range(calls):
        start = time.perf_counter()
        row = conn.execute(CLAIM).fetchone()
        got = row[0] if row else 0
        times.append(time.perf_counter() - start)
        conn.rollback()
    return statistics.median(times) * 1000, got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="an admin URL (a database is created)")
    parser.add_argument("-n", type=int, default=100_000, help="held queued runs of A")
    parser.add_argument("--calls", type=int, default=7)
    args = parser.parse_args()
    with fresh_database(args.db, "crondepot_holdbench") as url, admin_connect(url) as conn:
        (a, ja), (b, jb) = two_banks(conn)
        _runs(conn, a, ja, args.n)
        _runs(conn, b, jb, 200)
        conn.execute("VACUUM ANALYZE runs")
        median, got = _claims(conn, args.calls)
        print(f"no hold: claim median {median:.1f} ms ({got} runs)")
        start = time.perf_counter()
        holds.hold(conn, a, "host", "sms.example.com")
        print(f"hold over {args.n} queued runs: {time.perf_counter() - start:.2f} s")
        conn.autocommit = False
        median, got = _claims(conn, args.calls)
        print(f"held: claim median {median:.1f} ms ({got} runs)")
        conn.autocommit = True
        conn.execute("VACUUM runs")
        conn.autocommit = False
        median, got = _claims(conn, args.calls)
        print(f"held, after VACUUM: claim median {median:.1f} ms ({got} runs)")
        conn.autocommit = True
        _runs(conn, a, ja, 1000, tag="late")         # queued since the rescuer's turn
        conn.autocommit = False
        median, got = _claims(conn, args.calls)
        print(f"held, 1,000 not swept yet: claim median {median:.1f} ms ({got} runs)")
        conn.autocommit = True
        start = time.perf_counter()
        moved = holds.sweep(conn)
        print(f"sweep: {moved} runs in {time.perf_counter() - start:.2f} s")
        start = time.perf_counter()
        holds.release(conn, a, "host", "sms.example.com")
        print(f"release: {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
