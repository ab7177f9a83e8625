"""Named token buckets kept in PostgreSQL, shared by every worker on every host.

``crondepot limits set sms-gateway 450/s --burst 50`` creates the bucket; a job names it
(``"rate_limit": "sms-gateway"``). A worker takes a few tokens at a time (about 20 ms worth)
so the bucket row is touched tens of times a second rather than once per call, and throws
away tokens it could not use within ``HOLD_SECONDS``; the bucket keeps that much less than
its burst, so calls in any window of T seconds stay within ``burst + rate·T``. It takes no
more tokens than it has calls waiting, so few expire unused. A worker over the limit
waits; it never fails the run. A bucket that does not exist is not "no limit": the run
fails for good (UnknownLimit), so a typo cannot send a day's calls at once.

Who may use a bucket (docs/operations.md, "Tenants"): one made by the operator is shared,
usable by the tenants it is granted to (crondepot.tenancy.grants); one a tenant made with
``PUT /v1/limits/{name}`` is that tenant's alone.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from crondepot.base.errors import CrondepotError, PermanentError
from crondepot.base.vocab import LIMIT_NAME
from crondepot.db import Q
from crondepot.runtime import metrics
from crondepot.runtime.lifecycle import Backoff

log = logging.getLogger("crondepot.ratelimit")   # the name operators filter on

HOLD_SECONDS = 0.05
# Between the last staleness check and the request leaving the process (thread switches).
SLACK_SECONDS = 0.02
_RATE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute)\s*")


class InvalidLimit(CrondepotError, ValueError):
    pass


class UnknownLimit(PermanentError):
    """A run names a bucket that does not exist: never "no limit", a permanent failure."""


class LimitNotFound(CrondepotError, LookupError):
    """No bucket by this name that this tenant may see (another tenant's is not said)."""


class LimitNotOwned(CrondepotError):
    """A tenant asked to change a shared bucket granted to it: only the operator may."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Bucket:
    name: str
    rate_per_second: float
    burst: int
    owned: bool          # the tenant's own (PUT /v1/limits/{name}), else shared and granted


def parse_rate(text: str) -> float:
    """'450/s' → 450.0; '600/m' → 10.0."""
    match = _RATE.fullmatch(text)
    if not match or float(match[1]) <= 0:
        raise InvalidLimit(f"rate: expected a positive number per second or minute like "
                           f"'450/s' or '600/m', got {text!r}")
    per_second = float(match[1])
    return per_second / 60 if match[2].startswith("m") else per_second


def batch_size(rate_per_second: float) -> int:
    return max(1, min(20, int(rate_per_second * 0.02)))


def set_limit(conn: psycopg.Connection[Any], name: str, rate: float, burst: int) -> None:
    """The operator's command: create a shared bucket, or change any bucket (a tenant's own
    stays that tenant's)."""
    _check_bucket(name, burst)
    conn.execute(Q.upsert_rate_limit, {"name": name, "rate": rate, "burst": burst})


def _check_bucket(name: str, burst: int) -> None:
    if not LIMIT_NAME.fullmatch(name):
        raise InvalidLimit(f"name: expected lowercase letters, digits, '.', '_' or '-', "
                           f"got {name!r}")
    if burst < 1:
        raise InvalidLimit(f"burst: expected an integer of at least 1, got {burst}")


def put_own_limit(conn: psycopg.Connection[Any], tenant_id: int, name: str, rate: float,
                  burst: int) -> tuple[Bucket, bool]:
    """A tenant creates or changes a bucket of its own; returns it and whether it is new.
    A name already taken is LimitNotOwned if it is a shared bucket granted to the tenant
    (it knows of it), else LimitNotFound: another tenant's bucket is not revealed."""
    _check_bucket(name, burst)
    try:
        with conn.transaction():
            row = conn.execute(Q.put_tenant_limit, {"tenant_id": tenant_id, "name": name,
                                                    "rate": rate, "burst": burst}).fetchone()
    except psycopg.errors.InsufficientPrivilege as exc:
        # Row-level security (migration 0021): the upsert met a bucket that is not this
        # tenant's, which its UPDATE may not touch; PostgreSQL says so with an error, not
        # with the empty result the query's WHERE gives a session that sees every tenant.
        if "row-level security" not in str(exc):
            raise
        row = None
    if row is None:
        if any(b.name == name for b in tenant_limits(conn, tenant_id)):
            raise LimitNotOwned(f"rate limit {name!r} is shared: the operator sets it "
                                f"(crondepot limits set {name} RATE); choose another name "
                                "for a bucket of your own")
        raise LimitNotFound(f"no rate limit {name!r} that this tenant may change; the name "
                            "is taken, choose another")
    return Bucket(name=row[0], rate_per_second=row[1], burst=row[2], owned=True), row[3]


def tenant_limits(conn: psycopg.Connection[Any], tenant_id: int) -> list[Bucket]:
    """The buckets a tenant may use: its own and the shared ones granted to it."""
    return [Bucket(name=n, rate_per_second=r, burst=b, owned=o)
            for n, r, b, o in conn.execute(Q.tenant_limits, {"tenant_id": tenant_id})]


@dataclass
class _Stash:
    tokens: int = 0
    taken_at: float = 0.0
    rate: float = 0.0
    waiting: int = 0          # calls of this process waiting for a token of this limit
    shared: bool = True       # the operator's bucket, not one a tenant made and named


class RateLimiter:
    """Per-process front of the shared buckets; thread-safe."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._stash: dict[str, _Stash] = {}

    def acquire(self, name: str, *, give_up: Callable[[], bool]) -> float | None:
        """Block until one token of ``name`` is ours and return when it was taken from the
        bucket (monotonic); None if ``give_up()`` said stop first. A caller that could not
        use the token within ``HOLD_SECONDS`` of that instant must take another. A bucket
        that does not exist raises UnknownLimit (a permanent failure of the run)."""
        with self._lock:
            self._stash.setdefault(name, _Stash()).waiting += 1
        try:
            waited = False
            backoff = Backoff(first=0.1, cap=2.0)
            while not give_up():
                try:
                    pause, taken_at = self._try_take(name)
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    # The database is restarting, or a pooled connection died with it: wait
                    # for it like any other token (the lease deadline still bounds the wait),
                    # never fail the run for it.
                    pause = backoff.next()
                    log.warning("rate limit %r: database unavailable, retrying in %.1fs: %s",
                                name, pause, exc)
                    time.sleep(pause)
                    continue
                if pause == 0:
                    if waited:
                        metrics.rate_limit_waits.labels(self._label(name)).inc()
                    return taken_at
                waited = True
                time.sleep(pause)
            return None
        finally:
            with self._lock:
                self._stash[name].waiting -= 1

    def _label(self, name: str) -> str:
        """The metric label of a limit: its name for the operator's buckets, ``tenant`` for
        every bucket a tenant made, whose names tenants choose (unbounded, and not the
        scraper's to read)."""
        with self._lock:
            return name if self._stash[name].shared else "tenant"

    def _try_take(self, name: str) -> tuple[float, float]:
        """(0, when taken) when a token was taken; else (how long to wait, 0)."""
        with self._lock:
            stash = self._stash.setdefault(name, _Stash())
            if stash.tokens and time.monotonic() - stash.taken_at <= HOLD_SECONDS:
                stash.tokens -= 1
                return 0, stash.taken_at
            want = min(batch_size(stash.rate), max(1, stash.waiting)) if stash.rate else 1
            with self._pool.connection() as conn:
                row = conn.execute(Q.take_tokens, {"name": name, "want": want,
                                                   "hold": HOLD_SECONDS + SLACK_SECONDS}
                                   ).fetchone()
            if row is None:
                raise UnknownLimit(f"rate limit {name!r} does not exist (crondepot limits set "
                                   f"{name} RATE creates it); not called: an unknown limit "
                                   "is never taken for no limit")
            granted, remaining, rate, stash.shared = row
            stash.rate = rate
            if granted:
                stash.tokens, stash.taken_at = granted - 1, time.monotonic()
                return 0, stash.taken_at
            # Time until one whole token has refilled, plus a little spread between waiters.
            return max(0.002, (1.0 - float(remaining)) / float(rate)), 0.0
