"""The ``python`` target: a handler registered by name in the worker process (and granted
to the job's tenant: tenancy/grants.py checks a target's ``handler``)."""

from __future__ import annotations

import json
from typing import Any

from crondepot.base.errors import InvalidJob
from crondepot.base.vocab import HANDLER_NAME
from crondepot.job.checks import boolean, matches, no_extra, seconds, variant_members
from crondepot.job.fields import Field, Variant

HANDLER = Field(path="target.handler", type="string", pattern=HANDLER_NAME,
                description="a handler registered by name (like 'sms.send') and granted to "
                            "the tenant")
TIMEOUT_S = Field(path="target.timeout_s", type="number", above=0, high=43_200,
                  nullable=True,
                  description="seconds the handler may take; an async handler is then "
                              "cancelled, a sync one abandoned (its slot freed), and the "
                              "attempt recorded timed out. Null or absent: no limit but the "
                              "lease's")
DEDUPES = Field(path="target.dedupes", type="boolean", default=False,
                description="the handler checks the run id before it acts, so an attempt "
                            "that timed out may be retried; otherwise a timed-out run goes "
                            "to the dead letter (it may have acted)")
VARIANT = Variant(tag="python", title="PythonTarget", fields=(HANDLER, TIMEOUT_S, DEDUPES),
                  required=("handler",))
_MEMBERS = variant_members(VARIANT, "type")


def check(target: dict[str, Any]) -> dict[str, Any]:
    """The target as stored: ``timeout_s`` and ``dedupes`` only when given (a handler's
    target without them stays the two-member document it has always been)."""
    no_extra(target, _MEMBERS, "target")
    handler = target.get("handler")
    if not matches(handler, HANDLER):
        raise InvalidJob("expected target.handler to be a registered handler name like "
                         f"'sms.send', got {json.dumps(handler)}", field="target.handler")
    checked: dict[str, Any] = {"type": "python", "handler": handler}
    if target.get("timeout_s") is not None:
        checked["timeout_s"] = seconds(target, TIMEOUT_S)
    if "dedupes" in target:
        checked["dedupes"] = boolean(target, DEDUPES)
    return checked


def summary(target: dict[str, Any]) -> str:
    return f"python {target.get('handler')}"


def description(target: dict[str, Any]) -> str:
    timeout = target.get("timeout_s")
    limit = f" (timeout {timeout:g} s)" if isinstance(timeout, int | float) else ""
    return f"python {target.get('handler')}{limit}"
