"""Standard Webhooks signatures: how a receiver knows a call came from crondepot.

The convention (https://www.standardwebhooks.com): the secret is ``whsec_`` followed by a
base64 key; the signature is ``v1,`` + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}")),
sent in ``webhook-signature`` next to ``webhook-id`` and ``webhook-timestamp``. A receiver
written against any Standard Webhooks library verifies crondepot's calls unchanged. While a
tenant's secret is being rotated, the header carries one signature per secret, space-separated
(``v1,<new> v1,<old>``); a receiver that knows either secret accepts the call.

This module owns only the arithmetic; it never sends anything and never logs a secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence

SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value (``v1,<base64>``) for one message."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def sign_all(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value signed with each secret, space-separated, as Standard
    Webhooks allows (``v1,<new> v1,<old>`` during a secret rotation's overlap)."""
    if not secrets:
        raise ValueError("signing secret: expected at least one, got none")
    return " ".join(sign(secret, msg_id, timestamp, body) for secret in secrets)


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: int = 300,
    now: int | None = None,
) -> None:
    """Check a received call; raise ``ValueError`` saying what is wrong with it.

    Header names are matched case-insensitively. ``webhook-signature`` may carry several
    space-separated signatures (a sender rotating its secret); one match is enough.
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = _header(lowered, "webhook-id")
    timestamp = _timestamp(_header(lowered, "webhook-timestamp"))
    _check_fresh(timestamp, int(time.time()) if now is None else now, tolerance_s)
    expected = sign(secret, msg_id, timestamp, body).encode("ascii")
    for candidate in _header(lowered, "webhook-signature").split():
        # compare_digest keeps the comparison constant-time; bytes because str
        # comparison rejects non-ASCII input with TypeError instead of failing.
        if hmac.compare_digest(candidate.encode("utf-8", "replace"), expected):
            return
    raise ValueError("webhook-signature: no v1 signature matches the body and secret")


def _key(secret: str) -> bytes:
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise ValueError(
            f"signing secret: expected {SECRET_PREFIX!r} followed by base64, "
            "got text that is not base64"
        ) from None
    if not key:
        raise ValueError(f"signing secret: expected {SECRET_PREFIX!r} followed by a key, got none")
    return key


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name, "").strip()
    if not value:
        raise ValueError(f"{name}: header missing or empty")
    return value


def _timestamp(text: str) -> int:
    if not text.isdigit():
        raise ValueError(f"webhook-timestamp: expected unix seconds, got {text!r}")
    return int(text)


def _check_fresh(timestamp: int, now: int, tolerance_s: int) -> None:
    # The timestamp is signed, so bounding its age is what stops a captured call from
    # being replayed later.
    if timestamp < now - tolerance_s:
        raise ValueError(
            f"webhook-timestamp: {timestamp} is {now - timestamp} s old, "
            f"more than the tolerance of {tolerance_s} s"
        )
    if timestamp > now + tolerance_s:
        raise ValueError(
            f"webhook-timestamp: {timestamp} is {timestamp - now} s in the future, "
            f"more than the tolerance of {tolerance_s} s"
        )
