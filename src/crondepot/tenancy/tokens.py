"""A tenant's API tokens after the first: issued, listed and revoked.

A token is shown once, when it is issued; only its sha256 is stored (``tenants.hash_token``),
and neither is ever listed. Revoking sets ``revoked_at``: the API looks tokens up on every
request without a cache, so every API process refuses the token from its next request, and
the token's console sessions are deleted with it. Token changes of one tenant take turns on
the tenant's row, so the rules below hold under concurrent calls.

The operator (CLI) may revoke any token. Through the API a token may revoke any token of its
own tenant, itself included (a client retiring its own credential), but not the tenant's
last active admin token: that would lock the tenant out of its own API until an operator
issued a new one. Another tenant's token is "not found".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import class_row

from crondepot.base import jsontext
from crondepot.base.errors import CrondepotError
from crondepot.db import Q
from crondepot.tenancy.tenants import hash_token, new_token

Role = Literal["admin", "read"]
ROLES: tuple[Role, ...] = ("admin", "read")
MAX_LABEL_CHARS = 100
# Unrevoked tokens per tenant: enough for every client of a bank, small enough that a
# tenant cannot fill the table through the API.
MAX_ACTIVE_TOKENS = 100


class InvalidToken(CrondepotError, ValueError):
    """A role or label that cannot be used; ``field`` names which."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class TokenNotFound(CrondepotError, LookupError):
    """No such token for this tenant (it may be another tenant's: never said which)."""


class TokenConflict(CrondepotError):
    """The change would break a rule about the tenant's other tokens (the last admin token,
    the cap on active tokens)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenInfo:
    """What is known about a token, never the token itself."""

    id: int
    tenant_id: int
    role: str
    label: str | None
    created_at: datetime
    last_used_at: datetime | None       # to the minute
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NewToken:
    info: TokenInfo
    token: str          # shown once; only its hash is stored


@dataclass(frozen=True, slots=True, kw_only=True)
class Revoked:
    info: TokenInfo
    already: bool       # it was revoked before (its revocation time is the first one)


def check_role(role: object) -> Role:
    for allowed in ROLES:
        if role == allowed:
            return allowed
    raise InvalidToken(f"role: expected 'admin' or 'read', got {role!r}", field="role")


def check_label(label: object) -> str | None:
    """A label is free text for people (``"ci read"``): at most 100 characters, printable."""
    if label is None:
        return None
    wrong = jsontext.people_text(label, MAX_LABEL_CHARS)
    if wrong is not None:
        raise InvalidToken(f"label: {wrong}", field="label")
    assert isinstance(label, str)
    return label


def create_token(conn: psycopg.Connection[Any], tenant_id: int, *, role: object = "admin",
                 label: object = None) -> NewToken:
    """Issue a token of ``role`` to the tenant; the token is in the result and nowhere else."""
    checked_role, checked_label = check_role(role), check_label(label)
    token = new_token()
    with conn.transaction():
        _lock(conn, tenant_id)
        active, _ = _counts(conn, tenant_id)
        if active >= MAX_ACTIVE_TOKENS:
            raise TokenConflict(f"the tenant has {active} active tokens, the most it may "
                                "have; revoke one first")
        with conn.cursor(row_factory=class_row(TokenInfo)) as cur:
            info = cur.execute(Q.insert_token, {
                "tenant_id": tenant_id, "token_hash": hash_token(token),
                "role": checked_role, "label": checked_label}).fetchone()
    assert info is not None
    return NewToken(info=info, token=token)


def list_tokens(conn: psycopg.Connection[Any], tenant_id: int) -> list[TokenInfo]:
    with conn.cursor(row_factory=class_row(TokenInfo)) as cur:
        return cur.execute(Q.list_tokens, {"tenant_id": tenant_id}).fetchall()


def revoke_token(conn: psycopg.Connection[Any], tenant_id: int, token_id: int, *,
                 keep_an_admin: bool) -> Revoked:
    """Revoke one of the tenant's tokens and end its console sessions. ``keep_an_admin``
    (the API) refuses to revoke the tenant's last active admin token; the operator may."""
    key = {"tenant_id": tenant_id, "token_id": token_id}
    with conn.transaction():
        _lock(conn, tenant_id)
        with conn.cursor(row_factory=class_row(TokenInfo)) as cur:
            current = cur.execute(Q.token_of_tenant, key).fetchone()
            if current is None:
                raise TokenNotFound(f"no token {token_id} for this tenant")
            if current.revoked_at is not None:
                return Revoked(info=current, already=True)
            if keep_an_admin and current.role == "admin" and _counts(conn, tenant_id)[1] <= 1:
                raise TokenConflict(f"token {token_id} is the tenant's last active admin "
                                    "token: create another admin token first, or ask the "
                                    "operator")
            revoked = cur.execute(Q.revoke_token, key).fetchone()
        assert revoked is not None      # the tenant's row lock keeps it unrevoked until here
        conn.execute(Q.end_token_sessions, {"token_id": token_id})
    return Revoked(info=revoked, already=False)


def _lock(conn: psycopg.Connection[Any], tenant_id: int) -> None:
    if conn.execute(Q.lock_tenant_tokens, {"tenant_id": tenant_id}).fetchone() is None:
        raise TokenNotFound(f"no tenant {tenant_id}")


def _counts(conn: psycopg.Connection[Any], tenant_id: int) -> tuple[int, int]:
    row = conn.execute(Q.count_active_tokens, {"tenant_id": tenant_id}).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])
