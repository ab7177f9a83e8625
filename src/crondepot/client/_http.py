"""The request, retry and error logic of the client, written once for Client and AsyncClient.

A method builds a ``Call`` (crondepot.client.operations): what to send, whether it may be
sent twice, and how to read the answer. The sync and async clients only send it and sleep;
everything they decide (``delay``, ``result``) is here, free of I/O.

When a call is sent again (``RetryPolicy``):

- 429 ``rate-limited``, 503 ``pool-starved`` / ``bodies-full``, and a connection that could
  not be made: the request was refused before any route ran, so every call is retried,
  whatever its method.
- 503 ``database-unavailable`` / ``schema-not-current``, another 5xx, a timeout or a
  connection lost after sending: the change may have been made, so only an idempotent call
  (``Call.idempotent``: GET, PUT, DELETE, and the POSTs idempotent by design, each saying
  so in its docstring) is retried.
- Anything else (4xx) is the answer.

Waits: the answer's Retry-After when it has one, else exponential backoff with jitter; a
Retry-After longer than ``max_wait`` is not waited for (the error is raised at once, with
its ``retry_after``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from crondepot.base.version import __version__
from crondepot.client.errors import ApiError, TransportError, error_for

T = TypeVar("T")
DEFAULT_TIMEOUT = 30.0
DEFAULT_RETRIES = 3
USER_AGENT = f"crondepot-python/{__version__}"
# Refusals made before any route ran: nothing changed, so any call may be sent again.
_REFUSED_BEFORE = frozenset({"rate-limited", "pool-starved", "bodies-full"})


def segment(value: str | int) -> str:
    """A path segment: percent-encoded, ``/`` included (a key may hold one)."""
    return quote(str(value), safe="")


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One API operation, ready to send. ``read`` turns the decoded JSON (None for an
    empty answer) into the result."""

    method: str
    path: str
    read: Callable[[Any], T]
    params: list[tuple[str, str]] = field(default_factory=list)
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    idempotent: bool = False

    def request(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        headers = dict(self.headers)
        content = self.content
        if self.json is not None:
            content = json.dumps(self.json, separators=(",", ":")).encode()
            headers.setdefault("Content-Type", "application/json")
        return http.build_request(self.method, self.path, params=tuple(self.params),
                                  content=content, headers=headers)


def params(**values: Any) -> list[tuple[str, str]]:
    """Query parameters, leaving out None; booleans as true/false, lists repeated,
    datetimes as RFC 3339."""
    out: list[tuple[str, str]] = []
    for name, value in values.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item is None:
                continue
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif hasattr(item, "isoformat"):
                item = item.isoformat()
            out.append((name, str(item)))
    return out


def body(**values: Any) -> dict[str, Any]:
    """A JSON body of the values given (None left out), datetimes as RFC 3339."""
    return {name: value.isoformat() if hasattr(value, "isoformat") else value
            for name, value in values.items() if value is not None}


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``retries``: how many times a call may be sent again (0: never). Backoff
    ``base * 2**attempt`` seconds with full jitter, at most ``cap``; a Retry-After above
    ``max_wait`` seconds is raised instead of waited for."""

    retries: int = DEFAULT_RETRIES
    base: float = 0.25
    cap: float = 10.0
    max_wait: float = 60.0

    def backoff(self, attempt: int) -> float:
        return random.uniform(0, min(self.cap, self.base * 2 ** attempt))

    def delay(self, call: Call[Any], outcome: httpx.Response | TransportError,
              attempt: int) -> float | None:
        """Seconds to wait before sending ``call`` again after ``outcome`` of its
        ``attempt``-th send (0 the first), or None: ``outcome`` is the answer."""
        if attempt >= self.retries:
            return None
        if isinstance(outcome, TransportError):
            return self.backoff(attempt) if not outcome.sent or call.idempotent else None
        status = outcome.status_code
        if status < 500 and status != 429:
            return None
        slug = _slug(outcome)
        if slug not in _REFUSED_BEFORE and not call.idempotent:
            return None
        if status == 429 and slug != "rate-limited":
            return None
        wait = _retry_after(outcome)
        if wait is None:
            return self.backoff(attempt)
        return wait if wait <= self.max_wait else None


def _slug(response: httpx.Response) -> str:
    if "json" not in response.headers.get("content-type", ""):
        return ""
    try:
        document = response.json()
    except ValueError:
        return ""
    kind = document.get("type", "") if isinstance(document, dict) else ""
    return str(kind).rsplit("/", 1)[-1]


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, float(response.headers["retry-after"]))
    except (KeyError, ValueError):
        return None


def transport_error(exc: httpx.TransportError) -> TransportError:
    """Ours for httpx's: ``sent`` is False when the connection was never made."""
    never_sent = isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)
    return TransportError(f"{type(exc).__name__}: {exc}", sent=not never_sent)


def result(call: Call[T], outcome: httpx.Response | TransportError) -> T:
    """The call's result, or the exception its answer means (raised)."""
    if isinstance(outcome, TransportError):
        raise outcome
    if outcome.is_success:
        return call.read(outcome.json() if outcome.content else None)
    raise problem_error(outcome)


def problem_error(response: httpx.Response) -> ApiError:
    try:
        document = response.json()
    except ValueError:
        document = None
    if not isinstance(document, dict):     # not from crondepot (a proxy's page): say so
        document = {"title": response.reason_phrase,
                    "detail": f"{response.status_code} {response.reason_phrase}: "
                              f"{response.text[:200]}"}
    return error_for(response.status_code, document, dict(response.headers))


def client_options(base_url: str, token: str, timeout: float) -> dict[str, Any]:
    """What httpx.Client and httpx.AsyncClient are both made with."""
    return {"base_url": base_url.rstrip("/"), "timeout": timeout,
            "headers": {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT,
                        "Accept": "application/json"}}

