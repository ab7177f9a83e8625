"""Many calls of one worker process waiting on one rate limit: do they get the bucket's rate?

A worker with C slots behind a saturated bucket has up to C calls waiting in
``RateLimiter.acquire`` at once. This starts ``--threads`` of them in one process, each taking
a token and "calling" at once (the call costs nothing here), against a bucket of ``--rate``
(burst = rate) that starts empty, for ``--seconds``; it prints the tokens used per second
after the first two seconds (the goal: the bucket's rate), the tokens that went stale before
their caller could use them (taken but not used within HOLD_SECONDS: wasted), the takes
sent to the database per token, and the process's CPU per token used (the waiting's cost:
thread wake-ups and takes).

    python bench/bucket_herd.py                      # 50/s × 60 threads, 450/s × 300 threads
    python bench/bucket_herd.py --rate 450 --threads 300 --seconds 10

Figures are printed, never asserted (docs/records/performance-runs.md, "The bucket's herd").
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from common import DEFAULT_ADMIN_URL, fresh_database
from crondepot.limits.buckets import HOLD_SECONDS, RateLimiter, set_limit


class Counted:
    def __init__(self, pool: ConnectionPool) -> None:
        self.pool, self.takes = pool, 0

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        self.takes += 1
        with self.pool.connection() as conn:
            yield conn


def measure(url: str, rate: float, threads: int, seconds: float) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        set_limit(conn, "gw", rate, max(1, int(rate)))
        conn.execute("UPDATE rate_limits SET tokens = 0, refilled_at = clock_timestamp()")
    with ConnectionPool(url, min_size=4, max_size=8, kwargs={"autocommit": True}) as pool:
        pool.wait()
        counted = Counted(pool)
        limiter = RateLimiter(counted)  # type: ignore[arg-type]
        start = time.monotonic()
        cpu_start = time.process_time()
        stop = start + seconds
        used: list[float] = []
        stale = [0]

        def slot() -> None:
            while True:
                taken = limiter.acquire("gw", give_up=lambda: time.monotonic() >= stop)
                if taken is None:
                    return
                now = time.monotonic()
                if now - taken <= HOLD_SECONDS:
                    used.append(now)
                else:
                    stale[0] += 1

        workers = [threading.Thread(target=slot) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        cpu = time.process_time() - cpu_start
    steady = sum(1 for at in used if at - start > 2) / (seconds - 2)
    return (f"{rate:g}/s, {threads} waiting: {steady:.1f} tokens/s used after 2 s "
            f"({steady / rate:.0%}), {stale[0]} stale, "
            f"{counted.takes / max(1, len(used) + stale[0]):.2f} takes per token, "
            f"{cpu / max(1, len(used)) * 1e3:.2f} ms of this process's CPU per token used")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--rate", type=float, help="tokens per second (both defaults if unset)")
    parser.add_argument("--threads", type=int, default=60)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    shapes = [(args.rate, args.threads)] if args.rate else [(50.0, 60), (450.0, 300)]
    with fresh_database(args.db, "crondepot_bench_bucket_herd") as url:
        for rate, threads in shapes:
            print(measure(url, rate, threads, args.seconds), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
