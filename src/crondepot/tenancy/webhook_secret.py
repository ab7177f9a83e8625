"""A tenant's webhook signing secret: made at creation, rotated with an overlap.

The secret (Standard Webhooks, ``whsec_`` + base64 of 32 random bytes) is shown once, when
it is made, to whoever made it (``tenants create``, ``tenants secret rotate``, the API's
rotate endpoint); it is never logged or shown again. It must stay readable to sign, so it
is kept in the database like a password in a config file.

A rotation makes a new current secret and keeps the old one signing until the overlap ends:
during it, every webhook carries both signatures (``webhook-signature: v1,<new> v1,<old>``),
so a receiver may switch to the new secret at any moment without refusing a call. After it,
only the new one signs. ``--overlap 0`` retires the old secret at once (a leaked secret).
How the worker picks the secrets: ``crondepot.worker.webhook_keys``.
"""

from __future__ import annotations

import base64
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.db import Q

SECRET_PREFIX = "whsec_"
DEFAULT_OVERLAP = timedelta(hours=24)
MAX_OVERLAP = timedelta(days=30)
_DURATION = re.compile(r"(\d{1,7})([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


class InvalidOverlap(CrondepotError, ValueError):
    """An overlap that is not a duration from 0 to 30 days."""

    field = "overlap_seconds"


class TenantNotFound(CrondepotError, LookupError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Rotation:
    signing_secret: str             # the new current secret, shown once
    rotated_at: datetime
    previous_valid_until: datetime  # the old secret signs until then (rotated_at: not at all)


def new_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def parse_overlap(text: str) -> timedelta:
    """``24h``, ``90m``, ``3600s`` (or ``3600``), ``2d``, ``0``: from 0 to 30 days."""
    found = _DURATION.fullmatch(text.strip().lower())
    if not found:
        raise InvalidOverlap(f"overlap: expected a duration like 24h, 90m, 3600s or 2d "
                             f"(0 to end the old secret now), got {text!r}")
    return check_overlap(timedelta(seconds=int(found[1]) * _UNITS[found[2]]))


def check_overlap(overlap: timedelta) -> timedelta:
    if not timedelta(0) <= overlap <= MAX_OVERLAP:
        raise InvalidOverlap(f"overlap: expected from 0 to {MAX_OVERLAP.days} days, got "
                             f"{overlap.total_seconds():g} s")
    return overlap


def rotate_secret(conn: psycopg.Connection[Any], tenant_id: int,
                  overlap: timedelta = DEFAULT_OVERLAP) -> Rotation:
    """Make a new signing secret for the tenant; the old one signs for ``overlap`` more."""
    seconds = int(check_overlap(overlap).total_seconds())
    secret = new_secret()
    with conn.transaction():
        row = conn.execute(Q.rotate_signing_secret, {
            "tenant_id": tenant_id, "signing_secret": secret,
            "overlap_seconds": seconds}).fetchone()
    if row is None:
        raise TenantNotFound(f"no tenant {tenant_id}")
    return Rotation(signing_secret=secret, previous_valid_until=row[0], rotated_at=row[1])
