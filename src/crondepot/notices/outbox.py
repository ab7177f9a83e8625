"""The outbox of failure notices: composing its events into messages, the sender's claim
and outcomes, and the reads the API, the CLI and the console share.

The events are written by triggers in the transaction of their cause (a run made dead, a
job whose failed fires reach its alert threshold, a job ended by ``max_runs`` or
``end_at``), one per channel of the tenant: an event is committed with its cause or not at
all, whatever crashes after. Composing (``compose``) makes one message per channel and job
from its waiting events, unless that channel and job had a message within the window (an
hour by default): then they wait, and the first turn after the window makes them one
digest. So a channel hears of a job at most once a window, and loses nothing in between.

A message is delivered at least once: the sender claims it (``claim``, which puts its next
attempt off while it calls), calls, and records the outcome fenced by the claim's attempt
count. A sender that dies mid-call leaves the message due again when the claim's lease
ends; the receiver sees the same ``webhook-id`` (``notice-<id>``) and may drop the repeat.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row

from crondepot.base.vocab import NOTICE_STATUSES
from crondepot.db import Q

WINDOW_SECONDS = 3600.0        # one message per channel and job within this, at most
COMPOSE_BATCH = 10_000         # events composed per turn (the rest: next turn)
# A claim's messages are sent one after another, each within the sender's timeout (10 s):
# the whole batch fits in the lease, so a live sender's messages are not claimed again.
CLAIM_BATCH = 10               # messages claimed per claim
LEASE_SECONDS = 120.0          # a claimed message is due again after this (a lost sender)
MAX_ATTEMPTS = 8               # then 'failed', for the tenant to see
RETRY_BASE_SECONDS = 30.0
RETRY_CAP_SECONDS = 3600.0
MAX_LIST = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class Claimed:
    """A message claimed for sending, with what its call needs."""
    id: int
    tenant_id: int
    tenant: str
    signing_secret: str
    kind: str                       # the channel's: webhook or email
    address: str
    job_id: int
    job_key: str | None
    digest: bool
    events: list[dict[str, Any]]
    attempts: int
    created_at: datetime
    db_now: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """A message as its tenant sees it."""
    id: int
    channel_id: int
    channel_kind: str
    channel_address: str
    job_id: int
    digest: bool
    events: list[dict[str, Any]]
    status: str
    attempts: int
    last_error: str | None
    created_at: datetime
    next_attempt_at: datetime
    sent_at: datetime | None

    def document(self) -> dict[str, Any]:
        return {"id": self.id, "channel_id": self.channel_id,
                "channel_type": self.channel_kind, "job_id": self.job_id,
                "type": "digest" if self.digest else "notice", "events": self.events,
                "status": self.status, "attempts": self.attempts,
                "last_error": self.last_error, "created_at": self.created_at.isoformat(),
                "next_attempt_at": (self.next_attempt_at.isoformat()
                                    if self.status == "pending" else None),
                "sent_at": self.sent_at.isoformat() if self.sent_at else None}


def retry_delay(attempts: int, jitter: float) -> float:
    """Seconds before the next attempt after ``attempts`` failed ones: full jitter (``jitter``
    drawn from [0, 1)) over min(cap, base * 2^(attempts - 1)), as runs are retried
    (queue/retry.py), with at least one second."""
    ceiling = min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2.0 ** min(max(attempts - 1, 0), 30))
    return max(1.0, jitter * ceiling)


def compose(conn: psycopg.Connection[Any], *, now: datetime | None = None,
            window_seconds: float = WINDOW_SECONDS) -> int:
    """Make messages of the waiting events (see the module's docstring); how many. Nothing
    when another composer holds the lock this instant."""
    with conn.transaction():
        (locked,) = conn.execute(Q.lock_notice_composer).fetchone() or (False,)
        if not locked:
            return 0
        made = conn.execute(Q.compose_notices, {"now": now, "window_s": window_seconds,
                                                "limit": COMPOSE_BATCH}).fetchall()
    return len(made)


def claim(conn: psycopg.Connection[Any], *, now: datetime | None = None,
          limit: int = CLAIM_BATCH) -> list[Claimed]:
    with conn.cursor(row_factory=class_row(Claimed)) as cur:
        return cur.execute(Q.claim_notice_messages, {"now": now, "limit": limit,
                                                     "lease_s": LEASE_SECONDS}).fetchall()


def record_sent(conn: psycopg.Connection[Any], message: Claimed, *,
                now: datetime | None = None) -> bool:
    """False when the message was claimed again since (its lease ended mid-call)."""
    return conn.execute(Q.record_notice_sent, {"id": message.id, "attempts": message.attempts,
                                               "now": now}).fetchone() is not None


def record_failure(conn: psycopg.Connection[Any], message: Claimed, error: str, *,
                   final: bool, now: datetime | None = None,
                   jitter: float | None = None) -> bool:
    """Tried again later, or ``failed`` when ``final`` or out of attempts."""
    final = final or message.attempts >= MAX_ATTEMPTS
    delay = 0.0 if final else retry_delay(message.attempts,
                                          random.random() if jitter is None else jitter)
    return conn.execute(Q.record_notice_failure, {
        "id": message.id, "attempts": message.attempts, "final": final,
        "error": error[:2000], "delay_s": delay, "now": now}).fetchone() is not None


def prune(conn: psycopg.Connection[Any], days: int) -> int:
    """Delete messages sent or failed more than ``days`` ago (a bounded pass)."""
    return conn.execute(Q.prune_notice_messages, {"days": days}).rowcount


def check_status(status: str | None) -> str | None:
    if status is not None and status not in NOTICE_STATUSES:
        raise ValueError(f"expected status to be one of {', '.join(NOTICE_STATUSES)}, got "
                         f"{status!r}")
    return status


def list_messages(conn: psycopg.Connection[Any], tenant_id: int, *,
                  status: str | None = None, before: int | None = None,
                  limit: int = 50) -> list[Message]:
    """A page of the tenant's messages, newest first, strictly before id ``before``."""
    with conn.cursor(row_factory=class_row(Message)) as cur:
        return cur.execute(Q.list_notice_messages, {
            "tenant_id": tenant_id, "status": check_status(status),
            "before": before if before is not None else 2**63 - 1,
            "limit": max(1, min(limit, MAX_LIST))}).fetchall()


def held_events(conn: psycopg.Connection[Any], tenant_id: int) -> int:
    """The tenant's events not in a message yet (next turn, or the window's end)."""
    (count,) = conn.execute(Q.count_held_notice_events,
                            {"tenant_id": tenant_id}).fetchone() or (0,)
    return int(count)
