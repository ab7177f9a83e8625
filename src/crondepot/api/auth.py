"""Who is asking: the bearer token, its tenant and role, and the connection a request uses.

A token is looked up by its sha256 in api_tokens (revoked tokens are not found), on every
request, through a SECURITY DEFINER function: the connection sees no tenant's rows until the
token's tenant is named (row-level security, crondepot.tenancy.scope). Nothing caches
tokens, so a revoked token is refused by every API process from its next request on.
The ``read`` role may only read; every change needs ``admin``. The request
budget is spent here, once the token is known, so unknown tokens cannot fill the table of
buckets. An unknown or revoked token is a failure of the client address (api/throttle.py):
an address with too many is refused (429) before its token is looked at or a connection
taken.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import psycopg
from fastapi import Depends, Request

from crondepot.api import throttle
from crondepot.api.limits import RequestBudget, retry_after
from crondepot.api.problems import Forbidden, RateLimited, Unauthorized
from crondepot.api.slots import DbSlots
from crondepot.db import Q
from crondepot.tenancy import scope
from crondepot.tenancy.tenants import hash_token


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    tenant_id: int
    tenant: str
    role: Literal["admin", "read"]
    token_id: int


async def connection(request: Request) -> AsyncIterator[psycopg.Connection[Any]]:
    """One pooled connection per request (autocommit; changes open their own transaction),
    taken within ``--pool-wait`` or refused with 503 (api/slots.py). The body has been read
    already (api/intake.py): no slot waits on a client.

    Behind a transaction-mode pooler (``crondepot api --pooled-db``) the request's work is
    one transaction from its token's look-up on (tenancy/scope.py), REPEATABLE READ for a
    read (GET, HEAD): its reads share a snapshot.
    The connection goes back (and that transaction commits) when the endpoint returns,
    before the response is sent (``scope="function"``): a client never reads an answer for
    a change not yet committed."""
    slots: DbSlots = request.app.state.db_slots
    async with slots.connection(snapshot=request.method in _READS) as conn:
        yield conn


_READS = ("GET", "HEAD")
Conn = Annotated[psycopg.Connection[Any], Depends(connection, scope="function")]


async def unthrottled(request: Request) -> None:
    """Refuse (429) a client address that failed authentication too often: a dependency
    resolved before ``connection``, so a refused request neither reads its token nor takes
    a database slot."""
    throttle.refuse_if_throttled(request)


Unthrottled = Annotated[None, Depends(unthrottled)]


def principal(request: Request, _: Unthrottled, conn: Conn) -> Principal:
    """The bearer token's principal. Callers outside FastAPI's dependencies (the console's
    login) call ``throttle.refuse_if_throttled`` first and pass None for ``_``."""
    token = _bearer(request.headers.get("authorization"))
    token_hash = hash_token(token)
    row = conn.execute(Q.api_token_principal, {"token_hash": token_hash}).fetchone()
    if row is None:
        throttle.count_failure(request)
        raise Unauthorized("the bearer token is unknown or revoked",
                           headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
    return admit(request, conn, Principal(tenant_id=row[0], tenant=row[1], role=row[2],
                                          token_id=row[3]), token_hash)


def admit(request: Request, conn: psycopg.Connection[Any], who: Principal,
          token_hash: bytes) -> Principal:
    """Let a known token's request in (a bearer token's, or a console session's): spend the
    token's request budget, then name it as the actor of what the request changes."""
    budget: RequestBudget = request.app.state.budget
    wait = budget.take(token_hash)
    if wait > 0:
        raise RateLimited(f"this token's request budget ({budget.rate:g}/s, burst "
                          f"{budget.burst}) is spent; retry in {wait:.2f} s",
                          headers={"Retry-After": retry_after(wait)})
    # From here the connection sees this tenant's rows only (row-level security), and every
    # change this request makes is audited under this token (crondepot.tenancy.scope).
    scope.serve(conn, who.tenant_id, f"token:{who.token_id}@{who.tenant}")
    return who


def writer(request: Request, who: Annotated[Principal, Depends(principal)]) -> Principal:
    """The principal, if its role may change things."""
    if who.role != "admin":
        raise Forbidden(f"a {who.role!r} token may only read; {request.method} needs an "
                        "'admin' token")
    return who


def _bearer(header: str | None) -> str:
    if not header:
        raise Unauthorized("send Authorization: Bearer <token>",
                           headers={"WWW-Authenticate": "Bearer"})
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("expected Authorization: Bearer <token>",
                           headers={"WWW-Authenticate": "Bearer"})
    return token.strip()


Reader = Annotated[Principal, Depends(principal)]
Writer = Annotated[Principal, Depends(writer)]
