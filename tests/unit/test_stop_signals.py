"""A stop signal is handled outside the signal handler: a second SIGTERM arriving while the
first one's stop holds a lock must not wait on that lock in the same thread (a scheduler
froze that way when asked twice to stop)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from crondepot.runtime.lifecycle import Stoppable, on_signals

STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


@pytest.fixture
def handlers_restored() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in (*STOPS, signal.SIGUSR2)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_the_action_runs_even_while_this_thread_holds_what_it_takes(
        handlers_restored: None) -> None:
    held = threading.Lock()
    seen: list[int] = []
    done = threading.Event()

    def action(signum: int) -> None:
        with held:
            seen.append(signum)
        done.set()

    on_signals([signal.SIGUSR2], action)
    with held:      # like the first stop, in the middle of Event.set()
        # The handler runs in this thread before kill returns; had it run the action
        # itself, it would wait on `held` here for ever.
        os.kill(os.getpid(), signal.SIGUSR2)
        assert not seen
    assert done.wait(5)
    assert seen == [signal.SIGUSR2]


def test_a_burst_of_stop_signals_stops_the_loop(handlers_restored: None) -> None:
    stopped_on: list[str] = []

    class Loop(Stoppable):
        def stop(self, *args: object) -> None:
            stopped_on.append(threading.current_thread().name)
            super().stop(*args)

    loop = Loop()
    loop.install_signal_handlers()
    for _ in range(200):
        os.kill(os.getpid(), signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGINT)     # would raise KeyboardInterrupt if not handled
    assert loop._stop.wait(5)
    # Signals of one kind pending together are delivered once, so fewer than 201 stops
    # may run; all of them ran on the relay thread, none in a handler.
    assert stopped_on and set(stopped_on) == {"signals"}


def test_a_signal_ignored_under_nohup_stays_ignored(handlers_restored: None) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    Stoppable().install_signal_handlers()
    assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
