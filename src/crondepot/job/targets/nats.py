"""The ``nats`` target: a message published to a NATS JetStream subject with the run id as
``Nats-Msg-Id``, through a connection the operator named; the stream's duplicate window
drops a repeat, so a publish whose acknowledgement was lost may be sent again
(worker/targets/nats.py)."""

from __future__ import annotations

import re
from typing import Any

from crondepot.job.checks import variant_members
from crondepot.job.fields import Field, Variant
from crondepot.job.targets import broker

# Tokens of letters, digits, '_' or '-' joined by dots: no wildcard (a publish names one
# subject) and no space.
SUBJECT = Field(path="target.subject", type="string", max_length=255,
                pattern=re.compile(r"(?=.{1,255}\Z)[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*"),
                description="the subject to publish to, like 'reminders.sms' (no wildcards); "
                            "a JetStream stream must capture it")
VARIANT = Variant(tag="nats", title="NatsTarget",
                  fields=(broker.CONNECTION, SUBJECT, broker.TIMEOUT_S),
                  required=("connection", "subject"))
_MEMBERS = variant_members(VARIANT, "type")


def check(target: dict[str, Any]) -> dict[str, Any]:
    return broker.one_destination("nats", target, _MEMBERS, SUBJECT,
                                  "a subject like 'reminders.sms' (dot-separated "
                                  "tokens of letters, digits, '_' or '-'; no wildcards)")


def summary(target: dict[str, Any]) -> str:
    return f"nats {target.get('connection')}/{target.get('subject')}"


def description(target: dict[str, Any]) -> str:
    return (f"nats JetStream publish to {target.get('subject')} on connection "
            f"{target.get('connection')} (timeout {target.get('timeout_s')} s)")
