"""Who is looking at the console: a server-side session, and the CSRF token of a session.

The console logs in with the same tenant token as the API, checked exactly like a bearer
token (``auth.principal``: same table, same revocation, same request budget, the same
throttle of failed attempts per client address, api/throttle.py). The token is
not kept: the login makes a row in ``console_sessions`` and the cookie holds only that
session's random id (HttpOnly, SameSite=Strict, scoped to ``/console``, ``Secure`` when the
request came over TLS, also behind a proxy trusted with ``crondepot api
--forwarded-allow-ips``). The database keeps the id's sha256. A session ends when it expires
(``ApiSettings.console_session_seconds``), at logout (the row is deleted, so a replayed
cookie is refused) or when its token is revoked. A POST carries a CSRF token derived from
the session id (an HMAC of it), so a page that cannot read the cookie cannot forge one; the
login form uses a double-submit cookie instead, as there is no session yet.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

import psycopg
from fastapi import Request, Response
from starlette.datastructures import Headers

from crondepot.api import auth, throttle
from crondepot.api.params import unstorable_param
from crondepot.api.problems import RateLimited
from crondepot.db import Q
from crondepot.tenancy.tenants import hash_token

COOKIE = "crondepot_console"
LOGIN_COOKIE = "crondepot_console_login"
PATH = "/console"
MAX_FORM_BYTES = 64 * 1024
MAX_FORM_FIELDS = 10_000     # the replay form may tick 10,000 runs (REPLAY_LIMIT)


class ConsoleError(Exception):
    """An error page (or, for ``redirect``, a 303 there) answered by the console."""

    def __init__(self, status: int, title: str, detail: str, *, redirect: str | None = None,
                 headers: dict[str, str] | None = None,
                 session: Session | None = None) -> None:
        super().__init__(detail)
        self.session = session          # the page's header shows who is logged in
        self.status = status
        self.title = title
        self.detail = detail
        self.redirect = redirect
        self.headers = headers or {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    who: auth.Principal
    csrf: str

    @property
    def admin(self) -> bool:
        return self.who.role == "admin"


def csrf_for(session_id: str) -> str:
    return hmac.new(session_id.encode(), b"crondepot-console-csrf-v1",
                    hashlib.sha256).hexdigest()


def login_required() -> ConsoleError:
    return ConsoleError(401, "Log in", "log in with a tenant token", redirect=f"{PATH}/login")


def session(request: Request, conn: psycopg.Connection[Any]) -> Session:
    """The session of the cookie; a missing, unknown, expired or ended session, or one
    whose token was revoked, redirects to login."""
    session_id = request.cookies.get(COOKIE, "").strip()
    if not session_id:
        raise login_required()
    row = conn.execute(Q.console_session_principal,
                       {"id_hash": _id_hash(session_id)}).fetchone()
    if row is None:
        raise login_required()
    who = auth.Principal(tenant_id=row[0], tenant=row[1], role=row[2], token_id=row[3])
    try:
        auth.admit(request, conn, who, bytes(row[4]))
    except RateLimited as exc:
        raise ConsoleError(429, "Slow down", exc.detail, headers=exc.headers) from None
    return Session(who=who, csrf=csrf_for(session_id))


def start_session(request: Request, conn: psycopg.Connection[Any],
                  who: auth.Principal) -> str:
    """A new session for a token just checked; returns the id for the cookie (only its
    hash is stored). Expired sessions are swept first, so the table stays small."""
    session_id = secrets.token_urlsafe(32)
    lifetime = request.app.state.settings.console_session_seconds
    with conn.transaction():
        conn.execute(Q.sweep_console_sessions)
        conn.execute(Q.insert_console_session, {
            "id_hash": _id_hash(session_id), "token_id": who.token_id,
            "lifetime_seconds": lifetime})
    return session_id


def end_session(request: Request, conn: psycopg.Connection[Any]) -> None:
    """Logout: the cookie's session is deleted, so replaying the cookie finds nothing."""
    session_id = request.cookies.get(COOKIE, "").strip()
    if session_id:
        conn.execute(Q.end_console_session, {"id_hash": _id_hash(session_id)})


