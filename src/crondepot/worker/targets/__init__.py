"""Targets: what a worker calls for a run, and the rules for calling it safely.

- ``base``: the ``Target`` interface and the ``Targets`` registry the executor calls through.
- one module per kind (``TARGET_KINDS``), named as the kind, whose ``make`` returns its
  ``Target``: ``http``, the webhook target (signed POST, response classification, no
  redirects); ``python``, the handlers registered by name (``handlers``, the public
  registry); ``amqp``, ``nats`` and ``redis``, publishes to brokers through connections the
  operator named (``broker``: the message and the client pool they share; docs/targets.md).
- ``backend``: applies the address guard (``crondepot.job.guard``, which the job validator
  checks at create too) to the address actually connected to.
- ``webhook_signature``: Standard Webhooks signatures, also usable by receivers (``verify``).

The names below are loaded on first use (PEP 562), not with the package: a worker whose
jobs call Python handlers never loads httpx.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from functools import partial
from importlib import import_module
from typing import TYPE_CHECKING, Any

from crondepot.base.lazy import on_first_use
from crondepot.base.vocab import TARGET_KINDS
from crondepot.worker.targets.base import (
    AbandonedCalls,
    OutcomeUnknown,
    Target,
    Targets,
    TargetSetup,
)
from crondepot.worker.targets.python import PythonTarget

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun
    from crondepot.worker.targets.backend import GuardedBackend
    from crondepot.worker.targets.http import (
        HttpTarget,
        WebhookCall,
        WebhookResult,
        WebhookTarget,
        connection_limits,
        retry_after,
        webhook_body,
    )
    from crondepot.worker.targets.webhook_signature import sign, sign_all, verify
    from crondepot.worker.webhook_keys import SigningKeys

_WHERE = {
    "GuardedBackend": "backend",
    **dict.fromkeys(("HttpTarget", "WebhookCall", "WebhookResult", "WebhookTarget",
                     "connection_limits", "retry_after", "webhook_body"), "http"),
    **dict.fromkeys(("sign", "sign_all", "verify"), "webhook_signature"),
}


if not TYPE_CHECKING:     # for mypy, the names are the imports above: a misspelling is an error
    __getattr__ = on_first_use(__name__, _WHERE)


def check_tls_environment(environ: Mapping[str, str] | None = None) -> None:
    """Check that the CA certificates ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` name exist (the
    HTTP client reads them, the file first, when it is made for the first HTTP run), so
    that a wrong path stops a worker at start. Raises ValueError naming the variable.
    Existence only: parsing a bundle costs a tenth of a worker's start-up, and a bundle
    that exists but does not parse is a rarer mistake than a path that does not exist."""
    env = os.environ if environ is None else environ
    for name, kind, exists in (("SSL_CERT_FILE", "file", os.path.isfile),
                               ("SSL_CERT_DIR", "directory", os.path.isdir)):
        value = env.get(name)
        if value:
            if not exists(value) or not os.access(value, os.R_OK):
                raise ValueError(f"{name}: {value!r} is not a readable {kind} (the CA "
                                 "certificates for HTTPS targets)")
            return


class _MadeOnFirstCall:
    """A target made when a run first needs it, once, whichever slot gets there first."""

    def __init__(self, kind: str, make: Callable[[], Target]) -> None:
        self.kind = kind
        self._make = make
        self._target: Target | None = None
        self._lock = threading.Lock()

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        target = self._target
        if target is None:
            with self._lock:
                if self._target is None:
                    self._target = self._make()
                target = self._target
        return target.call(run, tenant)

    def close(self) -> None:
        """Close the target if it was ever made and holds connections."""
        with self._lock:
            target, self._target = self._target, None
        close = getattr(target, "close", None)
        if close is not None:
            close()


def default_targets(webhooks: Callable[[], WebhookTarget], signing_keys: SigningKeys,
                    abandoned: AbandonedCalls | None = None,
                    connections: Callable[[str], str] | None = None) -> Targets:
    """Every kind of target a job may name (TARGET_KINDS), each made by its module for the
    kind's first run: the HTTP target, and the client under it (``webhooks()``), are not
    loaded by a worker whose runs call handlers only."""
    setup = TargetSetup(webhooks=webhooks, signing_keys=signing_keys,
                        abandoned=abandoned or AbandonedCalls(),
                        **({"connections": connections} if connections else {}))
    return Targets({kind: _MadeOnFirstCall(kind, partial(_make, kind, setup))
                    for kind in TARGET_KINDS})


def _make(kind: str, setup: TargetSetup) -> Target:
    target: Target = import_module(f"{__name__}.{kind}").make(setup)
    return target


__all__ = [
    "AbandonedCalls",
    "GuardedBackend",
    "HttpTarget",
    "OutcomeUnknown",
    "PythonTarget",
    "Target",
    "TargetSetup",
    "Targets",
    "WebhookCall",
    "WebhookResult",
    "WebhookTarget",
    "check_tls_environment",
    "connection_limits",
    "default_targets",
    "retry_after",
    "sign",
    "sign_all",
    "verify",
    "webhook_body",
]
