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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetSetup:
    """What a kind's ``make`` may take from the worker."""

    webhooks: Callable[[], WebhookTarget]     # the HTTP client, made when first asked for
    signing_keys: SigningKeys                 # the secrets webhooks are signed with


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
