"""The outcome writer: successes from every slot, recorded together in one fenced statement.

A commit that flushes WAL costs milliseconds; a no-op run costs microseconds. Recording each
success in its own transaction made the flush the worker's limit, so slots hand their
successes to this one thread, which writes whatever has piled up since its last write in a
single call of ``crondepot_record_successes`` (db/sql/functions/record_successes.sql: group
commit). Nothing about the guarantees changes:

- a run stays in hand (its lease renewed by the heartbeat, counted against the worker's
  limit of runs in hand, waited for at shutdown) until its success is committed; only the
  slot is free at once, so the next claim and calls overlap with the write;
- every row is fenced by its lease token; a run missing from the statement's result lost its
  lease, and the slot is told so, exactly as a single-row write would;
- a write that fails because the database is unreachable is retried (the call happened, and
  forgetting it would call the target again); only ``close()`` gives up, after the grace
  period, and then the run comes back after its lease like any other interrupted run.

Retries and final failures are rare, carry an error text each, and keep their own writes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psycopg
from psycopg_pool import ConnectionPool

from crondepot import metrics
from crondepot.lifecycle import Backoff
from crondepot.queue import Success, record_successes

log = logging.getLogger("crondepot.worker")

MAX_BATCH = 500     # one statement's worth; more waits for the next write


Done = Callable[[bool, BaseException | None], None]
"""Told once: (recorded, error). recorded False with no error: the lease was lost."""


@dataclass(slots=True)
class _Pending:
    success: Success
    done: Done
    count: Callable[[], None] | None = None     # the call's metrics, counted once when taken

    def resolve(self, recorded: bool, error: BaseException | None = None) -> None:
        try:
            self.done(recorded, error)
        except Exception:
            log.exception("outcome callback failed", extra={"run_id": self.success.run_id})


class NotRecorded(Exception):
    """The writer was closed (or the write failed) before this success was committed."""


class OutcomeWriter:
    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._closing = False
        self._give_up_at = float("inf")
        self._thread = threading.Thread(target=self._loop, name="outcomes", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, success: Success, done: Done,
               count: Callable[[], None] | None = None) -> None:
        """Queue a success; ``done`` is called from the writer's thread once it is committed
        (True), refused because the lease was lost (False), or could not be written at all
        (False and the error: the run comes back after its lease). ``count`` is called once
        from the writer's thread, before the write is sent: what was counted is never
        behind what was committed."""
        with self._cond:
            if not self._closing:
                self._queue.append(_Pending(success, done, count))
                self._cond.notify()
                return
        _Pending(success, done).resolve(False, NotRecorded("outcome writer closed"))

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (trying until ``timeout``), then stop."""
        with self._cond:
            self._closing = True
            self._give_up_at = time.monotonic() + timeout
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout + 1)
        with self._cond:
            left, self._queue = self._queue, []
        _fail(left, NotRecorded("outcome writer closed before the write"))

    def _loop(self) -> None:
        backoff = Backoff()
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                if not self._queue:
                    return
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            for pending in batch:
                if pending.count is not None:
                    pending.count()
                    pending.count = None       # a batch written again is not counted again
            try:
                self._write(batch)
                backoff.reset()
            except (psycopg.OperationalError, psycopg.InterfaceError, TimeoutError) as exc:
                with self._cond:
                    self._queue[:0] = batch          # keep them, oldest first
                    if self._closing and time.monotonic() >= self._give_up_at:
                        left, self._queue = self._queue, []
                        _fail(left, NotRecorded(f"database unavailable: {exc}"))
                        return
                    wait = min(backoff.next(), 0.2) if self._closing else backoff.next()
                    log.warning("could not record %d outcomes, retrying in %.1fs: %s",
                                len(batch), wait, exc)
                    self._cond.wait(wait)
            except Exception as exc:   # a bug or a data error: report it to every slot
                log.exception("recording %d outcomes failed", len(batch))
                _fail(batch, exc)

    def _write(self, batch: list[_Pending]) -> None:
        with self._pool.connection() as conn:
            recorded = record_successes(conn, [p.success for p in batch])
        metrics.outcome_batch_size.observe(len(batch))
        for pending in batch:
            pending.resolve(pending.success.run_id in recorded)


def _fail(batch: list[_Pending], error: BaseException) -> None:
    for pending in batch:
        pending.resolve(False, error)
