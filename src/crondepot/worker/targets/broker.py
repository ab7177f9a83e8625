"""What the broker targets (``amqp``, ``nats``, ``redis``) share: the message they publish
(the webhook's JSON body, so a receiver reads one document whichever way a run reaches
it), and a small per-worker pool of clients by connection URL, dropped after a broker error
so the next run reconnects (a broker restart costs the runs in flight a retry, not the
worker).

Not a kind itself: the three kinds' modules import it.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar

from crondepot.worker.targets.http import webhook_body

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun

C = TypeVar("C")


def message(run: ClaimedRun) -> bytes:
    """The body every broker target publishes: the webhook's JSON document."""
    return webhook_body(run_id=run.run_id, job_id=run.job_id, job_key=run.job_key,
                        scheduled_at=run.nominal_at, due_at=run.due_at,
                        attempt=run.attempt, payload=run.payload)


class Clients(Generic[C]):
    """Idle clients by connection URL: ``take`` one (or make one), ``give`` it back after a
    clean use, ``close`` it after an error (it is not given back: the next take reconnects).
    For a client one thread at a time may use (a pika connection); a thread-safe client is
    shared instead (the redis and nats modules keep one per URL)."""

    def __init__(self, close: Callable[[C], None], idle: int = 8) -> None:
        self._close = close
        self._idle_max = idle
        self._idle: dict[str, list[C]] = {}
        self._lock = threading.Lock()

    def take(self, url: str, make: Callable[[], C]) -> C:
        """An idle client of ``url``, or ``make()``'s."""
        with self._lock:
            idle = self._idle.get(url)
            if idle:
                return idle.pop()
        return make()

    def give(self, url: str, client: C) -> None:
        with self._lock:
            idle = self._idle.setdefault(url, [])
            if len(idle) < self._idle_max:
                idle.append(client)
                return
        self._close(client)

    def close(self, client: C) -> None:
        with contextlib.suppress(Exception):   # a broken client may fail to close: dropped
            self._close(client)

    def close_all(self) -> None:
        """Close every idle client (at worker stop; clients in use are closed by their
        thread's error path or with the process)."""
        with self._lock:
            idle = [client for clients in self._idle.values() for client in clients]
            self._idle.clear()
        for client in idle:
            self.close(client)
