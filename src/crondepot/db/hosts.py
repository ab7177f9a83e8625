"""Which host of a multi-host URL a process tries first (docs/availability.md, "Back to work
after a failover").

psycopg, like libpq, tries the hosts of ``host=a,b`` in the URL's order and gives each its
``connect_timeout``. When the first host is a primary cut off by a partition, every new
connection of every process waits that timeout on it before it reaches the new primary.
For a URL with more than one host, ``OrderedConnection.connect`` makes the attempts itself:

- the host that last gave this process a session of the kind the URL asks for
  (``target_session_attrs``) is tried first, then the others in the URL's order, and last
  the hosts that did not answer;
- before its attempt, each TCP host must complete a TCP handshake within
  ``HANDSHAKE_SECONDS``; one that does not is *silent* (a partition, a machine gone) and is
  skipped, and asked again at most once every ``HANDSHAKE_SECONDS`` per process, so that an
  attempt while it is away costs at most that, not ``connect_timeout``. A host that answers,
  even with "read-only" or a refused connection, costs no wait and keeps its place.

The order never changes which session is accepted: every attempt asks libpq for the URL's
own ``target_session_attrs``, so a standby is never taken for a primary.

When the host that gives this process its sessions changes (a new primary), the callbacks
given to ``on_move`` run: the pools drop their idle connections to the old one, which would
otherwise each cost a probe that waits on a partition (``tcp_user_timeout``) before use.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import TupleRow

log = logging.getLogger("crondepot.db")

# A host whose TCP handshake takes longer than this is treated as unreachable for the moment
# (a handshake on a LAN, or across a region, takes milliseconds).
HANDSHAKE_SECONDS = 1.0

# With these, psycopg orders the hosts itself (standbys first, or shuffled): left to it.
_OWN_ORDER = {"target_session_attrs": ("prefer-standby",), "load_balance_hosts": ("random",)}


@dataclass(frozen=True, slots=True)
class Host:
    host: str
    hostaddr: str
    port: str

    @property
    def tcp(self) -> bool:
        return bool(self.hostaddr) or not self.host.startswith(("/", "@"))

    def address(self) -> tuple[str, int]:
        return (self.hostaddr or self.host or "localhost",
                int(self.port or os.environ.get("PGPORT") or 5432))

    def params(self) -> dict[str, Any]:
        return {"host": self.host or None, "hostaddr": self.hostaddr or None,
                "port": self.port or None}

    def __str__(self) -> str:
        return f"{self.hostaddr or self.host}:{self.port or 'default'}"


def hosts_of(params: dict[str, Any]) -> list[Host] | None:
    """The hosts of a conninfo, when there are several and the order is ours to choose."""
    if any(str(params.get(k) or "") in values for k, values in _OWN_ORDER.items()):
        return None
    names = str(params.get("host") or "").split(",")
    addrs = str(params.get("hostaddr") or "").split(",")
    ports = str(params.get("port") or "").split(",")
    count = max(len(names), len(addrs))
    if count < 2:
        return None
    names = names * count if names == [""] else names
    addrs = addrs * count if addrs == [""] else addrs
    ports = ports * count if len(ports) == 1 else ports
    if not len(names) == len(addrs) == len(ports) == count:
        return None          # malformed: psycopg says what is wrong with it
    return [Host(n, a, p) for n, a, p in zip(names, addrs, ports, strict=True)]


class HostOrder:
    """What this process knows of the hosts it connects to; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: dict[tuple[Any, ...], Host] = {}   # per URL: the host that gave a session
        self._silent: set[Host] = set()
        self._asked: dict[Host, float] = {}               # monotonic: last handshake begun
        self._moved: list[Callable[[tuple[Any, ...]], None]] = []

    def order(self, key: tuple[Any, ...], hosts: list[Host]) -> list[Host]:
        with self._lock:
            current = self._current.get(key)
            first = [h for h in hosts if h == current and h not in self._silent]
            rest = [h for h in hosts if h not in first and h not in self._silent]
            return first + rest + [h for h in hosts if h in self._silent]

    def answers(self, host: Host) -> bool:
        """Whether ``host`` completes a TCP handshake within HANDSHAKE_SECONDS; a silent host
        is asked again only HANDSHAKE_SECONDS after it was last asked (by any thread)."""
        if not host.tcp:
            return True
        now = time.monotonic()
        with self._lock:
            if host in self._silent and now - self._asked.get(host, -1e9) < HANDSHAKE_SECONDS:
                return False
            self._asked[host] = now
        try:
            socket.create_connection(host.address(), timeout=HANDSHAKE_SECONDS).close()
        except TimeoutError:
            with self._lock:
                if host not in self._silent:
                    log.warning("database host %s did not answer a TCP handshake within "
                                "%g s: trying it after the other hosts", host,
                                HANDSHAKE_SECONDS)
                self._silent.add(host)
            return False
        except OSError:
            pass        # refused, no route: an answer that costs no wait; libpq reports it
        with self._lock:
            self._silent.discard(host)
        return True

    def timed_out(self, host: Host) -> None:
        with self._lock:
            self._silent.add(host)

    def accepted(self, key: tuple[Any, ...], host: Host) -> None:
        with self._lock:
            before, self._current[key] = self._current.get(key), host
            self._silent.discard(host)
            moved = list(self._moved) if before is not None and before != host else []
        if moved:
            log.warning("database sessions now come from %s (before: %s)", host, before)
        for callback in moved:
            try:
                callback(key)
            except Exception:
                log.exception("a callback on the database host's change failed")

    def on_move(self, callback: Callable[[tuple[Any, ...]], None]) -> Callable[[], None]:
        """Call ``callback(key)`` when the host giving sessions for ``key`` changes; returns
        the function that stops it."""
        with self._lock:
            self._moved.append(callback)

        def remove() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._moved.remove(callback)

        return remove

    def forget(self) -> None:
        """Forget every host (tests)."""
        with self._lock:
            self._current.clear()
            self._silent.clear()
            self._asked.clear()


