"""Claiming runs: which priorities to read, in what proportion, and the claim itself.

Weighted reading (default urgent:normal:bulk = 6:3:1) keeps urgent runs first without
starving bulk ones: of every ten runs a worker takes, six come from urgent, three from normal
and one from bulk, and a queue with nothing ready lends its turns to the next one. Within a
priority, the turns are shared among the tenants with runs ready by their claim weights
(``queue/fairness.py``), so one tenant's burst does not hold the others back.
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
from psycopg.rows import args_row

from crondepot.base.vocab import PRIORITIES
from crondepot.db import Q
from crondepot.runtime import metrics
from crondepot.timetable.delivery import DeliveryWindow, resolve

log = logging.getLogger("crondepot.worker")


@dataclass(slots=True)
class ClaimedRun:
    # Positional, in the order claim_runs returns its columns (args_row: no dict per row).
    run_id: str
    job_id: int
    job_key: str | None
    tenant_id: int
    priority: str
    nominal_at: datetime
    due_at: datetime
    attempt: int
    lease_token: UUID
    lease_expires_at: datetime
    db_now: datetime
    target: dict[str, Any]
    payload: dict[str, Any]
    max_attempts: int
    lease_seconds: int
    rate_limit: str | None
    signing_secret: str


class WeightedOrder:
    """Smooth weighted round robin over the priorities (as nginx balances upstreams).

    ``take(n)`` says how many of the next ``n`` claims each priority gets; the sequence
    interleaves (u u n u u b u n u n …) rather than bunching, and it carries state across
    calls, so small claims still honour the weights over time.

    The sequence repeats every ``sum(weights)`` picks (each priority is picked exactly its
    weight's times per period, which brings the algorithm's state back to where it began), so
    one period is worked out once and ``take`` counts along it, with no per-pick work.
    """

    def __init__(self, weights: Sequence[int] = (6, 3, 1)) -> None:
        if len(weights) != 3 or any(w < 0 for w in weights) or not any(weights):
            raise ValueError(f"expected three non-negative weights, not all zero, got "
                             f"{list(weights)}")
        self.weights: dict[str, int] = dict(zip(PRIORITIES, weights, strict=True))
        self._cycle = _smooth_round_robin(self.weights)
        self._pos = 0

    def next(self) -> str:
        pick = self._cycle[self._pos]
        self._pos = (self._pos + 1) % len(self._cycle)
        return pick

    def take(self, n: int) -> dict[str, int]:
        full, rest = divmod(max(0, n), len(self._cycle))
        shares = {p: full * w for p, w in self.weights.items()}
        for i in range(self._pos, self._pos + rest):
            shares[self._cycle[i % len(self._cycle)]] += 1
        self._pos = (self._pos + rest) % len(self._cycle)
        return shares


def _smooth_round_robin(weights: dict[str, int]) -> tuple[str, ...]:
    """One period of smooth weighted round robin: each step, every priority gains its
    weight, and the one ahead is picked and set back by the total."""
    total = sum(weights.values())
    current = dict.fromkeys(PRIORITIES, 0)
    picks = []
    for _ in range(total):
        for p in PRIORITIES:
            current[p] += weights[p]
        best = max(PRIORITIES, key=lambda p: current[p])
        current[best] -= total
        picks.append(best)
    return tuple(picks)


def claim_runs(conn: psycopg.Connection[Any], *, owner: str, shares: dict[str, int],
               lend: bool = True, urgent_only: int = 0,
               now: datetime | None = None) -> list[ClaimedRun]:
    """Claim up to ``shares[p]`` runs of each priority, plus ``urgent_only`` more urgent runs
    for slots that take nothing else, in one statement (one round trip, one commit).

    A priority short of ready runs lends the turns it could not use to the *next* priority
    that was not short (urgent → normal → bulk → urgent), so an empty normal queue under an
    urgent flood gives its turns to bulk, not to urgent. Urgent runs fill the urgent-only
    turns first, and those turns are never lent. With ``lend=False`` nothing is lent.
    """
    lendable = [max(0, shares.get(p, 0)) for p in PRIORITIES]
    limits = [n + (max(0, urgent_only) if p == "urgent" else 0)
              for p, n in zip(PRIORITIES, lendable, strict=True)]
    if not any(limits):
        return []
    # Binary results: timestamps and uuids decode without parsing text. The call is a
    # function (functions/claim_runs.sql), so it is cheap to plan and psycopg may prepare
    # it; the function's own statements are planned once per session.
    with conn.cursor(row_factory=args_row(ClaimedRun), binary=True) as cur:
        urgent, normal, bulk = limits
        lend_urgent, lend_normal, lend_bulk = lendable if lend else (0, 0, 0)
        runs: list[ClaimedRun] = cur.execute(Q.claim_runs, {
            "owner": owner, "urgent": urgent, "normal": normal, "bulk": bulk,
            "lend_urgent": lend_urgent, "lend_normal": lend_normal, "lend_bulk": lend_bulk,
            "now": now}).fetchall()
    return runs


class WindowedTenants:
    """Which tenants have a delivery window anywhere (a default, or a job's own), each
    answer kept ``ttl`` seconds: the claims of a tenant without one skip the window look-up
    (one round trip a claim, about 0.4 ms, docs/records/performance-runs.md). A window
    added meanwhile is planned by the scheduler at once; the worker's own check of a late
    claim follows within ``ttl``."""

    def __init__(self, ttl: float = 5.0) -> None:
        self._ttl = ttl
        self._known: dict[int, tuple[bool, float]] = {}    # tenant -> (windowed, until)

    def runs_to_check(self, conn: psycopg.Connection[Any],
                      runs: Sequence[ClaimedRun]) -> list[ClaimedRun]:
        """The runs of ``runs`` whose tenant has a window somewhere."""
        now = time.monotonic()
        stale = {run.tenant_id for run in runs
                 if self._known.get(run.tenant_id, (False, 0.0))[1] <= now}
        if stale:
            windowed = {tenant for (tenant,) in conn.execute(
                Q.windowed_tenants, {"tenant_ids": sorted(stale)}).fetchall()}
            for tenant in stale:
                self._known[tenant] = (tenant in windowed, now + self._ttl)
        return [run for run in runs if self._known[run.tenant_id][0]]


def claimed_windows(conn: psycopg.Connection[Any],
                    runs: Sequence[ClaimedRun]) -> dict[int, tuple[DeliveryWindow, str]]:
    """The delivery windows in force for the jobs of ``runs`` (the job's own, else its
    tenant's), with the zone they are read in, by job id; jobs without one are absent.
    One statement per claim, kept apart from the claim function so that the claim itself
    is unchanged."""
    if not runs:
        return {}
    rows = conn.execute(Q.claimed_delivery_windows,
                        {"job_ids": sorted({run.job_id for run in runs})}).fetchall()
    windows: dict[int, tuple[DeliveryWindow, str]] = {}
    for job_id, stored, tz in rows:
        window = resolve(stored, None)
        if window is not None:
            windows[job_id] = (window, tz)
    return windows


def deadline_passed(run_id: str, job_id: int, tenant_id: int, *, when: str) -> None:
    """Count and log a run recorded skipped because its misfire deadline had passed."""
    metrics.labelled(metrics.runs_skipped, "deadline_passed").inc()
    log.warning("run past its misfire deadline when %s: recorded skipped, not sent", when,
                extra={"run_id": run_id, "job_id": job_id, "tenant_id": tenant_id,
                       "reason": "deadline_passed"})
