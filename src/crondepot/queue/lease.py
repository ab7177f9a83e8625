"""Leases: extending the ones a worker holds, and reaping the ones nobody renewed.

A lease is measured on the database clock. The worker turns it into a deadline on its own
monotonic clock (``Deadline``), measured from when the claim or heartbeat was *sent*, so a
worker never believes it holds a run longer than the database does: network delay only
makes the local deadline earlier, never later.

A run's lease time over all its attempts is capped (``max_lease_seconds``, default 12 h):
the heartbeat extends no lease past what is left, and the reaper sends a run that has used
it all to the dead letter.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg

from crondepot.db import Q

log = logging.getLogger("crondepot.worker")

DEFAULT_MAX_LEASE_SECONDS = 12 * 3600
SAFETY_SECONDS = 1.0   # stop starting calls this long before the lease ends


@dataclass(slots=True)
class Deadline:
    """A lease deadline on this process's monotonic clock. ``replace_requested``: the renewal
    that gave it found that a newer run of the job (overlap ``replace``) asked this one to
    give way (runs.replace_requested_at)."""

    monotonic: float
    replace_requested: bool = False

    @classmethod
    def from_lease(cls, lease_expires_at: datetime, db_now: datetime,
                   sent_at: float) -> Deadline:
        # sent_at: monotonic time the query was sent; the database answered later than that,
        # so counting from it errs on the early side.
        return cls(sent_at + (lease_expires_at - db_now).total_seconds() - SAFETY_SECONDS)

    def passed(self) -> bool:
        return time.monotonic() >= self.monotonic


@dataclass(frozen=True, slots=True)
class HeldLease:
    run_id: str
    token: UUID
    lease_seconds: int


def extend_acquired_leases(conn: psycopg.Connection[Any], held: Sequence[HeldLease], *,
                           max_lease_seconds: int = DEFAULT_MAX_LEASE_SECONDS,
                           now: datetime | None = None) -> dict[str, Deadline]:
    """Heartbeat: extend every lease still ours; return the new deadline of each one kept.

    A run missing from the result was lost (reaped, taken over, or past its cap). A kept
    run's deadline says whether it was asked to give way (overlap ``replace``): the same
    statement reads it, so learning of it costs the heartbeat nothing.
    """
    if not held:
        return {}
    sent_at = time.monotonic()
    rows = conn.execute(Q.extend_acquired_leases, {
        "run_ids": [h.run_id for h in held], "tokens": [h.token for h in held],
        "lease_seconds": [h.lease_seconds for h in held], "max_lease": max_lease_seconds,
        "now": now,
    }).fetchall()
    kept: dict[str, Deadline] = {}
    for run_id, expires, db_now, replace in rows:
        deadline = Deadline.from_lease(expires, db_now, sent_at)
        deadline.replace_requested = bool(replace)
        kept[run_id] = deadline
    return kept


def reap_abandoned_runs(conn: psycopg.Connection[Any], *,
                        max_lease_seconds: int = DEFAULT_MAX_LEASE_SECONDS,
                        now: datetime | None = None) -> dict[str, int]:
    """Return expired-lease runs to the queue, or to the dead letter when that was their last
    attempt or their lease time in all reached ``max_lease_seconds``; counts by new status."""
    counts = {"queued": 0, "dead": 0}
    for run_id, status, job_id, job_key, error in conn.execute(Q.reap_abandoned_runs, {
            "now": now, "max_lease": max_lease_seconds}).fetchall():
        counts[status] += 1
        if status == "dead":     # one WARNING line per dead run, as the worker writes
            log.warning("run %s dead: job %s: %s", run_id, job_key or job_id, error,
                        extra={"run_id": run_id, "job_id": job_id, "job_key": job_key,
                               "outcome": "dead"})
    return counts


def skip_runs_past_deadline(conn: psycopg.Connection[Any], *,
                            now: datetime | None = None) -> list[tuple[str, int, int]]:
    """Record skipped ('deadline_passed') the queued runs whose misfire deadline has passed:
    the claim never leases them, and this sweep, run with the reaper, writes why. Returns
    (run id, job id, tenant id) of each, at most 1,000 a call."""
    rows: list[tuple[str, int, int]] = conn.execute(Q.skip_runs_past_deadline,
                                                    {"now": now}).fetchall()
    return rows
