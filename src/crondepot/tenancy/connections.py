"""Broker connections: a broker URL (with its secret) the operator names, and grants to the
tenants whose jobs may publish through it (docs/targets.md, "Connections").

``crondepot connections add rabbit amqp://user:secret@mq.internal:5672/%2F`` stores it;
``crondepot tenants grant bank42 --connection rabbit`` lets bank42's jobs name it
(``{"type": "amqp", "connection": "rabbit", …}``). A tenant never gives a broker URL: a
worker publishes only where the operator chose, which is for brokers what the address guard
is for webhooks. The URL is read by workers alone; every listing shows its scheme and host.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg_pool import ConnectionPool

from crondepot.base.errors import CrondepotError, PermanentError
from crondepot.db import Q
from crondepot.db.cache import ReadThrough

# A connection's name: a short slug, as the connections table's CHECK.
CONNECTION_NAME = re.compile(r"[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?")
# The URL schemes each broker kind accepts (the kind's target module checks that a job's
# connection is of its kind when the worker resolves it).
SCHEMES: dict[str, tuple[str, ...]] = {
    "amqp": ("amqp", "amqps"),
    "nats": ("nats", "tls"),
    "redis": ("redis", "rediss"),
}
_ALL_SCHEMES = tuple(s for schemes in SCHEMES.values() for s in schemes)
# How long a worker trusts what it read of a connection's URL (a changed URL reaches every
# worker within this).
CACHE_SECONDS = 30.0


class InvalidConnection(CrondepotError, ValueError):
    """An add or remove the operator asked for cannot be done; nothing was changed."""


class UnknownConnection(PermanentError):
    """A run names a connection that no longer exists (removed after the run was queued)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """A connection as any read shows it: never its URL's user, password or path."""

    name: str
    scheme: str
    host: str
    created_at: Any


def check_name(name: str) -> str:
    if not CONNECTION_NAME.fullmatch(name):
        raise InvalidConnection(f"name: expected a name like 'rabbit' (lowercase letters, "
                                f"digits, '.', '_' or '-'), got {name!r}; nothing was changed")
    return name


def check_url(url: str) -> str:
    """The URL, if it is a broker URL of a known scheme with a host (InvalidConnection
    otherwise, without echoing the URL: it may hold a password)."""
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port     # a bad port raises ValueError
    except ValueError:
        raise InvalidConnection("url: not a valid URL (a bad port?); nothing was "
                                "changed") from None
    if parts.scheme not in _ALL_SCHEMES:
        raise InvalidConnection(f"url: expected a scheme of {', '.join(_ALL_SCHEMES)}, got "
                                f"{parts.scheme!r}; nothing was changed")
    if not host:
        raise InvalidConnection("url: names no host; nothing was changed")
    return url


def redacted(url: str) -> tuple[str, str]:
    """(scheme, host[:port]) of a stored URL: what a read may show of it."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    host = parts.hostname or "?"
    return parts.scheme, f"{host}:{port}" if port else host


def add(conn: psycopg.Connection[Any], name: str, url: str) -> bool:
    """Store the connection, or change an existing one's URL; True when it is new."""
    row = conn.execute(Q.put_connection,
                       {"name": check_name(name), "url": check_url(url)}).fetchone()
    assert row is not None
    return bool(row[0])


def remove(conn: psycopg.Connection[Any], name: str) -> None:
    """Remove the connection and its grants; the runs of jobs naming it then fail."""
    if conn.execute(Q.remove_connection, {"name": name}).rowcount == 0:
        raise InvalidConnection(f"no connection named {name!r}; nothing was changed")


def list_connections(conn: psycopg.Connection[Any]) -> list[Connection]:
    out = []
    for name, url, created_at in conn.execute(Q.list_connections):
        scheme, host = redacted(url)
        out.append(Connection(name=name, scheme=scheme, host=host, created_at=created_at))
    return out


def exists(conn: psycopg.Connection[Any], name: str) -> bool:
    return conn.execute(Q.connection_url, {"name": name}).fetchone() is not None


class ConnectionUrls:
    """A worker's view of the connections' URLs, each read at most every ``ttl`` seconds
    (thread-safe; crondepot.db.cache): ``url(name)`` or UnknownConnection."""

    def __init__(self, pool: ConnectionPool, *, ttl: float = CACHE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._view = ReadThrough(pool, _url_of, ttl=ttl, clock=clock,
                                 what=lambda name: f"the URL of connection {name!r}")

    def url(self, name: str) -> str:
        return self._view.get(name)


def _url_of(conn: psycopg.Connection[Any], name: str) -> str:
    row = conn.execute(Q.connection_url, {"name": name}).fetchone()
    if row is None:
        raise UnknownConnection(f"no connection named {name!r} (removed after the run was "
                                "queued?); not published")
    return str(row[0])
