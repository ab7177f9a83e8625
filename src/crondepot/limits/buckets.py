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
import math
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
from crondepot.db import UNAVAILABLE, Q
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
    ceiling: float = 0.0      # the most the bucket holds (0: not known before the first take)
    level: float = 0.0        # tokens the last take left in the bucket ...
    level_at: float = 0.0     # ... at this instant (monotonic)
    waiting: int = 0          # calls of this process waiting for a token of this limit
    shared: bool = True       # the operator's bucket, not one a tenant made and named
    asking: bool = False      # one of them is taking from the bucket for all of them now
    ask_at: float = 0.0       # monotonic: no take before then (a database backoff)


# The longest a call sleeps before it looks at ``give_up`` again. Grants wake sleepers, so
# this bounds only how late a wait notices its lease ran out or the worker stops; every
# waiting call wakes this often, so it must not be short (hundreds wait behind a bucket).
_LOOK_AGAIN_SECONDS = 0.25


class RateLimiter:
    """Per-process front of the shared buckets; thread-safe.

    One call at a time per limit is the asker: it takes from the bucket for every call of
    the process waiting on that limit (up to ``batch_size``), waiting first until the bucket
    holds that many, then wakes one waiter per token it brought back and one to ask next.
    The others sleep on a condition until a grant wakes them. What must stay true: at most
    one take in flight per limit and process, the lock never held across a round trip or a
    sleep, no waiter woken but by a grant, a departing asker or its own ``give_up`` look,
    and a waiter woken for every token a take brings back, so no token goes stale while a
    caller that could use it sleeps (docs/records/performance-runs.md, "The bucket's herd",
    measures what breaking it costs)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stash: dict[str, _Stash] = {}

    def acquire(self, name: str, *, give_up: Callable[[], bool]) -> float | None:
        """Block until one token of ``name`` is ours and return when it was taken from the
        bucket (monotonic); None if ``give_up()`` said stop first. A caller that could not
        use the token within ``HOLD_SECONDS`` of that instant must take another. A bucket
        that does not exist raises UnknownLimit (a permanent failure of the run)."""
        with self._lock:
            stash = self._stash.setdefault(name, _Stash())
            stash.waiting += 1
        waited = False
        try:
            backoff = Backoff(first=0.1, cap=2.0)
            while not give_up():
                with self._lock:
                    taken_at = self._from_stash(stash)
                    if taken_at is None and stash.asking:
                        waited = True
                        self._changed.wait(_LOOK_AGAIN_SECONDS)
                        continue
                    if taken_at is None:
                        stash.asking = True
                if taken_at is None:
                    taken_at = self._ask_when_gathered(name, stash, backoff, give_up)
                if taken_at is not None:
                    if waited:
                        metrics.rate_limit_waits.labels(self._label(name)).inc()
                    return taken_at
                waited = True
            return None
        finally:
            with self._lock:
                stash.waiting -= 1
                if stash.waiting and not stash.asking:
                    self._changed.notify()   # if it was to ask next, another will

    def _from_stash(self, stash: _Stash) -> float | None:
        """A token the last take brought this process, if one is left and still fresh."""
        if stash.tokens and time.monotonic() - stash.taken_at > HOLD_SECONDS:
            stash.tokens = 0        # stale: never used, and no longer owed to a waiter
        if stash.tokens:
            stash.tokens -= 1
            return stash.taken_at
        return None

    def _ask_when_gathered(self, name: str, stash: _Stash, backoff: Backoff,
                           give_up: Callable[[], bool]) -> float | None:
        """As the asker: sleep until the bucket should hold a token for each call waiting
        (up to ``batch_size`` and the bucket's ceiling), then take them. Asking as soon as
        one token refilled brought one or two back a take, and woke every waiter each time
        (docs/records/performance-runs.md, "The bucket's herd, again"); waiting for a batch
        costs a call at most the batch's refill time. None: nothing taken, or gave up."""
        while True:
            with self._lock:
                want = min(batch_size(stash.rate) if stash.rate else 1,
                           max(1, stash.waiting))
                pause = stash.ask_at - time.monotonic()
                if stash.rate:
                    gather = min(want, max(1.0, math.floor(stash.ceiling)))
                    level = stash.level + (time.monotonic() - stash.level_at) * stash.rate
                    pause = max(pause, (gather - level) / stash.rate)
            if pause <= 0:
                return self._ask(name, stash, want, backoff)
            if give_up():
                self._ask_failed(stash, 0.0)
                return None
            time.sleep(min(pause, _LOOK_AGAIN_SECONDS))

    def _ask(self, name: str, stash: _Stash, want: int, backoff: Backoff) -> float | None:
        """Take up to ``want`` tokens from the bucket for the process: one for the caller
        (its instant returned), the rest in the stash for the waiters it wakes; None when
        the bucket had none (the next take waits for more to refill) or the database did
        not answer (the next take backs off)."""
        try:
            with self._pool.connection() as conn:
                row = conn.execute(Q.take_tokens, {"name": name, "want": want,
                                                   "hold": HOLD_SECONDS + SLACK_SECONDS}
                                   ).fetchone()
        except UNAVAILABLE as exc:
            # The database is restarting, or a pooled connection died with it: wait for it
            # like any other token (the lease deadline still bounds the wait), never fail
            # the run for it.
            pause = backoff.next()
            log.warning("rate limit %r: database unavailable, retrying in %.1fs: %s",
                        name, pause, exc)
            self._ask_failed(stash, pause)
            return None
        except BaseException:
            self._ask_failed(stash, 0.0)
            raise
        if row is None:
            self._ask_failed(stash, 0.0)
            raise UnknownLimit(f"rate limit {name!r} does not exist (crondepot limits set "
                               f"{name} RATE creates it); not called: an unknown limit "
                               "is never taken for no limit")
        granted, remaining, rate, shared, ceiling = row
        with self._lock:
            now = time.monotonic()
            stash.rate, stash.shared, stash.ceiling = rate, shared, ceiling
            stash.level, stash.level_at = float(remaining), now
            if granted:
                stash.tokens, stash.taken_at = granted - 1, now
            stash.asking = False
            # One waiter per token left, and one more to ask again if more are waiting.
            self._changed.notify(granted)
            return stash.taken_at if granted else None

    def _ask_failed(self, stash: _Stash, ask_in: float) -> None:
        """The take brought nothing back (an error, or its asker gave up): another waiter
        becomes the asker, and takes after ``ask_in`` seconds at the earliest."""
        with self._lock:
            stash.asking = False
            stash.ask_at = time.monotonic() + ask_in
            self._changed.notify()

    def _label(self, name: str) -> str:
        """The metric label of a limit: its name for the operator's buckets, ``tenant`` for
        every bucket a tenant made, whose names tenants choose (unbounded, and not the
        scraper's to read)."""
        with self._lock:
            return name if self._stash[name].shared else "tenant"
