"""The operator's console: every tenant's queues, limits and lag side by side, read-only.

There is no operator credential in the API's token table (tokens belong to tenants), so the
operator's is the smallest one that can be: a secret in the API's environment,
``CRONDEPOT_CONSOLE_OPERATOR_TOKEN`` (unset: no operator view at all). It is pasted into the
console's ordinary login form; the login compares it in constant time, after the failed-login
throttle of the client address and before any tenant token is looked up. The session is a
cookie holding an expiry and a random nonce signed with a key derived from the secret
(HMAC-SHA256): nothing is stored, so changing the secret ends every operator session, and a
logout drops the cookie (a copied cookie stays valid until it expires, 8 h by default, as it
is read-only). The cookie is HttpOnly, SameSite=Strict and scoped to ``/console/operator``.

What it may do: read. The pages read across tenants (``scope.see_all``, like ``/metrics``)
inside a ``READ ONLY`` transaction, and there is no form but logout. Without a valid operator
cookie every operator path is a 404 (a tenant session included): a tenant never learns the
view exists.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from fastapi import Request, Response

from crondepot.api import throttle
from crondepot.api.limits import retry_after
from crondepot.api.problems import RateLimited
from crondepot.db import Q
from crondepot.tenancy import scope

log = logging.getLogger("crondepot.api")

TOKEN_ENV = "CRONDEPOT_CONSOLE_OPERATOR_TOKEN"
COOKIE = "crondepot_console_operator"
PATH = "/console/operator"
MIN_TOKEN_CHARS = 32         # a short secret would be guessable: refused, the view stays off


def configured_token(request: Request) -> str | None:
    """The operator token of this API (``app.state``, read from the environment at start)."""
    token: str | None = getattr(request.app.state, "console_operator_token", None)
    return token if token and len(token) >= MIN_TOKEN_CHARS else None


def token_from_env(env: dict[str, str] | None = None) -> str | None:
    value = (dict(os.environ) if env is None else env).get(TOKEN_ENV, "").strip()
    if value and len(value) < MIN_TOKEN_CHARS:
        log.warning("%s is shorter than %d characters: the console's operator view is off",
                    TOKEN_ENV, MIN_TOKEN_CHARS)
    return value or None


def is_operator_token(request: Request, pasted: str) -> bool:
    """Whether ``pasted`` is this API's operator token (constant time; False when unset)."""
    token = configured_token(request)
    if token is None:
        return False
    return hmac.compare_digest(hashlib.sha256(pasted.encode()).digest(),
                               hashlib.sha256(token.encode()).digest())


def _key(token: str) -> bytes:
    return hashlib.sha256(b"crondepot-console-operator-v1\0" + token.encode()).digest()


def _sign(token: str, body: str) -> str:
    return hmac.new(_key(token), body.encode(), hashlib.sha256).hexdigest()


def set_operator_cookie(response: Response, request: Request) -> None:
    token = configured_token(request)
    assert token is not None
    lifetime = int(request.app.state.settings.console_session_seconds)
    body = f"{int(time.time()) + lifetime}.{secrets.token_urlsafe(16)}"
    response.set_cookie(COOKIE, f"{body}.{_sign(token, body)}", path=PATH, httponly=True,
                        samesite="strict", secure=request.url.scheme == "https",
                        max_age=lifetime)


def clear_operator_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict")


def is_operator(request: Request) -> bool:
    """Whether the request carries a valid, unexpired operator cookie of this API's token."""
    token = configured_token(request)
    cookie = request.cookies.get(COOKIE, "")
    if token is None or cookie.count(".") != 2:
        return False
    expires, nonce, mac = cookie.split(".")
    if not hmac.compare_digest(mac.encode(), _sign(token, f"{expires}.{nonce}").encode()):
        return False
    return expires.isdigit() and int(expires) > time.time()


def csrf(request: Request) -> str:
    """The logout form's CSRF token: derived from the cookie (a page that cannot read the
    cookie cannot forge it)."""
    return hmac.new(request.cookies.get(COOKIE, "").encode(), b"crondepot-operator-csrf-v1",
                    hashlib.sha256).hexdigest()


def admit(request: Request, conn: psycopg.Connection[Any]) -> None:
    """Let an operator request in: the request budget (one key for the operator), then the
    connection sees every tenant's rows. Reads run in ``read_only`` below."""
    throttle.refuse_if_throttled(request)
    wait = request.app.state.budget.take(b"console-operator")
    if wait > 0:
        raise RateLimited(f"the operator's request budget is spent; retry in {wait:.2f} s",
                          headers={"Retry-After": retry_after(wait)})
    scope.see_all(conn)


@contextmanager
def read_only(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A READ ONLY transaction: the operator view cannot write even by mistake."""
    with conn.transaction():
        conn.execute(Q.console_read_only)
        yield
