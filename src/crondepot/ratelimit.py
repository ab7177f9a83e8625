"""Named token buckets kept in PostgreSQL, shared by every worker on every host.

``crondepot limits set sms-gateway 450/s --burst 50`` creates the bucket; a job names it
(``"rate_limit": "sms-gateway"``). A worker takes a few tokens at a time (about 20 ms worth)
so the bucket row is touched tens of times a second rather than once per call, and throws
away tokens it could not use within ``HOLD_SECONDS``; the bucket keeps that much less than
its burst, so calls in any window of T seconds stay within ``burst + rate·T``. It takes no
more tokens than it has calls waiting, so few expire unused. A worker over the limit
waits; it never fails the run.
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

from crondepot import metrics
from crondepot.db import Q
from crondepot.errors import CrondepotError
from crondepot.lifecycle import Backoff

log = logging.getLogger("crondepot.ratelimit")

HOLD_SECONDS = 0.05
# Between the last staleness check and the request leaving the process (thread switches).
SLACK_SECONDS = 0.02
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|second|m|min|minute)\s*$")


class InvalidLimit(CrondepotError, ValueError):
    pass


def parse_rate(text: str) -> float:
    """'450/s' → 450.0; '600/m' → 10.0."""
    match = _RATE.match(text)
    if not match or float(match[1]) <= 0:
        raise InvalidLimit(f"rate: expected a positive number per second or minute like "
                           f"'450/s' or '600/m', got {text!r}")
    per_second = float(match[1])
    return per_second / 60 if match[2].startswith("m") else per_second


def batch_size(rate_per_second: float) -> int:
    return max(1, min(20, int(rate_per_second * 0.02)))


def set_limit(conn: psycopg.Connection[Any], name: str, rate: float, burst: int) -> None:
    if not re.match(r"^[a-z0-9][a-z0-9_.-]{0,62}$", name):
        raise InvalidLimit(f"name: expected lowercase letters, digits, '.', '_' or '-', "
                           f"got {name!r}")
    if burst < 1:
        raise InvalidLimit(f"burst: expected an integer of at least 1, got {burst}")
    conn.execute(Q.upsert_rate_limit, {"name": name, "rate": rate, "burst": burst})


@dataclass
class _Stash:
    tokens: int = 0
    taken_at: float = 0.0
    rate: float = 0.0
    waiting: int = 0          # calls of this process waiting for a token of this limit


class RateLimiter:
    """Per-process front of the shared buckets; thread-safe."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._stash: dict[str, _Stash] = {}
        self._unknown_warned: set[str] = set()

    def acquire(self, name: str, *, give_up: Callable[[], bool]) -> float | None:
        """Block until one token of ``name`` is ours and return when it was taken from the
        bucket (monotonic); None if ``give_up()`` said stop first. A caller that could not
        use the token within ``HOLD_SECONDS`` of that instant must take another."""
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
                        metrics.rate_limit_waits.labels(name).inc()
                    return taken_at
                waited = True
                time.sleep(pause)
            return None
        finally:
            with self._lock:
                self._stash[name].waiting -= 1

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
                self._warn_unknown(name)
                return 0, time.monotonic()
            granted, remaining, rate = row
            stash.rate = rate
            if granted:
                stash.tokens, stash.taken_at = granted - 1, time.monotonic()
                return 0, stash.taken_at
            # Time until one whole token has refilled, plus a little spread between waiters.
            return max(0.002, (1.0 - float(remaining)) / float(rate)), 0.0

    def _warn_unknown(self, name: str) -> None:
        if name not in self._unknown_warned:
            self._unknown_warned.add(name)
            log.warning("rate limit %r is not defined; calls are not limited "
                        "(crondepot limits set %s RATE)", name, name)
