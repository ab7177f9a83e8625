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

import threading
from collections.abc import Callable, Mapping
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
