"""The guard's enforcement: an httpcore network backend that resolves the host itself,
checks every address with the ``AddressGuard`` (job/guard.py), and connects to a
checked address by number.

It must never resolve a name twice (once to check, once to connect): the gap between the
two is what DNS rebinding uses to send a "public" target to 127.0.0.1.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import httpcore

from crondepot.job.guard import AddressGuard, Resolver, TargetRefused, resolve

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
            return stream
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
