"""Targets: what a worker calls for a run, and the rules for calling it safely.

- ``http``: the webhook target (signed POST, response classification, no redirects).
- ``guard``: the address guard, applied to the address actually connected to.
- ``signing``: Standard Webhooks signatures, also usable by receivers (``verify``).
"""

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
    OutcomeUnknown,
    WebhookCall,
    WebhookResult,
    WebhookTarget,
    connection_limits,
    retry_after,
    webhook_body,
)
from crondepot.worker.targets.signing import sign, sign_all, verify

__all__ = [
    "ALLOWLIST_ENV",
    "AddressGuard",
    "GuardedBackend",
    "OutcomeUnknown",
    "Resolver",
    "TargetRefused",
    "WebhookCall",
    "WebhookResult",
    "WebhookTarget",
    "connection_limits",
    "refusal_reason",
    "resolve",
    "retry_after",
    "sign",
    "sign_all",
    "verify",
    "webhook_body",
]
