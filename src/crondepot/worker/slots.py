"""A worker's slots: long-lived threads taking claimed runs from one queue.

A slot spends its life waiting on a target (an HTTP call, a handler), so slots are threads.
They were a ``ThreadPoolExecutor``, whose ``submit`` builds a future and a work item and
takes two locks per run: about a fifth of the worker's own CPU on no-op runs (py-spy). Here a
run is a tuple on a ``queue.SimpleQueue`` (C, lock-free for the putter's common case), and
nothing waits on a result: the worker learns of outcomes through its own callbacks.

The claim loop only hands out as many runs as there are free slots, so the queue never holds
more than the slots can take at once; a run put here starts as soon as a thread is free.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Slots(Generic[T]):
    def __init__(self, count: int, work: Callable[[T, str], None], *,
                 name: str = "slot") -> None:
        self._work = work
        self._queue: queue.SimpleQueue[tuple[T, str] | None] = queue.SimpleQueue()
        # Daemons: the worker waits for calls in progress for its grace period, then exits.
        # A call still running then is abandoned as a kill would abandon it (its lease
        # expires, the run comes back with the same id); waiting for it instead would keep
        # the process past the grace with no heartbeat and no outcome writer, so its success
        # could not be recorded and the run would be called again anyway.
        self._threads = [threading.Thread(target=self._loop, name=f"{name}_{i}", daemon=True)
                         for i in range(count)]
        for thread in self._threads:
            thread.start()

    def submit(self, item: T, slot: str) -> None:
        self._queue.put((item, slot))

    def shutdown(self) -> None:
        """Let each thread finish what it is doing, then stop; items still queued are
        dropped (the worker releases them itself when stopping)."""
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._queue.put(None)

    def _loop(self) -> None:
        while True:
            entry = self._queue.get()
            if entry is None:
                return
            self._work(*entry)
