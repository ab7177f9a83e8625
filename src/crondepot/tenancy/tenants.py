"""Tenants and their API tokens. A token is shown once, at creation; only its hash is kept.
The webhook signing secret is shown once too, at creation (and at each rotation,
``crondepot.tenancy.webhook_secret``)."""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.types.json import Jsonb

from crondepot.base.errors import CrondepotError
from crondepot.db import Q
from crondepot.tenancy.webhook_secret import new_secret
from crondepot.timetable.delivery import DeliveryWindow

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
TOKEN_PREFIX = "cdp_"


class InvalidTenant(CrondepotError, ValueError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTenant:
    id: int
    name: str
    token: str            # shown once; never stored
    signing_secret: str   # shown once (whsec_...); signs the tenant's webhooks
    created_at: datetime


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def create_tenant(conn: psycopg.Connection[Any], name: str, *,
                  role: Literal["admin", "read"] = "admin") -> NewTenant:
    if not _NAME.fullmatch(name):
        raise InvalidTenant(f"tenant name: expected lowercase letters, digits, '.', '_' or '-' "
                            f"(at most 63, starting with a letter or digit), got {name!r}")
    secret = new_secret()
    token = new_token()
    try:
        with conn.transaction():
            row = conn.execute(Q.insert_tenant, {"name": name, "signing_secret": secret}
                               ).fetchone()
            assert row is not None
            conn.execute(Q.insert_api_token, {"tenant_id": row[0], "token_hash": hash_token(token),
                                              "role": role, "label": "initial"})
    except psycopg.errors.UniqueViolation:
        raise InvalidTenant(f"tenant name: {name!r} is already taken") from None
    return NewTenant(id=row[0], name=name, token=token, signing_secret=secret,
                     created_at=row[1])


def issue_token(conn: psycopg.Connection[Any], tenant_id: int, *,
                role: Literal["admin", "read"] = "admin", label: str | None = None) -> str:
    """A new token for an existing tenant (shown once; only its hash is stored)."""
    token = new_token()
    conn.execute(Q.insert_api_token, {"tenant_id": tenant_id, "token_hash": hash_token(token),
                                      "role": role, "label": label})
    return token


def set_delivery_window(conn: psycopg.Connection[Any], tenant_id: int,
                        window: DeliveryWindow | None) -> Any:
    """Set (None: clear) the tenant's default delivery window, for its jobs without one of
    their own; returns the window it had (as stored, None if none). Applied to fires the
    scheduler plans from now on and to runs the workers claim from now on."""
    previous = conn.execute(Q.tenant_delivery_window, {"tenant_id": tenant_id}).fetchone()
    conn.execute(Q.set_tenant_delivery_window, {
        "tenant_id": tenant_id, "window": None if window is None else Jsonb(window.document())})
    return None if previous is None else previous[0]
