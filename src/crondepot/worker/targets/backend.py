"""The guard's enforcement: an httpcore network backend that resolves the host itself,
checks every address with the ``AddressGuard`` (job/guard.py), and connects to a
checked address by number.

Every stream it makes can be abandoned mid-call (overlap ``replace``, ``_Abandonable``).

It must never resolve a name twice (once to check, once to connect): the gap between the
two is what DNS rebinding uses to send a "public" target to 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import httpcore

from crondepot.job.guard import AddressGuard, Resolver, TargetRefused, resolve
from crondepot.worker.targets.base import current

log = logging.getLogger("crondepot.worker")


class GuardedBackend(httpcore.SyncBackend):
    """An httpcore backend that connects only to addresses the guard accepts.

    httpcore hands ``connect_tcp`` the URL's host; TLS is started afterwards with the same
    host as ``server_hostname`` (``HTTPConnection._connect``), so certificates are still
    verified against the name even though the socket is opened to a number.
    """

    def __init__(self, guard: AddressGuard, resolver: Resolver = resolve) -> None:
        self._guard = guard
        self._resolver = resolver

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        error: httpcore.ConnectError | None = None
        for address in self._allowed(host, self._resolve(host, port)):
            try:
                # A numeric address: create_connection parses it, no DNS lookup happens.
                stream = super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                error = exc  # like create_connection: try the next address
                continue
            self._check_peer(host, stream)
            return _Abandonable(stream)
        assert error is not None  # _allowed returns at least one address
        raise error

    def _resolve(self, host: str, port: int) -> Sequence[str]:
        try:
            addresses = self._resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host}: no addresses")
        return addresses

    def _allowed(self, host: str, addresses: Sequence[str]) -> list[str]:
        """The addresses the guard accepts; the first refusal when it accepts none."""
        allowed: list[str] = []
        refusal: TargetRefused | None = None
        for address in addresses:
            try:
                self._guard.check(host, address)
            except TargetRefused as exc:
                refusal = refusal or exc
            else:
                allowed.append(address)
        if not allowed:
            assert refusal is not None
            raise _refused(refusal)
        return allowed

    def _check_peer(self, host: str, stream: httpcore.NetworkStream) -> None:
        # Belt and braces: judge the address the socket really reached, not only the one
        # we asked for.
        peer = stream.get_extra_info("server_addr")
        try:
            self._guard.check(host, str(peer[0]))
        except TargetRefused as exc:
            stream.close()
            raise _refused(exc) from None


def _refused(refusal: TargetRefused) -> TargetRefused:
    """The refusal the run records (no resolved address in it), its whole story logged for
    the operator."""
    log.warning("target refused: %s", refusal)
    return refusal.for_tenant()


class _Abandonable(httpcore.NetworkStream):
    """A connection whose call can be abandoned from another thread (overlap ``replace``).

    A sync httpx call blocks its slot's thread in the socket's recv (or send); nothing in
    httpx cancels it from outside. While this stream reads or writes for a call that has a
    cancellation (``targets.base.current()``: the slot thread's), a request shuts the socket
    down (``shutdown(SHUT_RDWR)`` wakes a blocked recv at once, on every platform we run
    on), so the call fails at once with a transport error, and the executor records the
    run replaced. Pooled connections pass from call to call, so the call is looked up at
    each read and write, not when the connection was made. A stream used outside any call
    (or a call with no cancellation) costs one thread-local read.
    """

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def _abandoning(self) -> Callable[[], None]:
        cancel = current()
        if cancel is None:
            return _nothing

        def abandon() -> None:
            cancel.acted = ("HTTP call abandoned: its connection was shut down mid-call "
                            "(the target may have acted)")
            sock = self._stream.get_extra_info("socket")
            if sock is not None:
                # (already closed: the call is failing anyway)
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

        return cancel.on_request(abandon)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        forget = self._abandoning()
        try:
            return self._stream.read(max_bytes, timeout)
        finally:
            forget()

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        forget = self._abandoning()
        try:
            self._stream.write(buffer, timeout)
        finally:
            forget()

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _Abandonable(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _nothing() -> None:
    pass
