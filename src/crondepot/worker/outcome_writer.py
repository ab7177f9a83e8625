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
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from psycopg_pool import ConnectionPool

from crondepot.db import UNAVAILABLE
from crondepot.queue import Success, record_successes
from crondepot.runtime import metrics
from crondepot.runtime.lifecycle import Backoff

log = logging.getLogger("crondepot.worker")

MAX_BATCH = 500     # one statement's worth; more waits for the next write


Done = Callable[[bool, BaseException | None], None]
"""Told once: (recorded, error). recorded False with no error: the lease was lost."""


@dataclass(slots=True)
class _Pending:
    success: Success
    done: Done
    count: Callable[[], None] | None = None     # the call's metrics, counted once when taken

    def count_once(self) -> None:
        """Count the call's metrics, the first time only (a retried batch is taken again);
        a metric that raises is logged, never passed on to the writer."""
        count, self.count = self.count, None
        if count is None:
            return
        try:
            count()
        except Exception:
            log.exception("counting a call failed", extra={"run_id": self.success.run_id})

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
        # A SimpleQueue, not a list under a Condition: every slot thread hands over every
        # success, and a shared lock taken that often by 100 threads was a tenth of a busy
        # worker's Python (py-spy --gil). None is the writer's signal to finish.
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._closing = False
        self._closed = False                 # close() has taken what the writer left
        self._give_up_at = float("inf")
        self._wake = threading.Event()       # close() cuts a retry's wait short
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
        pending = _Pending(success, done, count)
        if self._closing:
            pending.resolve(False, NotRecorded("outcome writer closed"))
            return
        self._queue.put(pending)
        if self._closed:
            # close() set _closed before it took what was left; a success put after that
            # (a slot seeing _closing false just before close() began) is failed here, so
            # every success is still told exactly once.
            self._fail_left()

    def close(self, timeout: float = 10.0) -> None:
        """Write what is queued (trying until ``timeout``), then stop."""
        self._give_up_at = time.monotonic() + timeout
        self._closing = True
        self._queue.put(None)
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout + 1)
        # Whatever the writer did not take (it gave up, or a slot submitted as it closed).
        self._closed = True
        self._fail_left()

    def _fail_left(self) -> None:
        left: list[_Pending] = []
        _drain(self._queue, left)
        _fail(left, NotRecorded("outcome writer closed before the write"))

    def _loop(self) -> None:
        backoff = Backoff()
        carried: list[_Pending] = []      # a batch whose write failed, oldest first
        finishing = False
        while True:
            if not carried and not finishing:
                first = self._queue.get()
                finishing = first is None
                carried = [] if first is None else [first]
            finishing = _drain(self._queue, carried, MAX_BATCH) or finishing
            if not carried:
                return                                   # closing, and nothing left
            batch, carried = carried[:MAX_BATCH], carried[MAX_BATCH:]
            for pending in batch:
                pending.count_once()
            try:
                self._write(batch)
                backoff.reset()
            except UNAVAILABLE as exc:
                carried[:0] = batch                      # keep them, oldest first
                if self._closing and time.monotonic() >= self._give_up_at:
                    _fail(carried, NotRecorded(f"database unavailable: {exc}"))
                    return
                wait = min(backoff.next(), 0.2) if self._closing else backoff.next()
                log.warning("could not record %d outcomes, retrying in %.1fs: %s",
                            len(batch), wait, exc)
                self._wake.wait(wait)
                self._wake.clear()
            except Exception as exc:   # a bug or a data error: report it to every slot
                log.exception("recording %d outcomes failed", len(batch))
                _fail(batch, exc)

    def _write(self, batch: list[_Pending]) -> None:
        with self._pool.connection() as conn:
            recorded = record_successes(conn, [p.success for p in batch])
        metrics.outcome_batch_size.observe(len(batch))
        for pending in batch:
            pending.resolve(pending.success.run_id in recorded)


def _drain(source: queue.SimpleQueue[_Pending | None], into: list[_Pending],
           limit: int | None = None) -> bool:
    """Move what is waiting in ``source`` to ``into`` (until it holds ``limit``); True if the
    close signal was among it."""
    closed = False
    while limit is None or len(into) < limit:
        try:
            item = source.get_nowait()
        except queue.Empty:
            break
        if item is None:
            closed = True
        else:
            into.append(item)
    return closed


def _fail(batch: list[_Pending], error: BaseException) -> None:
    for pending in batch:
        pending.resolve(False, error)