HOSTS = HostOrder()


def url_key(params: dict[str, Any], hosts: list[Host]) -> tuple[Any, ...]:
    return (tuple(hosts), str(params.get("target_session_attrs") or "any"))


def ordered_hosts(conninfo: str) -> tuple[tuple[Any, ...], list[Host]] | None:
    """The key and the hosts of ``conninfo`` in the order this process tries them; None for
    a URL with one host (or one whose order psycopg decides)."""
    params: dict[str, Any] = conninfo_to_dict(conninfo)
    hosts = hosts_of(params)
    if hosts is None:
        return None
    key = url_key(params, hosts)
    return key, HOSTS.order(key, hosts)


class OrderedConnection(psycopg.Connection[TupleRow]):
    """A connection whose multi-host URL is tried in ``HOSTS``' order (the module's
    docstring); a one-host URL connects as psycopg does."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Self:
        planned = ordered_hosts(conninfo) if not {"host", "hostaddr", "port"} & set(kwargs) \
            else None
        if planned is None:
            return super().connect(conninfo, **kwargs)
        key, hosts = planned
        failures: list[str] = []
        last: psycopg.OperationalError | None = None
        for host in hosts:
            if not HOSTS.answers(host):
                failures.append(f"{host}: no TCP handshake within {HANDSHAKE_SECONDS:g} s")
                continue
            try:
                conn = super().connect(make_conninfo(conninfo, **host.params()), **kwargs)
            except psycopg.errors.ConnectionTimeout as exc:
                HOSTS.timed_out(host)
                failures.append(f"{host}: {exc}")
                last = exc
            except psycopg.OperationalError as exc:
                failures.append(f"{host}: {str(exc).strip()}")
                last = exc
            else:
                HOSTS.accepted(key, host)
                return conn
        text = "no host gave a session: " + "; ".join(failures)
        raise psycopg.OperationalError(text) from last
