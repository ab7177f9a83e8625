"""What a failure notice says: a webhook's JSON body and an e-mail, from one message (pure).

The webhook body is the contract (docs/notices.md): ``type`` ("notice" or "digest"), ``id``
(``notice-<message id>``, also the ``webhook-id`` header: the same on every attempt, so a
receiver may drop a repeat), the tenant, the job, and its ``events`` in the order they
happened, each ``{kind, run_id, detail, occurred_at}``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from typing import Any

from crondepot.notices.outbox import Claimed

_KINDS = {"job_unhealthy": "turned unhealthy", "run_dead": "dead-lettered a run",
          "job_ended": "ended"}


def message_id(message: Claimed) -> str:
    return f"notice-{message.id}"


def _utc(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def document(message: Claimed) -> dict[str, Any]:
    return {"type": "digest" if message.digest else "notice", "id": message_id(message),
            "tenant": message.tenant, "job_id": message.job_id, "job_key": message.job_key,
            "events": message.events, "created_at": _utc(message.created_at)}


def webhook_body(message: Claimed) -> bytes:
    return json.dumps(document(message), separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def job_name(message: Claimed) -> str:
    return f"job {message.job_id}" + (f" ({message.job_key})" if message.job_key else "")


def subject(message: Claimed) -> str:
    if message.digest:
        count = len(message.events)
        return f"crondepot digest: {job_name(message)}, {count} event" \
               f"{'' if count == 1 else 's'}"
    kinds = sorted({_KINDS.get(str(e.get("kind")), str(e.get("kind")))
                    for e in message.events})
    return f"crondepot: {job_name(message)} {' and '.join(kinds)}"


def text(message: Claimed) -> str:
    lines = [f"Tenant {message.tenant}, {job_name(message)}:", ""]
    if message.digest:
        lines[0] = (f"Tenant {message.tenant}, {job_name(message)}: what happened since the "
                    "last notice (at most one notice per job an hour; these were folded "
                    "into this digest):")
    for event in message.events:
        when = event.get("occurred_at", "")
        lines.append(f"- {when}  {event.get('kind')}: {event.get('detail')}")
    lines += ["", f"Notice id: {message_id(message)}"]
    return "\n".join(lines) + "\n"


def email(message: Claimed, *, sender: str, recipient: str) -> EmailMessage:
    mail = EmailMessage()
    mail["From"] = sender
    mail["To"] = recipient
    mail["Subject"] = subject(message)
    mail["Date"] = format_datetime(datetime.now(UTC))
    mail["Message-ID"] = make_msgid(message_id(message), domain="crondepot.notices")
    mail["X-Crondepot-Notice"] = message_id(message)
    mail.set_content(text(message))
    return mail
