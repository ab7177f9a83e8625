"""Where the database is, and connections to it.

The URL comes from ``--db`` or ``CRONDEPOT_DATABASE_URL``; with neither, crondepot starts (or
joins) the embedded PostgreSQL in the data directory. Connections are autocommit: every
multi-statement change opens its own explicit transaction, so none is left open by accident.

Two roles (db/roles.py): ``migrate`` connects as the schema's owner, everything else as the
runtime role. A URL given by the operator is used as it is (the operator gives migrate the
owner's URL and the other processes the runtime role's); the embedded database hands out
both itself.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from crondepot.db import roles
from crondepot.db.embedded import EmbeddedPostgres, default_data_dir
from crondepot.db.queries import Q

URL_ENV = "CRONDEPOT_DATABASE_URL"
DATA_DIR_ENV = "CRONDEPOT_DATA_DIR"


@dataclass
class Database:
    """A resolved database: its conninfo, and the embedded server behind it if there is one.

    ``url`` is what processes connect with; ``owner_url`` what ``migrate`` connects with. For
    the embedded server they differ (the runtime role, the owner); for a URL the operator
    gave they are that one URL.
    """

    url: str
    embedded: EmbeddedPostgres | None = field(default=None, repr=False)
    owner_url: str = ""

    def __post_init__(self) -> None:
        self.owner_url = self.owner_url or self.url

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.close()
            self.embedded = None

    def with_application_name(self, name: str) -> str:
        return make_conninfo(self.url, application_name=name)

    def describe(self) -> str:
        """The URL without its password, for logs and status lines."""
        params: dict[str, Any] = conninfo_to_dict(self.url)
        if "password" in params:
            params["password"] = "***"
        where = "embedded" if self.embedded else "external"
        return f"{where} {make_conninfo('', **params)}"


def open_database(url: str | None = None, data_dir: str | Path | None = None) -> Database:
    """Resolve the database to use: ``url``, else $CRONDEPOT_DATABASE_URL, else embedded."""
    url = url or os.environ.get(URL_ENV) or None
    if url:
        return Database(url=url)
    folder = Path(data_dir or os.environ.get(DATA_DIR_ENV) or default_data_dir())
    embedded = EmbeddedPostgres(folder)
    owner = embedded.start()
    return Database(url=roles.runtime_url(owner, roles.DEFAULT_RUNTIME_ROLE), embedded=embedded,
                    owner_url=owner)


def connect(url: str, *, application_name: str = "crondepot") -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True, application_name=application_name)


IDLE_CHECK_SECONDS = 2.0


def idle_check(seconds: float = IDLE_CHECK_SECONDS) -> dict[str, Any]:
    """A ``check`` callback for a ``ConnectionPool`` that probes a connection before lending
    it only when it was last lent ``seconds`` ago or more.

    A restarted database leaves dead connections in a pool, so an idle connection is probed
    (a round trip) before use. A connection that was in use a moment ago is not: on a busy
    worker that probe was a third of all statements. If such a connection did die, its
    statement fails with ``OperationalError``, which every caller already treats as "the
    database is unavailable" (back off, retry), and the pool discards it.

    The time is kept when a connection is lent, not when it comes back: a ``reset`` callback
    would make the pool hand every returned connection to its maintenance thread (a thread
    switch per statement on the worker's hot path, and a connection unavailable meanwhile).
    """
    lent: weakref.WeakKeyDictionary[psycopg.Connection[Any], float] = (
        weakref.WeakKeyDictionary())

    def check(conn: psycopg.Connection[Any]) -> None:
        now = time.monotonic()
        last, lent[conn] = lent.get(conn, 0.0), now
        if now - last >= seconds:
            ConnectionPool.check_connection(conn)

    return {"check": check}


def _forget_actor(conn: psycopg.Connection[Any]) -> None:
    conn.execute(Q.clear_actor)


@contextmanager
def open_pool(
    url: str, *, min_size: int = 1, max_size: int = 4, application_name: str = "crondepot"
) -> Iterator[ConnectionPool]:
    pool = ConnectionPool(
        url,
        min_size=min_size,
        max_size=max_size,
        kwargs={"autocommit": True, "application_name": application_name},
        # A restarted database leaves dead connections in the pool: probe the ones that sat
        # idle before lending them (as HikariCP does), not every one (a round trip per
        # request). A connection back in the pool forgets its last user's actor.
        **idle_check(),
        reset=_forget_actor,
        open=False,
    )
    pool.open(wait=True, timeout=30)
    try:
        yield pool
    finally:
        pool.close()
