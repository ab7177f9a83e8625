"""The seam between a worker and what it calls: one ``Target`` per kind of job target.

A target takes a claimed run (and the name of the tenant whose job it is), makes the call,
and returns a small result (recorded with the run) or raises: ``TemporaryError`` to be
retried, ``PermanentError`` to fail without retry, ``OutcomeUnknown`` when the call may have
acted. The executor (worker/execute.py) owns everything around the call — grants, rate
limits, leases, the outcome's record — and knows no kind by name. Each kind (TARGET_KINDS)
is the module of its name in this package, whose ``make(setup)`` returns its ``Target``;
what a job document may say of the kind is the module of the same name in
crondepot.job.targets.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from crondepot.base.errors import PermanentError

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun
    from crondepot.worker.targets.http import WebhookTarget
    from crondepot.worker.webhook_keys import SigningKeys


class OutcomeUnknown(PermanentError):
    """The request may have reached a target that does not drop repeats.

    A read timeout or a connection lost after sending: the target may have acted. Retrying
    could act twice, so the run is not retried automatically.
    """


class CallReplaced(Exception):
    """The call was given up because a newer run of its job (overlap ``replace``) asked
    its run to give way: an async handler cancelled, an HTTP call abandoned. The text says
    which; the run is recorded skipped 'replaced' (queue.record_replaced)."""


class Cancellation:
    """A request, from another thread, to give up one call (overlap ``replace``).

    The heartbeat thread learns of it at a lease renewal and calls ``request``; the target
    running the call in its slot's thread registers what cancels it (``on_request``): an
    async handler's task cancelled in its event loop, an HTTP call's socket shut down. A
    target that cannot cancel (a sync handler) says so in ``note``, which the attempt
    records. Reached by the target through ``current()`` (the slot thread's), so the
    ``Target`` interface is unchanged.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requested = False
        self._callbacks: list[Callable[[], None]] = []
        self.note: str | None = None     # why the call was not cancelled, if it was not
        self.acted: str | None = None    # what a target did to give the call up, if it did

    @property
    def requested(self) -> bool:
        return self._requested

    def request(self) -> None:
        with self._lock:
            if self._requested:
                return
            self._requested = True
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:       # outside the lock: a callback may take others
            callback()

    def on_request(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when (or now, if) the request comes; returns what unregisters
        it (a call that is over must not be cancelled later)."""
        with self._lock:
            if not self._requested:
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        callback()
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._callbacks:
                self._callbacks.remove(callback)


_calling = threading.local()


def current() -> Cancellation | None:
    """The cancellation of the call this thread is making (set by the executor), if any."""
    cancel: Cancellation | None = getattr(_calling, "cancel", None)
    return cancel


@contextmanager
def calling(cancel: Cancellation) -> Iterator[None]:
    """Make ``cancel`` the current thread's for the call inside (``current()``)."""
    _calling.cancel = cancel
    try:
        yield
    finally:
        _calling.cancel = None


class Target(Protocol):
    kind: str

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None: ...


# Abandoned calls still running at which a worker asks to be restarted: each holds what it
# holds (a thread, a connection, memory) until the process ends.
DEFAULT_MAX_ABANDONED = 20


class AbandonedCalls:
    """Calls a slot stopped waiting for that still run: a sync handler past its target's
    ``timeout_s`` cannot be stopped from outside in Python, so its thread is left to finish
    or hang on its own. The worker asks to be restarted (drain, then start afresh) once
    ``limit`` of them are still running: the only way to be rid of a thread that never
    returns."""

    def __init__(self, limit: int = DEFAULT_MAX_ABANDONED) -> None:
        self.limit = limit
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()

    def add(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads.add(thread)

    def running(self) -> int:
        with self._lock:
            self._threads = {t for t in self._threads if t.is_alive()}
            return len(self._threads)

    def restart_wanted(self) -> bool:
        return self.running() >= self.limit


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSetup:
    """What a kind's ``make`` may take from the worker."""

    webhooks: Callable[[], WebhookTarget]     # the HTTP client, made when first asked for
    signing_keys: SigningKeys                 # the secrets webhooks are signed with
    abandoned: AbandonedCalls = field(default_factory=AbandonedCalls)
    # A broker connection's URL by name (tenancy.connections.ConnectionUrls.url)
    connections: Callable[[str], str] = field(default=lambda name: _no_connections(name))


def _no_connections(name: str) -> str:
    raise PermanentError(f"no connection named {name!r}: this worker reads no connections")


class Targets:
    """The worker's targets, by kind (the job document's ``target.type``)."""

    def __init__(self, targets: Mapping[str, Target]) -> None:
        self._by_kind = dict(targets)

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        kind = run.target.get("type")
        target = self._by_kind.get(kind) if isinstance(kind, str) else None
        if target is None:
            raise PermanentError(f"no target of type {kind!r} in this worker "
                                 f"(known: {', '.join(sorted(self._by_kind))})")
        return target.call(run, tenant)

    def close(self) -> None:
        """Close every target that holds connections (the broker kinds): at worker stop, so
        no client lingers reconnecting to a broker while the process winds down. A target
        that fails to close is skipped: the process is ending anyway."""
        for target in self._by_kind.values():
            close = getattr(target, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()
