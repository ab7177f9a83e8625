"""50,000 runs failing together come back spread out, not in one second.

The runs are real rows, claimed through the queue API, and each attempt goes through the
worker's own ``Executor.run`` with a handler raising ``TemporaryError``: the same path a
worker slot takes (classify → ``retry.decide`` → ``queue.outcome.record_retry``, one fenced
write and commit per run). Then the database says when each run will be tried again.

The delay is read as ``available_at - updated_at``: ``record_retry`` sets both from the same
``now()`` (the instant of the failure write), so the difference is exactly the backoff it
stored, whatever the time the 50,000 writes took between them.

Expected figures (full jitter, attempt 1: ``uniform(0, 30)``): 50,000 / 30 ≈ 1,667 runs per
one-second bucket on average, with a standard deviation of sqrt(50,000 · 1/30 · 29/30) ≈ 40;
the busiest of 30 such buckets lands about two deviations above the mean, near the source
document's 1,750 (the unit test tests/unit/test_retry.py checks the same on ``decide()``
alone). Chance of a flake, were the random source not seeded:
- busiest above 1,925 (1,750 + 10 %): one bucket ≥ 6.4 deviations high, ≤ 30 · 1e-10;
- busiest below 1,575: impossible, the busiest bucket is at least the mean, 1,667;
- some one-second bucket of the 30 empty: ≤ 30 · (29/30)^50,000 ≈ 1e-735;
- ``max - min < 29.9`` s: ≈ 2 · 50,000 · (1 - 0.1/30)^50,000 ≈ 1e-67.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from crondepot import TemporaryError
from crondepot.job.guard import AddressGuard
from crondepot.limits.buckets import RateLimiter
from crondepot.queue import ClaimedRun, claim_runs
from crondepot.queue.lease import Deadline
from crondepot.queue.retry import backoff_cap
from crondepot.worker.execute import Attempt, Executor
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.targets import WebhookTarget
from tests.support.jobs import queued_runs

RUNS = 50_000
THREADS = 16          # slots writing their retries at once, as a worker's would
SOURCE_BUSIEST = 1750
SEED = 20261130


@handler("test.retry_spread.busy")
def _gateway_busy(run: RunContext) -> None:
    raise TemporaryError("gateway said 503")


def _claim_all(conn: psycopg.Connection[Any]) -> list[tuple[ClaimedRun, Deadline]]:
    claimed: list[tuple[ClaimedRun, Deadline]] = []
    while len(claimed) < RUNS:
        sent_at = time.monotonic()
        batch = claim_runs(conn, owner="retry-spread", shares={"normal": 5000})
        assert batch, f"claimed {len(claimed)} of {RUNS}, then nothing"
        claimed += [(r, Deadline.from_lease(r.lease_expires_at, r.db_now, sent_at))
                    for r in batch]
    return claimed


@pytest.mark.slow
def test_50000_runs_failing_together_come_back_spread_over_30_seconds(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    began = time.perf_counter()
    queued_runs(conn, RUNS, handler="test.retry_spread.busy", lease_seconds=600)
    claimed = _claim_all(conn)
    assert len({r.run_id for r, _ in claimed}) == RUNS and {r.attempt for r, _ in claimed} == {1}
    row = conn.execute("SELECT clock_timestamp()").fetchone()
    assert row is not None
    failed_from = row[0]

    # A pool of fixed size, opened before the seed: psycopg_pool draws from the random
    # module (expiry jitter) when it opens a connection. Commits are not flushed one by one
    # (synchronous_commit=off): the write path is the worker's, its durability is not what
    # this test measures, and the flushes were a fifth of its time.
    with ConnectionPool(db_url, min_size=THREADS, max_size=THREADS, open=True,
                        kwargs={"autocommit": True,
                                "options": "-c synchronous_commit=off"}) as pool:
        pool.wait()
        webhooks = WebhookTarget(AddressGuard.from_env())
        executor = Executor(pool, OutcomeWriter(pool), RateLimiter(pool), webhooks,
                            stopping=lambda: False)

        def fail_once(item: tuple[ClaimedRun, Deadline]) -> str:
            return executor.run(Attempt(item[0], item[1]), recorded=lambda: None)

        # Executor calls decide() without a random source of its own, so full_jitter draws
        # from the random module: seed it for this part only. Threads take values from the
        # seeded sequence in any order, but each run takes exactly one, so the 50,000
        # delays are the same on every run of the test.
        state = random.getstate()
        random.seed(SEED)
        writing = time.perf_counter()
        try:
            with ThreadPoolExecutor(THREADS) as threads:
                outcomes = Counter(threads.map(fail_once, claimed, chunksize=500))
        finally:
            random.setstate(state)
        webhooks.close()
    written = time.perf_counter()
    assert outcomes == {"done": RUNS}              # every failure was written, none deferred

    rows = conn.execute(
        """
        SELECT status, attempt, error_class, lease_token IS NULL,
               extract(epoch FROM available_at - updated_at)::float8,
               updated_at >= %s AND updated_at <= clock_timestamp()
        FROM runs
        """, (failed_from,)).fetchall()
    # No run lost: every one is queued again, its first attempt counted, its lease given up.
    assert len(rows) == RUNS
    assert Counter((s, a, e, free, inside) for s, a, e, free, _, inside in rows) == {
        ("queued", 1, "TemporaryError", True, True): RUNS}

    delays = [row[4] for row in rows]
    per_second = Counter(int(d) for d in delays)
    busiest = max(per_second.values())
    spread = max(delays) - min(delays)
    print(f"\n{RUNS} retries written in {written - writing:.1f}s; delays {min(delays):.3f}.."
          f"{max(delays):.3f}s (max-min {spread:.3f}s) over {len(per_second)} one-second "
          f"buckets; busiest second {busiest} (quietest {min(per_second.values())}); "
          f"test {time.perf_counter() - began:.1f}s")
    assert min(delays) >= 0 and max(delays) <= backoff_cap(1) == 30
    # Spread over 30 s: every one of the 30 one-second buckets from 0 to 29 s is used, and
    # the first and last retry are (almost) the whole 30 s apart. Strictly, uniform(0, 30)
    # never puts them 30 s apart: max - min < 30 always.
    assert sorted(per_second) == list(range(30)), sorted(per_second)
    assert spread >= 29.9, spread
    assert abs(busiest - SOURCE_BUSIEST) <= SOURCE_BUSIEST * 0.10, busiest
