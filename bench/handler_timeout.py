"""What a python target's ``timeout_s`` costs a call: the handler then runs in a thread of its
own (sync) or under ``asyncio.wait_for`` (async), instead of in the slot's thread.

No database: the worker's python target (``crondepot.worker.targets.python``) is called
directly with a no-op handler, ``--calls`` times per case (default 20,000), each case
measured ``--passes`` times (default 3); the median per call is printed for a sync and an
async handler, without and with a timeout. Figures are printed, never asserted. One command:

    python bench/handler_timeout.py [--calls 20000] [--passes 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from crondepot.queue import ClaimedRun
from crondepot.worker.handlers import RunContext, handler
from crondepot.worker.targets import PythonTarget


@handler("bench.sync_noop")
def _sync_noop(run: RunContext) -> None:
    return None


@handler("bench.async_noop")
async def _async_noop(run: RunContext) -> None:
    return None


def _run(target: dict[str, Any]) -> ClaimedRun:
    now = datetime.now(UTC)
    return ClaimedRun(run_id="1:1791171000", job_id=1, job_key="k", tenant_id=1,
                      priority="normal", nominal_at=now, due_at=now, attempt=1,
                      lease_token=uuid4(), lease_expires_at=now, db_now=now, target=target,
                      payload={}, max_attempts=6, lease_seconds=60, rate_limit=None,
                      signing_secret="")


def _per_call(target: PythonTarget, run: ClaimedRun, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        target.call(run, "bank42")
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    target = PythonTarget()
    print(f"{'handler':<8} {'timeout_s':<10} {'µs per call (median of passes)':>32}")
    for kind in ("sync", "async"):
        for timeout in (None, 30):
            members: dict[str, Any] = {"type": "python", "handler": f"bench.{kind}_noop"}
            if timeout is not None:
                members["timeout_s"] = timeout
            run = _run(members)
            _per_call(target, run, min(1000, args.calls))            # warm up
            figures = [_per_call(target, run, args.calls) for _ in range(args.passes)]
            print(f"{kind:<8} {timeout!s:<10} {statistics.median(figures) * 1e6:>32.1f}")


if __name__ == "__main__":
    main()
