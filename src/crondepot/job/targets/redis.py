"""The ``redis`` target: an entry added to a Redis stream with ``XADD``, through a connection
the operator named; a guard key named after the run id, set in the same script, makes a
repeat of the run add nothing (worker/targets/redis.py)."""

from __future__ import annotations

import re
from typing import Any

from crondepot.job.checks import variant_members
from crondepot.job.fields import Field, Variant
from crondepot.job.targets import broker

STREAM = Field(path="target.stream", type="string", max_length=255,
               pattern=re.compile(r"[A-Za-z0-9_.:{}-]{1,255}"),
               description="the stream's key, like 'reminders' (letters, digits, '_', '.', "
                           "':', '{', '}' or '-')")
VARIANT = Variant(tag="redis", title="RedisTarget",
                  fields=(broker.CONNECTION, STREAM, broker.TIMEOUT_S),
                  required=("connection", "stream"))
_MEMBERS = variant_members(VARIANT, "type")


def check(target: dict[str, Any]) -> dict[str, Any]:
    return broker.one_destination("redis", target, _MEMBERS, STREAM,
                                  "a stream key like 'reminders' (letters, digits, "
                                  "'_', '.', ':', '{', '}' or '-', at most 255)")


def summary(target: dict[str, Any]) -> str:
    return f"redis {target.get('connection')}/{target.get('stream')}"


def description(target: dict[str, Any]) -> str:
    return (f"redis XADD {target.get('stream')} on connection {target.get('connection')} "
            f"(timeout {target.get('timeout_s')} s)")
