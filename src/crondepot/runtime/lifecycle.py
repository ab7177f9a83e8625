"""What every long-running crondepot process shares: stopping on a signal, and backing off
while the database is away."""

from __future__ import annotations

import faulthandler
import random
import signal
import threading


class Stoppable:
    """A process loop that SIGTERM, SIGINT or SIGHUP (its terminal closed) asks to finish
    what it holds and stop."""

    def __init__(self) -> None:
        self._stop = threading.Event()

    def stop(self, *_: object) -> None:
        self._stop.set()

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)
        if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:   # not under nohup
            signal.signal(signal.SIGHUP, self.stop)
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
