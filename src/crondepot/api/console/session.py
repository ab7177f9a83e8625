"""Who is looking at the console: the tenant token in a cookie, and the CSRF token of a session.

The console logs in with the same tenant token as the API. The token is kept in an HttpOnly,
SameSite=Strict cookie scoped to ``/console`` and looked up exactly like a bearer token
(``auth.principal``: same table, same revocation, same request budget). A POST carries a
CSRF token derived from the session's token (an HMAC of it), so a page that cannot read the
cookie cannot forge one; the login form uses a double-submit cookie instead, as there is no
session yet.
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

from crondepot.api import auth
from crondepot.api.problems import RateLimited, Unauthorized

COOKIE = "crondepot_console"
LOGIN_COOKIE = "crondepot_console_login"
PATH = "/console"
MAX_FORM_BYTES = 64 * 1024


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


def csrf_for(token: str) -> str:
    return hmac.new(token.encode(), b"crondepot-console-csrf-v1", hashlib.sha256).hexdigest()


def login_required() -> ConsoleError:
    return ConsoleError(401, "Log in", "log in with a tenant token", redirect=f"{PATH}/login")


def session(request: Request, conn: psycopg.Connection[Any]) -> Session:
    """The session of the cookie; a missing, unknown or revoked token redirects to login."""
    token = request.cookies.get(COOKIE, "").strip()
    if not token:
        raise login_required()
    try:
        who = check_token(request, conn, token)
    except Unauthorized:
        raise login_required() from None
    except RateLimited as exc:
        raise ConsoleError(429, "Slow down", exc.detail, headers=exc.headers) from None
    return Session(who=who, csrf=csrf_for(token))


def check_token(request: Request, conn: psycopg.Connection[Any], token: str) -> auth.Principal:
    """``auth.principal`` of ``token`` as if sent as a bearer token (Unauthorized if it is
    unknown or revoked, RateLimited if its budget is spent)."""
    headers = [(k, v) for k, v in request.scope["headers"] if k != b"authorization"]
    headers.append((b"authorization", b"Bearer " + token.encode("latin-1", "replace")))
    return auth.principal(Request({**request.scope, "headers": headers}), conn)


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
    """An urlencoded form body (a dependency: sync endpoints get it already read)."""
    body = await request.body()
    if not body:
        return {}          # no fields: no CSRF token either, which the endpoint refuses
    kind = Headers(scope=request.scope).get("content-type", "").split(";")[0].strip()
    if kind != "application/x-www-form-urlencoded":
        raise ConsoleError(415, "Unsupported form", "expected an HTML form post "
                           "(application/x-www-form-urlencoded)")
    if len(body) > MAX_FORM_BYTES:
        raise ConsoleError(413, "Form too large", f"the form is over {MAX_FORM_BYTES} bytes")
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True,
                    max_num_fields=10_000)


def first(form: dict[str, list[str]], name: str) -> str:
    values = form.get(name) or [""]
    return values[0]


def set_session_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(COOKIE, token, path=PATH, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https")


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
