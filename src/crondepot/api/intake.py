"""Request intake: a request's body is read whole, within its size bound and a deadline,
before the app sees the request.

Why a middleware: a route takes its database slot (``api/auth.py``) while FastAPI resolves
its dependencies, and some of those come before the body is read. A client trickling a body
would hold that slot for as long as it liked; ten of them held a pool of ten, and every
database-backed route of every tenant waited behind them. Here the body is gathered first,
so the app is called only once the whole body is in memory, and no slot ever waits on a
client.

- A declared ``Content-Length`` over the bound: 413 at once, nothing read.
- A body that grows past the bound as it arrives: 413 when it does.
- A body not whole within ``timeout_seconds`` of the request head: 408, connection closed.
  Each read waits at most until that deadline, so a stalled client and a trickling one are
  cut at the same instant.
- A client that goes away first: the app is not called.

The chunks are replayed to the app as they came (not joined): an import's 64 MiB is held
once, and each chunk is let go as the route takes it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crondepot.api.problems import ApiError, PayloadTooLarge, RequestTimeout, problem_for
from crondepot.runtime import metrics

DEFAULT_BODY_TIMEOUT_SECONDS = 30.0
_REASONS = {408: "body_timeout", 413: "body_too_large"}     # crondepot_api_refused_total


class Intake:
    """Read the body of every HTTP request before passing it on (see the module)."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int],
                 timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS) -> None:
        self.app = app
        self.limit_for = limit_for
        self.timeout_seconds = timeout_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        try:
            declared = content_length(scope)
            if declared is not None and declared > limit:
                raise too_large(limit)
            body = await read_body(receive, limit=limit, timeout=self.timeout_seconds)
        except ApiError as exc:
            metrics.labelled(metrics.api_refused, _REASONS.get(exc.status, "other")).inc()
            # The rest of the body is not read: the connection cannot be reused.
            exc.headers = {**exc.headers, "Connection": "close"}
            await problem_for(exc)(scope, receive, send)
            return
        if body is not None:
            await self.app(scope, replay(body, receive), send)


async def read_body(receive: Receive, *, limit: int, timeout: float) -> deque[Message] | None:
    """The ``http.request`` messages of one body, all of them, or None if the client went
    away. Raises PayloadTooLarge past ``limit`` bytes, RequestTimeout past ``timeout``
    seconds."""
    messages: deque[Message] = deque()
    seen = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None             # http.disconnect
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise too_large(limit)
                messages.append(message)
                if not message.get("more_body", False):
                    return messages
    except TimeoutError:
        raise RequestTimeout(f"the request body did not arrive whole within {timeout:g} s "
                             f"({seen} bytes came)") from None


def replay(messages: deque[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands out ``messages`` (letting each go), then the client's own
    (which then reports a disconnect)."""
    async def replayed() -> Message:
        if messages:
            return messages.popleft()
        return await receive()
    return replayed


def content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the request body is over {limit} bytes")
