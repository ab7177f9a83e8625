"""Which secrets sign a tenant's webhook now: the current one, and the old one in an overlap.

A claim returns the tenant's current signing secret with each run (``tenants.signing_secret``,
read by the claim function, which this module leaves alone). During a rotation's overlap the
previous secret must sign too; it is read here, not per call, from one small snapshot per
worker process: every tenant in an overlap or out of one for less than an hour
(``Q.signing_overlaps``, a range scan of a partial index, a handful of rows).

The snapshot is taken again when it is ``ttl_seconds`` old, and also, so that a rotation is
never missed, before signing a run whose claim is newer than the snapshot and whose secret
is not the one this process last saw for its tenant (or whose tenant it has not seen): a
rotation committed before that claim is then in the snapshot. A rotation committed after a
run was claimed is in it within ``ttl_seconds``. In the steady state a call costs a dict
lookup; a query is made every ``ttl_seconds`` and after each rotation.

What is signed, given the snapshot's entry for the tenant:
- none (no rotation in the last hour): the claimed secret alone;
- in an overlap (until > now): the current secret, then the previous one;
- after an overlap: the current secret alone (a run claimed before an ``--overlap 0``
  rotation is not sent with the retired secret).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from crondepot.db import Q

DEFAULT_TTL_SECONDS = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Overlap:
    current: str
    previous: str
    until: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    db_now: datetime                 # the database clock when it was read
    overlaps: dict[int, Overlap]     # tenant id -> its secrets


Fetch = Callable[[], Snapshot]


def fetch_from(pool: ConnectionPool) -> Fetch:
    def fetch() -> Snapshot:
        with pool.connection() as conn:
            return snapshot(conn)
    return fetch


def fetch_on(conn: psycopg.Connection[Any]) -> Fetch:
    """Snapshots read on one connection (the notice sender's, for one turn)."""
    return lambda: snapshot(conn)


def snapshot(conn: psycopg.Connection[Any]) -> Snapshot:
    rows = conn.execute(Q.signing_overlaps).fetchall()
    overlaps = {tenant: Overlap(current=current, previous=previous, until=until)
                for _, tenant, current, previous, until in rows if tenant is not None}
    return Snapshot(db_now=rows[0][0], overlaps=overlaps)


class SigningKeys:
    """Thread-safe; one per worker process, shared by its slots."""

    def __init__(self, fetch: Fetch, *, ttl_seconds: float = DEFAULT_TTL_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._fetch = fetch
        self._ttl = ttl_seconds
        self._monotonic = monotonic
        self._now = now
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._taken_at = 0.0
        self._seen: dict[int, str] = {}      # tenant id -> the secret its last run carried
        self.fetches = 0

    def secrets_for(self, tenant_id: int, claimed: str, claimed_at: datetime) -> tuple[str, ...]:
        """The secrets to sign a run of ``tenant_id`` with, first the current one.
        ``claimed``/``claimed_at``: the secret its claim returned, and the claim's database
        time (``ClaimedRun.db_now``)."""
        with self._lock:
            snapshot = self._snapshot
            if snapshot is None or self._stale(snapshot, tenant_id, claimed, claimed_at):
                snapshot = self._refresh()
            self._seen[tenant_id] = claimed
        overlap = snapshot.overlaps.get(tenant_id)
        if overlap is None:
            return (claimed,)
        if overlap.until > self._now():
            return (overlap.current, overlap.previous)
        return (overlap.current,)

    def _stale(self, snapshot: Snapshot, tenant_id: int, claimed: str,
               claimed_at: datetime) -> bool:
        if self._monotonic() - self._taken_at >= self._ttl:
            return True
        return snapshot.db_now <= claimed_at and self._seen.get(tenant_id) != claimed

    def _refresh(self) -> Snapshot:
        self._snapshot = self._fetch()
        self._taken_at = self._monotonic()
        self.fetches += 1
        return self._snapshot
