"""The ready queue: runs with status 'queued' in PostgreSQL, one logical queue per priority.

``claim`` takes runs in a weighted order, ``lease`` keeps and fences them, ``outcome``
records what happened. Every write that follows a claim is conditional on the lease token.
"""

from __future__ import annotations

from crondepot.queue.claim import (
    ClaimedRun,
    WeightedOrder,
    WindowedTenants,
    claim_runs,
    claimed_windows,
)
from crondepot.queue.lease import extend_acquired_leases, reap_abandoned_runs
from crondepot.queue.outcome import (
    LostLease,
    Success,
    defer_queued_run,
    defer_run,
    record_final_failure,
    record_replaced,
    record_retry,
    record_success,
    record_successes,
    release_run,
    retry_later,
    skip_past_deadline,
)

__all__ = [
    "ClaimedRun",
    "LostLease",
    "Success",
    "WeightedOrder",
    "WindowedTenants",
    "claim_runs",
    "claimed_windows",
    "defer_queued_run",
    "defer_run",
    "extend_acquired_leases",
    "reap_abandoned_runs",
    "record_final_failure",
    "record_replaced",
    "record_retry",
    "record_success",
    "record_successes",
    "release_run",
    "retry_later",
    "skip_past_deadline",
]
