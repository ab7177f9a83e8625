"""What the broker kinds (``amqp``, ``nats``, ``redis``) share: a ``connection`` named by
the operator and granted to the tenant (tenancy/connections.py; tenancy/grants.py checks a
target's ``connection`` at create), never a URL, and the seconds a publish may take.

Not a kind itself (TARGET_KINDS does not name it): the three kinds' modules import it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from crondepot.base.errors import InvalidJob
from crondepot.job.checks import matches, no_extra, seconds
from crondepot.job.fields import Field

CONNECTION = Field(path="target.connection", type="string",
                   pattern=re.compile(r"[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?"),
                   description="a broker connection the operator named (crondepot "
                               "connections add) and granted to the tenant; never a URL")
TIMEOUT_S = Field(path="target.timeout_s", type="number", above=0, high=60, default=10,
                  description="seconds to wait for the broker to accept the message")


def name(target: dict[str, Any], spec: Field, what: str) -> str:
    """``target``'s string member ``spec``, or InvalidJob saying what it should be."""
    value = target.get(spec.name)
    if not matches(value, spec):
        raise InvalidJob(f"expected {spec.path} to be {what}, got {json.dumps(value)}",
                         field=spec.path)
    assert isinstance(value, str)
    return value


def common(target: dict[str, Any]) -> dict[str, Any]:
    """The members every broker kind has, checked: ``connection`` and ``timeout_s``."""
    return {"connection": name(target, CONNECTION, "a connection name like 'rabbit' "
                                                   "(lowercase letters, digits, '.', '_', '-')"),
            "timeout_s": seconds(target, TIMEOUT_S)}


def one_destination(kind: str, target: dict[str, Any], members: frozenset[str],
                    spec: Field, what: str) -> dict[str, Any]:
    """A kind that names one destination besides the common members (nats: a subject,
    redis: a stream), checked in order: no other member, the common ones, the destination."""
    no_extra(target, members, "target")
    checked = common(target)
    return {"type": kind, "connection": checked["connection"],
            spec.name: name(target, spec, what), "timeout_s": checked["timeout_s"]}
