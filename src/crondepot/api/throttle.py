"""Failed authentication, per client address: a bad credential's guesses are slowed down.

A bearer token on ``/v1`` or a console login that names an unknown or revoked token is a
failure of the client address it came from. After ``failures`` of them within
``window_seconds``, that address is refused for a while: every request of it that needs a
credential is answered 429 (RFC 9457, ``Retry-After``) *before* the credential is looked at
or a database connection taken, a valid token included (checking it would tell a guesser
when it has found one). The wait starts at ``first_wait_seconds`` and doubles each time the
address is refused again, up to ``max_wait_seconds``; an address quiet for
``max_wait_seconds`` after its last wait ended starts again from the first wait. A success
changes nothing: not this address's count (an attacker holding one good token could
otherwise reset its own count between guesses), not another address's.

The client address is the connection's peer, or the client a proxy trusted with ``crondepot
api --forwarded-allow-ips`` names in ``X-Forwarded-For`` (uvicorn rewrites the peer; no
other header is believed). An IPv6 address counts as its /64, which one host usually holds
whole. A request with no credential, or a console page with a session cookie, is not a
failure and is not refused here.

The table lives in the process: with ``crondepot api --workers N`` each process keeps its
own, so an address gets N times the budget. It holds at most ``max_addresses`` addresses;
past that the one whose latest failure is the oldest is forgotten.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request

from crondepot.api.limits import retry_after
from crondepot.api.problems import RateLimited
from crondepot.runtime import metrics

log = logging.getLogger("crondepot.api")


@dataclass(frozen=True, slots=True, kw_only=True)
class ThrottleSettings:
    """``from_env`` reads ``CRONDEPOT_API_AUTH_*``; ``failures=0`` turns the throttle off."""

    failures: int = 10
    window_seconds: float = 60.0
    first_wait_seconds: float = 30.0
    max_wait_seconds: float = 900.0
    max_addresses: int = 10_000

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ThrottleSettings:
        env = dict(os.environ) if env is None else env
        names = {"failures": "CRONDEPOT_API_AUTH_FAILURES",
                 "window_seconds": "CRONDEPOT_API_AUTH_WINDOW_SECONDS",
                 "first_wait_seconds": "CRONDEPOT_API_AUTH_WAIT_SECONDS",
                 "max_wait_seconds": "CRONDEPOT_API_AUTH_MAX_WAIT_SECONDS",
                 "max_addresses": "CRONDEPOT_API_AUTH_MAX_ADDRESSES"}
        values: dict[str, Any] = {}
        for name, variable in names.items():
            if env.get(variable):
                kind = int if name in ("failures", "max_addresses") else float
                values[name] = kind(env[variable])
        return cls(**values)


@dataclass(slots=True)
class _Address:
    failures: int           # within the window that started at ``since``
    since: float
    last: float             # the latest failure
    refused_until: float
    strikes: int            # times refused since the address was last quiet


class AuthThrottle:
    """The failures of each client address, and which addresses are refused until when."""

    def __init__(self, settings: ThrottleSettings | None = None, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings or ThrottleSettings()
        if self.settings.failures < 0 or self.settings.window_seconds <= 0 \
                or self.settings.first_wait_seconds <= 0 \
                or self.settings.max_wait_seconds < self.settings.first_wait_seconds \
                or self.settings.max_addresses < 1:
            raise ValueError(f"invalid failed-authentication throttle: {self.settings}")
        self._clock = clock
        self._addresses: OrderedDict[str, _Address] = OrderedDict()   # oldest failure first
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._addresses)

    def wait(self, address: str) -> float:
        """Seconds ``address`` is still refused for (0.0: it may try)."""
        now = self._clock()
        with self._lock:
            entry = self._addresses.get(address)
            return max(0.0, entry.refused_until - now) if entry is not None else 0.0

    def failed(self, address: str) -> float:
        """Count a failure of ``address``; the seconds it is now refused for (0.0: none)."""
        settings = self.settings
        if settings.failures == 0:
            return 0.0
        now = self._clock()
        with self._lock:
            entry = self._addresses.pop(address, None)
            if entry is None:
                entry = _Address(failures=0, since=now, last=now, refused_until=0.0, strikes=0)
            if now - max(entry.last, entry.refused_until) >= settings.max_wait_seconds:
                entry.strikes = 0       # quiet for the longest wait since the last one ended
            if now - entry.since >= settings.window_seconds:
                entry.failures, entry.since = 0, now
            entry.failures += 1
            entry.last = now
            wait = 0.0
            if entry.failures >= settings.failures:
                wait = min(settings.max_wait_seconds,
                           settings.first_wait_seconds * 2 ** min(entry.strikes, 32))
                entry.strikes += 1
                entry.refused_until = now + wait
                entry.failures, entry.since = 0, now
            self._addresses[address] = entry
            while len(self._addresses) > settings.max_addresses:
                self._addresses.popitem(last=False)
            return wait


def client_address(request: Request) -> str:
    """The address failures are counted under: the peer (as uvicorn's trusted-proxy handling
    left it), an IPv6 address as its /64."""
    host = request.client.host if request.client else ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host or "unknown"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


def route_of(request: Request) -> str:
    """The route template (``/v1/jobs/{job_id}``), never the raw path: a metric label."""
    route = request.scope.get("route")
    return str(getattr(route, "path_format", None) or getattr(route, "path", None)
               or "unmatched")


def install(app: FastAPI, settings: ThrottleSettings | None = None) -> None:
    app.state.auth_throttle = AuthThrottle(settings)


def refuse_if_throttled(request: Request) -> None:
    """Raise RateLimited (429, Retry-After) if the request's client address is refused."""
    throttle: AuthThrottle = request.app.state.auth_throttle
    wait = throttle.wait(client_address(request))
    if wait > 0:
        metrics.labelled(metrics.auth_throttled, route_of(request)).inc()
        raise RateLimited(f"too many failed authentications from this address; retry in "
                          f"{retry_after(wait)} s", headers={"Retry-After": retry_after(wait)})


def count_failure(request: Request) -> None:
    """Count a credential that was checked and is unknown or revoked."""
    throttle: AuthThrottle = request.app.state.auth_throttle
    address = client_address(request)
    metrics.labelled(metrics.auth_failures, route_of(request)).inc()
    wait = throttle.failed(address)
    if wait > 0:
        log.warning("client %s failed authentication %d times within %g s: refused for %g s",
                    address, throttle.settings.failures, throttle.settings.window_seconds, wait)
