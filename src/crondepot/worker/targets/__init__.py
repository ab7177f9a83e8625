"""Targets: what a worker calls for a run, and the rules for calling it safely.

- ``base``: the ``Target`` interface and the ``Targets`` registry the executor calls through.
- ``http``: the webhook target (signed POST, response classification, no redirects).
- ``python``: handlers registered in the worker process by name.
- ``guard``: the address guard, applied to the address actually connected to.
- ``signing``: Standard Webhooks signatures, also usable by receivers (``verify``).
"""

from crondepot.worker.signing_keys import SigningKeys
from crondepot.worker.targets.base import Target, Targets
from crondepot.worker.targets.guard import (
    ALLOWLIST_ENV,
    AddressGuard,
    GuardedBackend,
    Resolver,
    TargetRefused,
    refusal_reason,
    resolve,
)
from crondepot.worker.targets.http import (
    HttpTarget,
    OutcomeUnknown,
    WebhookCall,
    WebhookResult,
    WebhookTarget,
    connection_limits,
    retry_after,
    webhook_body,
)
from crondepot.worker.targets.python import PythonTarget
from crondepot.worker.targets.signing import sign, sign_all, verify


def default_targets(webhooks: WebhookTarget, signing_keys: SigningKeys) -> Targets:
    """Every kind of target a job may name (job/fields.py lists the same kinds)."""
    return Targets({"http": HttpTarget(webhooks, signing_keys), "python": PythonTarget()})


__all__ = [
    "ALLOWLIST_ENV",
    "AddressGuard",
    "GuardedBackend",
    "HttpTarget",
    "OutcomeUnknown",
    "PythonTarget",
    "Resolver",
    "Target",
    "TargetRefused",
    "Targets",
    "WebhookCall",
    "WebhookResult",
    "WebhookTarget",
    "connection_limits",
    "default_targets",
    "refusal_reason",
    "resolve",
    "retry_after",
    "sign",
    "sign_all",
    "verify",
    "webhook_body",
]