def _id_hash(session_id: str) -> bytes:
    return hash_token(session_id)


def check_token(request: Request, conn: psycopg.Connection[Any], token: str) -> auth.Principal:
    """``auth.principal`` of ``token`` as if sent as a bearer token (Unauthorized if it is
    unknown or revoked, a failure of the client address; RateLimited if its budget is
    spent, or before the token is looked at if the address failed too often)."""
    throttle.refuse_if_throttled(request)
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"authorization"]
    headers.append((b"authorization", b"Bearer " + token.encode("latin-1", "replace")))
    return auth.principal(Request({**request.scope, "headers": headers}), None, conn)


def require_csrf(current: Session, form: dict[str, list[str]]) -> None:
    sent = first(form, "csrf")
    if not sent or not hmac.compare_digest(sent.encode(), current.csrf.encode()):
        raise ConsoleError(403, "Forbidden", "the form's CSRF token is missing or does not "
                           "match this session; reload the page and try again",
                           session=current)


def require_admin(current: Session, action: str) -> None:
    if not current.admin:
        raise ConsoleError(403, "Read-only token",
                           f"this token of tenant {current.who.tenant!r} has the "
                           f"{current.who.role!r} role: it may look at everything but not "
                           f"{action}; log in with an 'admin' token to do that",
                           session=current)


async def form_fields(request: Request) -> dict[str, list[str]]:
    """An urlencoded form body (a dependency: sync endpoints get it already read).

    Bounded before anything is parsed, and no login is needed to send one: at most
    ``MAX_FORM_BYTES`` are read (the rest is never received) and at most
    ``MAX_FORM_FIELDS`` fields are parsed (counted by their separators first), so a form of
    15,000 fields is a 413, not a 500 from ``parse_qs``. A name or value PostgreSQL cannot
    store (a NUL) is a 422 here, before any endpoint passes it to a query."""
    body = await _bounded_body(request)
    if not body:
        return {}          # no fields: no CSRF token either, which the endpoint refuses
    kind = Headers(scope=request.scope).get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ConsoleError(415, "Unsupported form", "expected an HTML form post "
                           "(application/x-www-form-urlencoded)")
    if len(body) > MAX_FORM_BYTES:
        raise ConsoleError(413, "Form too large", f"the form is over {MAX_FORM_BYTES} bytes")
    if body.count(b"&") + 1 > MAX_FORM_FIELDS:
        raise ConsoleError(413, "Form too large", f"the form has over {MAX_FORM_FIELDS} "
                           "fields")
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True,
                    max_num_fields=MAX_FORM_FIELDS)
    bad = unstorable_param((name, value) for name, values in form.items() for value in values)
    if bad is not None:
        raise ConsoleError(422, "Invalid form", bad[1])
    return form


async def _bounded_body(request: Request) -> bytes:
    """The body, or its first ``MAX_FORM_BYTES`` + 1 bytes when it is longer."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            break
    return bytes(body)


def first(form: dict[str, list[str]], name: str) -> str:
    values = form.get(name) or [""]
    return values[0]


def set_session_cookie(response: Response, request: Request, session_id: str) -> None:
    response.set_cookie(COOKIE, session_id, path=PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https",
                        max_age=request.app.state.settings.console_session_seconds)


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path=PATH, httponly=True, samesite="strict")


def login_nonce(request: Request) -> str:
    """The login form's double-submit value: the cookie's, or a new one."""
    return request.cookies.get(LOGIN_COOKIE) or secrets.token_urlsafe(24)


def set_login_cookie(response: Response, request: Request, nonce: str) -> None:
    response.set_cookie(LOGIN_COOKIE, nonce, path=f"{PATH}/login", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")


def check_login_nonce(request: Request, form: dict[str, list[str]]) -> None:
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    sent = first(form, "csrf")
    if not cookie or not sent or not hmac.compare_digest(cookie.encode(), sent.encode()):
        raise ConsoleError(403, "Forbidden", "the login form's CSRF token is missing or does "
                           "not match; reload the login page and try again")
