"""The ``amqp`` target: a persistent message published to a RabbitMQ (AMQP 0-9-1) exchange
with a routing key, through a connection the operator named; a run succeeds when the
broker confirms it, and fails when the broker returns it unroutable (worker/targets/amqp.py).
"""

from __future__ import annotations

import re
from typing import Any

from crondepot.job.checks import no_extra, variant_members
from crondepot.job.fields import Field, Variant
from crondepot.job.targets import broker

EXCHANGE = Field(path="target.exchange", type="string", max_length=255,
                 pattern=re.compile(r"[A-Za-z0-9_.:-]{0,255}"),
                 description="the exchange to publish to ('' is the default exchange, "
                             "which routes by queue name)")
ROUTING_KEY = Field(path="target.routing_key", type="string", max_length=255,
                    pattern=re.compile(r"[^\x00-\x1f\x7f]{0,255}"),
                    description="the routing key (at most 255 characters)")
VARIANT = Variant(tag="amqp", title="AmqpTarget",
                  fields=(broker.CONNECTION, EXCHANGE, ROUTING_KEY, broker.TIMEOUT_S),
                  required=("connection", "exchange", "routing_key"))
_MEMBERS = variant_members(VARIANT, "type")


def check(target: dict[str, Any]) -> dict[str, Any]:
    no_extra(target, _MEMBERS, "target")
    checked = broker.common(target)
    exchange = broker.name(target, EXCHANGE, "an exchange name (letters, digits, '_', '.', "
                                             "':' or '-', at most 255; '' for the default)")
    key = broker.name(target, ROUTING_KEY, "a routing key of at most 255 characters "
                                           "without control characters")
    return {"type": "amqp", "connection": checked["connection"], "exchange": exchange,
            "routing_key": key, "timeout_s": checked["timeout_s"]}


def summary(target: dict[str, Any]) -> str:
    return f"amqp {target.get('connection')}/{target.get('exchange')}"


def description(target: dict[str, Any]) -> str:
    return (f"amqp publish to exchange {target.get('exchange')!r} key "
            f"{target.get('routing_key')!r} on connection {target.get('connection')} "
            f"(timeout {target.get('timeout_s')} s)")
