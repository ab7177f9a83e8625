"""What every long-running crondepot process shares: stopping on a signal, and backing off
while the database is away or refuses a statement."""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import random
import signal
import threading
from collections.abc import Callable, Iterable

from prometheus_client import Counter

from crondepot.db import UNAVAILABLE


def on_signals(signums: Iterable[int], action: Callable[[int], None]) -> None:
    """Call ``action(signum)`` on a thread of its own each time one of ``signums`` arrives.
    A signal ignored when this is called stays ignored: under nohup SIGHUP is (the user asked
    to outlive the terminal), and a shell ignores SIGINT for a job it starts in the
    background (Python itself then raises no KeyboardInterrupt).

    Python runs a signal handler in the main thread between two bytecodes, which may be
    inside ``Event.set()`` or a logging call, holding that object's lock. A handler taking
    the same lock then waits on itself forever: a second SIGTERM a moment after the first
    (a supervisor and a terminal both asking, Ctrl-C twice) froze a scheduler that way. So
    the handler only writes the signal's number to a pipe, which takes no lock; the thread
    reading the pipe does the rest, outside any handler."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)

    def handler(signum: int, _frame: object) -> None:
        # A full pipe already holds a stop the thread will see.
        with contextlib.suppress(BlockingIOError):
            os.write(write_end, bytes([signum]))

    def relay() -> None:
        while data := os.read(read_end, 64):
            for signum in data:
                action(signum)

    threading.Thread(target=relay, name="signals", daemon=True).start()
    for signum in signums:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, handler)


# The signals that stop a process: `kill`, Ctrl-C, and the terminal closing.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stoppable:
    """A process loop that SIGTERM, SIGINT or SIGHUP (its terminal closed) asks to finish
    what it holds and stop."""

    def __init__(self) -> None:
        self._stop = threading.Event()

    def stop(self, *_: object) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        on_signals(STOP_SIGNALS, self.stop)
        # `kill -USR1 PID` prints every thread's stack to stderr: the one way to see what a
        # process that will not stop (or stalls) is waiting on, without a debugger.
        faulthandler.register(signal.SIGUSR1, all_threads=True)


class Backoff:
    """Capped exponential waits with jitter, so copies that lost the database together do
    not all reconnect in the same instant.

    The cap bounds how late a process comes back after its database does (a new primary
    after a failover): 1-2 s with the default. A retry while the database is away costs it
    little (a refused connection, a read-only answer; a host that does not answer at all is
    skipped after a 1 s handshake, db/hosts.py)."""

    def __init__(self, first: float = 0.5, cap: float = 2.0) -> None:
        self.first, self.cap, self.current = first, cap, first

    def next(self) -> float:
        wait = self.current * random.uniform(0.5, 1.0)
        self.current = min(self.current * 2, self.cap)
        return wait

    def reset(self) -> None:
        self.current = self.first


class TurnErrors:
    """What a process loop does when one turn (a tick, a claim) fails: count it, log it,
    and say how long to wait before the next turn. The loop never exits on it.

    An unavailable database is retried soon (``Backoff``'s 2 s cap) and logged in a line.
    Anything else is a statement the database refused (a function missing in the middle of
    an upgrade, a privilege revoked) or a row this code could not read: it is logged with
    its stack and retried on a slower backoff, up to ``REFUSED_CAP`` seconds, because it
    will likely fail the same way until an operator acts. Exiting instead would end a
    worker's calls in flight and its heartbeats for an error a restart does not mend; what
    the failed turn held is safe either way (a tick's transaction rolls back whole; a
    claim's runs stay queued, or come back when their lease ends)."""

    REFUSED_CAP = 30.0

    def __init__(self, log: logging.Logger, turn: str, counter: Counter) -> None:
        self._log, self._turn, self._counter = log, turn, counter
        self._unavailable = Backoff()
        self._refused = Backoff(first=1.0, cap=self.REFUSED_CAP)

    def reset(self) -> None:
        """After a turn that succeeded."""
        self._unavailable.reset()
        self._refused.reset()

    def wait_after(self, exc: Exception) -> float:
        """Seconds to wait after ``exc`` ended a turn (counted and logged here)."""
        self._counter.inc()
        if isinstance(exc, UNAVAILABLE):
            wait = self._unavailable.next()
            text = str(exc).strip()
            self._log.warning("database unavailable, retrying in %.1fs: %s", wait,
                              text.splitlines()[0] if text else type(exc).__name__)
            return wait
        wait = self._refused.next()
        self._log.error("%s failed, retrying in %.1fs: %s: %s", self._turn, wait,
                        type(exc).__name__, exc, exc_info=exc)
        return wait
