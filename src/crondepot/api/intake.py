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
- The bodies a process holds at once, read or being read, are bounded too
  (``budget_bytes``, 256 MiB by default): the body is read before any credential is looked
  at (that would take a database slot), so without a bound 512 connections each sending
  64 MiB to the import could hold 32 GiB. A body that would pass the budget is answered 503
  ``bodies-full`` with ``Retry-After`` and its connection closed; the budget is given back
  when the app has answered.

The chunks are replayed to the app as they came (not joined): an import's 64 MiB is held
once, and each chunk is let go as the route takes it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crondepot.api.problems import (
    ApiError,
    BodiesFull,
    PayloadTooLarge,
    RequestTimeout,
    problem_for,
)
from crondepot.runtime import metrics

DEFAULT_BODY_TIMEOUT_SECONDS = 30.0
DEFAULT_BUDGET_BYTES = 256 * 1024 * 1024
BUSY_RETRY_SECONDS = 5
# crondepot_api_refused_total's reasons
_REASONS = {408: "body_timeout", 413: "body_too_large", 503: "bodies_full"}


class Budget:
    """The bytes of request bodies a process holds; one event loop, so no lock."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0

    @contextmanager
    def reserve(self) -> Iterator[Callable[[int], None]]:
        """A ``take(size)`` for one body's chunks (BodiesFull past the budget); all it took
        is given back when the block ends, however it ends."""
        taken = 0

        def take(size: int) -> None:
            nonlocal taken
            if self.held + size > self.limit:
                raise BodiesFull(f"this process holds {self.held} bytes of request bodies, "
                                 f"its budget is {self.limit}: try again shortly",
                                 headers={"Retry-After": str(BUSY_RETRY_SECONDS)})
            self.held += size
            taken += size

        try:
            yield take
        finally:
            self.held -= taken


class Intake:
    """Read the body of every HTTP request before passing it on (see the module)."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int],
                 timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS,
                 budget_bytes: int = DEFAULT_BUDGET_BYTES) -> None:
        self.app = app
        self.limit_for = limit_for
        self.timeout_seconds = timeout_seconds
        self.budget = Budget(budget_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        with self.budget.reserve() as take:
            try:
                declared = content_length(scope)
                if declared is not None and declared > limit:
                    raise too_large(limit)
                body = await read_body(receive, limit=limit, timeout=self.timeout_seconds,
                                       take=take)
            except ApiError as exc:
                metrics.labelled(metrics.api_refused, _REASONS.get(exc.status, "other")).inc()
                # The rest of the body is not read: the connection cannot be reused.
                exc.headers = {**exc.headers, "Connection": "close"}
                await problem_for(exc)(scope, receive, send)
                return
            if body is not None:
                await self.app(scope, replay(body, receive), send)


async def read_body(receive: Receive, *, limit: int, timeout: float,
                    take: Callable[[int], None] | None = None) -> deque[Message] | None:
    """The ``http.request`` messages of one body, all of them, or None if the client went
    away. Raises PayloadTooLarge past ``limit`` bytes, RequestTimeout past ``timeout``
    seconds; each chunk's size is passed to ``take`` (``Budget.reserve``), which may
    refuse it."""
    messages: deque[Message] = deque()
    seen = 0
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None             # http.disconnect
                size = len(message.get("body", b""))
                seen += size
                if seen > limit:
                    raise too_large(limit)
                if take is not None:
                    take(size)
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
