"""Claiming runs: which priorities to read, in what proportion, and the claim itself.

Weighted reading (default urgent:normal:bulk = 6:3:1) keeps urgent runs first without
starving bulk ones: of every ten runs a worker takes, six come from urgent, three from normal
and one from bulk, and a queue with nothing ready lends its turns to the next one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import class_row

from crondepot.db import Q

PRIORITIES = ("urgent", "normal", "bulk")


@dataclass(slots=True, kw_only=True)
class ClaimedRun:
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
    """

    def __init__(self, weights: Sequence[int] = (6, 3, 1)) -> None:
        if len(weights) != 3 or any(w < 0 for w in weights) or not any(weights):
            raise ValueError(f"expected three non-negative weights, not all zero, got "
                             f"{list(weights)}")
        self.weights = dict(zip(PRIORITIES, weights, strict=True))
        self._current = dict.fromkeys(PRIORITIES, 0)

    def next(self) -> str:
        total = sum(self.weights.values())
        for p in PRIORITIES:
            self._current[p] += self.weights[p]
        best = max(PRIORITIES, key=lambda p: self._current[p])
        self._current[best] -= total
        return best

    def take(self, n: int) -> dict[str, int]:
        shares = dict.fromkeys(PRIORITIES, 0)
        for _ in range(n):
            shares[self.next()] += 1
        return shares


def claim_runs(conn: psycopg.Connection[Any], *, owner: str, shares: dict[str, int],
               lend: bool = True, now: datetime | None = None) -> list[ClaimedRun]:
    """Claim up to ``shares[p]`` runs of each priority. A priority short of ready runs lends
    the turns it could not use to the *next* priority (urgent → normal → bulk → urgent), so
    an empty normal queue under an urgent flood gives its turns to bulk, not to urgent."""
    claimed: list[ClaimedRun] = []
    short: dict[str, int] = {}
    for priority in PRIORITIES:
        want = shares.get(priority, 0)
        if want:
            got = _claim(conn, owner, priority, want, now)
            claimed += got
            if len(got) < want:
                short[priority] = want - len(got)
    if not lend:
        return claimed
    for lender, spare in short.items():
        start = PRIORITIES.index(lender)
        for step in (1, 2):
            borrower = PRIORITIES[(start + step) % len(PRIORITIES)]
            if spare <= 0 or borrower in short:
                continue          # a queue that came up short has nothing more to give
            got = _claim(conn, owner, borrower, spare, now)
            claimed += got
            spare -= len(got)
    return claimed


def _claim(conn: psycopg.Connection[Any], owner: str, priority: str, limit: int,
           now: datetime | None) -> list[ClaimedRun]:
    with conn.cursor(row_factory=class_row(ClaimedRun)) as cur:
        return cur.execute(Q.claim_runs, {"owner": owner, "priority": priority,
                                          "limit": limit, "now": now}).fetchall()
