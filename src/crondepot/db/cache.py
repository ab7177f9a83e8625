"""A worker's read-through view of a few database rows, each kept a short while.

The worker checks every run against facts an operator may change (a tenant's grants, a
broker connection's URL) without a round trip per run: each value is read at most every
``ttl`` seconds, so a change reaches the workers within ``ttl``.

Two rules make the view safe under load and under outages:
- One read per key at a time. The slots that find a value missing or stale while it is
  being read wait for that read and take its outcome rather than each making their own:
  otherwise the first claim of a 100-slot worker, and every slot once the value went stale,
  sent up to 100 reads at once and grew the connection pool to its maximum for them.
- The database away is not a reason to fail a run the last view allows: a read that fails
  with the connection's errors returns the last value when there is one. Any other error
  (the row is gone) is the caller's answer, never hidden behind an older value.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from crondepot.db.connect import UNAVAILABLE

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True, eq=False)
class _Outcome(Generic[V]):
    """One read's result: its value, or why there is none. A new object each read, so a
    waiter can tell whether a read ended while it waited (identity, not equality)."""

    value: V | None = None
    error: Exception | None = None


class ReadThrough(Generic[K, V]):
    """``get(key)``: ``read(conn, key)`` through ``pool``, kept ``ttl`` seconds per key
    (thread-safe). ``what(key)`` names the value in the error raised when the database is
    away and nothing was read before."""

    def __init__(self, pool: ConnectionPool, read: Callable[[psycopg.Connection[Any], K], V],
                 *, ttl: float, what: Callable[[K], str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._pool = pool
        self._read_one = read
        self._ttl = ttl
        self._what = what
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[K, tuple[float, V]] = {}
        # Per key, under _lock: the lock a read holds, and the last read's outcome.
        self._reading: dict[K, threading.Lock] = {}
        self._outcome: dict[K, _Outcome[V]] = {}

    def get(self, key: K) -> V:
        now = self._clock()
        # No lock to read: a dict lookup is atomic, and this runs in every slot thread for
        # every run, where a shared lock would serialise the slots.
        entry = self._entries.get(key)
        if entry is not None and now - entry[0] < self._ttl:
            return entry[1]
        with self._lock:
            reading = self._reading.setdefault(key, threading.Lock())
            seen = self._outcome.get(key)
        with reading:
            outcome = self._outcome.get(key)
            # A read that ended while this slot waited for it left a new outcome: it is this
            # slot's, however long it took (a second read would only queue behind the first).
            if outcome is None or outcome is seen:
                outcome = self._read(key)
        if outcome.error is None:
            return outcome.value  # type: ignore[return-value]
        if isinstance(outcome.error, UNAVAILABLE):
            if entry is not None:
                return entry[1]     # the database is away: the last view beats failing
            raise psycopg.OperationalError(
                f"{self._what(key)} could not be read: {outcome.error}") from outcome.error
        raise outcome.error

    def _read(self, key: K) -> _Outcome[V]:
        read_at = self._clock()     # the value is as old as the read's start
        outcome: _Outcome[V]
        try:
            with self._pool.connection() as conn:
                outcome = _Outcome(value=self._read_one(conn, key))
        except Exception as exc:    # kept for the slots waiting on this read, then raised
            outcome = _Outcome(error=exc)
        with self._lock:
            if outcome.error is None:
                self._entries[key] = (read_at, outcome.value)  # type: ignore[assignment]
            self._outcome[key] = outcome
        return outcome
