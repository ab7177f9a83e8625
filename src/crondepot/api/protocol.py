"""The HTTP connection: uvicorn's h11 protocol with a deadline on each request head.

uvicorn closes a kept-alive connection that sits idle (``timeout_keep_alive``) and caps
concurrent connections (``limit_concurrency``, a 503 past it), but nothing bounds the wait
for a request head: a connection that opens and sends nothing, or sends its head a byte at
a time, is held for ever, and enough of them use up the process's file descriptors. This
protocol closes a connection whose request head has not arrived whole within
``header_timeout`` seconds of the connection opening, or of the first byte of a later
request on a kept-alive connection (the idle time between requests is the keep-alive
timeout's). The body has its own deadline, in ``api/intake.py``.

It must never read or answer a request itself: past the head, everything is uvicorn's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from crondepot.runtime import metrics

DEFAULT_HEADER_TIMEOUT_SECONDS = 10.0
log = logging.getLogger("crondepot.api")


class HeadDeadlineProtocol(H11Protocol):
    """H11Protocol that closes a connection whose request head is late (see the module).
    uvicorn makes one per connection; give it ``header_timeout`` with ``functools.partial``."""

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None, *,
                 header_timeout: float = DEFAULT_HEADER_TIMEOUT_SECONDS) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.their_state is h11.IDLE:
            self._arm()             # the first byte of a later request
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()          # the head has come (or the connection is done)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_late)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        metrics.labelled(metrics.api_refused, "head_timeout").inc()
        log.debug("closed a connection whose request head did not arrive within %g s",
                 self.header_timeout, extra={"client": _peer(self.client)})
        with contextlib.suppress(h11.LocalProtocolError):
            self.conn.send(h11.ConnectionClosed())
        self.transport.close()


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "unknown"
