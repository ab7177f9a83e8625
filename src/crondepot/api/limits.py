"""Request limits: bounded bodies (413) and a per-token request budget (429 + Retry-After).

The body bound is an ASGI middleware so that an oversized body is refused before anything
reads it whole: a declared Content-Length over the bound is answered at once, and a body
streamed without one is counted as it arrives. The request budget is an in-process token
bucket per API token; several API processes each keep their own.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crondepot.api.problems import PayloadTooLarge, problem_for


class BodyLimit:
    """Refuse request bodies over ``limit_for(path)`` bytes with a 413 problem."""

    def __init__(self, app: ASGIApp, *, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await problem_for(_too_large(limit))(scope, receive, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise _too_large(limit)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"the request body is over {limit} bytes")


@dataclass
class _Bucket:
    tokens: float
    at: float


class RequestBudget:
    """A token bucket per key: ``rate`` requests a second on average, bursts of ``burst``."""

    def __init__(self, rate: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"expected rate > 0 and burst >= 1, got {rate} and {burst}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[object, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: object) -> float:
        """Spend one request for ``key``: 0.0 if allowed, else the seconds to wait."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(tokens=float(self.burst), at=now)
            bucket.tokens = min(self.burst, bucket.tokens + (now - bucket.at) * self.rate)
            bucket.at = now
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return 0.0
            return (1 - bucket.tokens) / self.rate


def retry_after(seconds: float) -> str:
    """Retry-After is whole seconds; round up so a client that obeys it is let in."""
    return str(max(1, math.ceil(seconds)))
