"""The ``python`` target: a handler registered by name in the worker process (and granted
to the job's tenant: tenancy/grants.py checks a target's ``handler``)."""

from __future__ import annotations

import json
from typing import Any

from crondepot.base.errors import InvalidJob
from crondepot.base.vocab import HANDLER_NAME
from crondepot.job.checks import matches, no_extra, variant_members
from crondepot.job.fields import Field, Variant

HANDLER = Field(path="target.handler", type="string", pattern=HANDLER_NAME,
                description="a handler registered by name (like 'sms.send') and granted to "
                            "the tenant")
VARIANT = Variant(tag="python", title="PythonTarget", fields=(HANDLER,),
                  required=("handler",))
_MEMBERS = variant_members(VARIANT, "type")


def check(target: dict[str, Any]) -> dict[str, Any]:
    no_extra(target, _MEMBERS, "target")
    handler = target.get("handler")
    if not matches(handler, HANDLER):
        raise InvalidJob("expected target.handler to be a registered handler name like "
                         f"'sms.send', got {json.dumps(handler)}", field="target.handler")
    return {"type": "python", "handler": handler}


def summary(target: dict[str, Any]) -> str:
    return f"python {target.get('handler')}"


def description(target: dict[str, Any]) -> str:
    return f"python {target.get('handler')}"
