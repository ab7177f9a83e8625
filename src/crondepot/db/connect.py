"""Where the database is, and connections to it.

The URL comes from ``--db`` or ``CRONDEPOT_DATABASE_URL``; with neither, crondepot starts (or
joins) the embedded PostgreSQL in the data directory. Connections are autocommit: every
multi-statement change opens its own explicit transaction, so none is left open by accident.

Every wait on the database is bounded (``bounded``): a primary cut off by a partition drops
packets rather than refusing them, and libpq would otherwise wait on TCP for minutes (the
kernel's retransmission timeout, about 15 minutes on Linux) while a worker's leases expire
under it. A setting the operator put in the URL wins over the default here.

Two roles (db/roles.py): ``migrate`` connects as the schema's owner, everything else as the
runtime role. A URL given by the operator is used as it is (the operator gives migrate the
owner's URL and the other processes the runtime role's); the embedded database hands out
both itself.

Row-level security (migration 0021) shows the runtime role the rows of the tenant named by
the session setting ``crondepot.tenant_id``, all rows for ``all``, and none without it. A
connection made here names no tenant unless its caller declares ``tenants=ALL_TENANTS``:
the processes that work across tenants by design (the scheduler's tick, the worker's claim
and outcomes, the maintenance leader, the operator's commands, migrate) do, in the
connection's startup options, so it holds for every statement and survives a reconnect.
The API does not: its pooled connections see nothing until a request's token is known, and
forget the tenant when they go back to the pool (docs/operations.md, "Row-level security").

A transaction-mode pooler (PgBouncer, ``pool_mode = transaction``) lends a server session for
one transaction at a time: startup options do not reach the server, and whatever a statement
sets for the session stays with the server connection for the next client. So only the
connections that hold no session state take the pooled URL (``--pooled-db``,
``CRONDEPOT_POOLED_DATABASE_URL``): the worker's pool and the scheduler's tick connection.
Their role carries ``crondepot.tenant_id = all`` (``ALTER ROLE … SET``), which every server
connection of that role's pool starts with, and is checked on every new connection
(``connect_pooled``), so a role without it fails loudly instead of seeing no rows. LISTEN,
the session advisory locks (maintenance leadership, the ledger check's turn) and the
operator's commands stay on the direct URL.

The API may put its request pool behind the pooler too (``crondepot api --pooled-db``), as
its own role (never the workers' one, which sees every tenant): its connections are then
``RequestConnection``s, on which each request's work is ONE transaction, opened when the
request's tenant is named (right after its token is looked up) and ended before its
response is sent (``tenancy.scope``), and the tenant and actor are set for that transaction
only (``set_config(…, true)``): nothing a request sets outlives it on a server connection
the pooler lends to the next client. The store functions' own ``conn.transaction()`` blocks
become savepoints of it.
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
from psycopg_pool.pool import AddConnection

from crondepot.base.errors import CrondepotError
from crondepot.db import roles
from crondepot.db.embedded import EmbeddedPostgres, default_data_dir
from crondepot.db.hosts import HOSTS, OrderedConnection, ordered_hosts
from crondepot.db.queries import Q

# Errors that mean the database is away or busy for a moment, not that its answer is no: a
# lost connection, a restart, a failover's read-only answer, a statement or lock timeout, a
# deadlock (all psycopg.OperationalError, as is psycopg_pool's PoolTimeout), a connection
# closed under us (InterfaceError), and TimeoutError from a socket. Every loop that retries
# on them, and only on them, uses this one tuple.
UNAVAILABLE = (psycopg.OperationalError, psycopg.InterfaceError, TimeoutError)

URL_ENV = "CRONDEPOT_DATABASE_URL"
POOLED_URL_ENV = "CRONDEPOT_POOLED_DATABASE_URL"
DATA_DIR_ENV = "CRONDEPOT_DATA_DIR"

# libpq parameters added to every URL that does not set them (docs/availability.md). The
# sum bounds a process's stall after a partition well under the shortest lease (5 s is the
# job document's minimum, 60 s its default):
# - connect_timeout: per host of a multi-host URL, so a dead first host costs 5 s, not 2 min
#   (and a host that does not answer is tried last, after a 1 s handshake: db/hosts.py);
# - tcp_user_timeout: a statement sent into a partition fails after 10 s of unacknowledged
#   data (the kernel would retransmit for ~15 min);
# - keepalives: an idle connection (a LISTEN, a pooled one) learns of the partition after
#   10 s idle + 3 probes 3 s apart, instead of at its next statement or never.
# These never cut a slow statement short: a live server's kernel acknowledges the data and
# answers the probes whatever the statement is doing. Unix sockets ignore the TCP ones.
CONNECTION_DEFAULTS: dict[str, str] = {
    "connect_timeout": "5",
    "tcp_user_timeout": "10000",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "3",
    "keepalives_count": "3",
}
# Server-side: a session that holds a transaction open and idle (a process frozen by SIGSTOP
# or cut off mid-transaction) releases its row locks after this, so the runs it locked can
# be claimed by others. crondepot never idles inside a transaction on purpose: every
# transaction is a few statements back to back, and no target is called inside one.
SESSION_DEFAULTS: dict[str, str] = {"idle_in_transaction_session_timeout": "60s"}

# The value of crondepot.tenant_id that lets a session see every tenant's rows.
ALL_TENANTS = "all"
TENANT_SETTING = "crondepot.tenant_id"


# How long a caller waits for a pooled connection (psycopg_pool's default is 30 s). In a
# partition the pool's probe of an idle connection and its attempts at new ones each take
# their bound above; past this the caller gets PoolTimeout (an OperationalError, handled as
# "database unavailable") instead of stalling for half a minute.
POOL_WAIT_SECONDS = 10.0

# How long a pool waits before it tries again to make a connection that failed. psycopg_pool
# doubles its wait from 1 s at each failure, with no cap short of its reconnect_timeout
# (5 min): after half a minute away it tries every 16-32 s, so a primary back (or newly
# promoted) meanwhile waits that long for a worker. While the database is away an attempt
# costs it nothing worth sparing (a refused connection, a read-only answer, a silent host
# skipped after its handshake), so a pool asks every second.
RECONNECT_SECONDS = 1.0


def bounded(url: str, *, tenants: str | None = None) -> str:
    """``url`` with the defaults above added where it does not set them itself; with
    ``tenants=ALL_TENANTS``, a session that sees every tenant's rows."""
    params: dict[str, Any] = conninfo_to_dict(url)
    extra: dict[str, Any] = {k: v for k, v in CONNECTION_DEFAULTS.items() if k not in params}
    options = str(params.get("options") or "")
    session = dict(SESSION_DEFAULTS)
    if tenants is not None:
        if tenants != ALL_TENANTS:
            raise ValueError(f"tenants: expected {ALL_TENANTS!r} or None, got {tenants!r}")
        session[TENANT_SETTING] = tenants
    settings = [f"-c {name}={value}" for name, value in session.items()
                if name not in options]
    if settings:
        extra["options"] = " ".join([options, *settings]).strip()
    return make_conninfo(url, **extra) if extra else url


class TenantSettingError(CrondepotError):
    """A connection whose role's default tenant setting is wrong for its use: a pooled one
    that does not see every tenant, or the API's that does."""


def pooled(url: str) -> str:
    """``url`` (a transaction-mode pooler's) with the TCP bounds above and no startup options:
    PgBouncer refuses ``options`` (or, told to ignore it, drops it), and the session settings
    come from the role instead (the module's docstring)."""
    params: dict[str, Any] = conninfo_to_dict(url)
    extra: dict[str, Any] = {k: v for k, v in CONNECTION_DEFAULTS.items() if k not in params}
    return make_conninfo(url, **extra) if extra else url


# Server-side prepared statements belong to a server session, which a transaction-mode
# pooler hands to other clients between transactions (PgBouncer before 1.21 cannot track
# them): psycopg must send every statement unprepared.
POOLED_CONNECTION: dict[str, Any] = {"autocommit": True, "prepare_threshold": None}


def check_pooled(conn: psycopg.Connection[Any]) -> None:
    """Raise ``TenantSettingError`` unless ``conn`` sees every tenant's rows without having said so
    itself: through a pooler, the only setting that survives is the role's (or database's)."""
    row = conn.execute(Q.session_tenant).fetchone()
    if not row or row[0] != ALL_TENANTS:
        raise TenantSettingError(
            f"the pooled database URL's role does not see every tenant "
            f"({TENANT_SETTING} is {row[0] if row else None!r}, expected {ALL_TENANTS!r}): "
            f"give the workers and schedulers a role of their own behind the pooler, with "
            f"ALTER ROLE name SET {TENANT_SETTING} = '{ALL_TENANTS}' "
            f"(deploy/README.md, \"PgBouncer\"); never the API's role")


def refuse_all_tenants_role(conn: psycopg.Connection[Any]) -> None:
    """Raise ``TenantSettingError`` if ``conn``, fresh and told nothing, sees every tenant's
    rows: the API's role must see none until a request's token names its tenant (a role
    made for the pooler, ``ALTER ROLE … SET crondepot.tenant_id = 'all'``, must not serve
    it)."""
    row = conn.execute(Q.session_tenant).fetchone()
    if row and row[0] == ALL_TENANTS:
        raise TenantSettingError(
            f"the API's database role sees every tenant's rows by default ({TENANT_SETTING} "
            f"= {ALL_TENANTS!r} from ALTER ROLE or ALTER DATABASE): connect the API as the "
            f"runtime role, not as the workers' pooled role")


class TransactionPoolerError(CrondepotError):
    """The API's connections go through a pooler that lends one server session to several
    clients between their transactions."""


def refuse_transaction_pooler(first: psycopg.Connection[Any],
                              second: psycopg.Connection[Any]) -> None:
    """Raise ``TransactionPoolerError`` if two of the API's connections, both open, ran
    statements in the same server session: only a transaction-mode pooler does that, and
    through it a request's session-level tenant would be seen by another client's request.

    Direct connections are recognised at once (the server process the client was told at
    connect is the one its statement runs in). Behind a pooler, ``first`` runs a statement
    (autocommit: the pooler takes the server session back after it) and ``second`` the
    next: PgBouncer lends the session it got back last, so in transaction mode ``second``
    meets ``first``'s. Never a false refusal (session mode keeps a session for one client);
    a transaction pooler that lends ``second`` another idle session escapes it, which is
    why the documentation says plainly that the API connects directly."""
    row = first.execute(Q.server_session).fetchone()
    if row is None or row[0] == first.info.backend_pid:
        return
    again = second.execute(Q.server_session).fetchone()
    if again is not None and again[0] == row[0]:
        raise TransactionPoolerError(
            "the API's database URL (--db, CRONDEPOT_DATABASE_URL) goes through a "
            "transaction-mode pooler (two of its connections ran in one server session): "
            "there a request's tenant, set for the session, would be seen by other "
            "requests. Give the pooler's URL as --pooled-db (CRONDEPOT_POOLED_DATABASE_URL), "
            "where each request is one transaction, and keep --db direct to PostgreSQL "
            "(docs/availability.md, \"PgBouncer in transaction mode\")")


class RequestConnection(OrderedConnection):
    """A connection of the API's request pool behind a transaction-mode pooler: a request's
    work on it is one transaction (the module's docstring), and what it sets for the tenant
    is transaction-local (``tenancy.scope``). ``read_snapshot``: the request is a read, whose
    transaction is REPEATABLE READ."""

    read_snapshot: bool = False


def connect_request_pooled(url: str, *, application_name: str = "crondepot-api"
                           ) -> RequestConnection:
    """A connection like those of the API's pooled request pool (``open_pool(pooled=True)``):
    through the pooler, no startup options, no prepared statements."""
    return RequestConnection.connect(pooled(url), application_name=application_name,
                                     **POOLED_CONNECTION)


def connect_pooled(url: str, *, application_name: str = "crondepot") -> psycopg.Connection[Any]:
    """An autocommit connection through a transaction-mode pooler, checked to see every
    tenant's rows (``check_pooled``); for the statements of cross-tenant processes that
    keep no session state."""
    conn = psycopg.connect(pooled(url), application_name=application_name, **POOLED_CONNECTION)
    try:
        check_pooled(conn)
    except BaseException:
        conn.close()
        raise
    return conn


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


def connect(url: str, *, application_name: str = "crondepot",
            tenants: str | None = None) -> psycopg.Connection[Any]:
    """An autocommit connection; ``tenants=ALL_TENANTS`` for one that works across tenants
    (see the module's docstring), else one that sees no tenant's rows until told."""
    return OrderedConnection.connect(bounded(url, tenants=tenants), autocommit=True,
                                     application_name=application_name)


class Pool(ConnectionPool):
    """A ``ConnectionPool`` that is back within about ``RECONNECT_SECONDS`` of its database:

    - it tries again to make a connection every ``RECONNECT_SECONDS`` at most (above);
    - it tries the hosts of a multi-host URL in this process's order (db/hosts.py);
    - it drops its idle connections when one of them fails its check, and when the host
      giving sessions changes (a new primary). A restart or a failover ends every session
      at once, and psycopg_pool checks the idle connections one by one, pausing 0, 1, 2,
      4, 8 s before each next check when one fails (a worker's pool holds up to 12); a
      connection to a partitioned old primary fails its check only after
      ``tcp_user_timeout``. Dropped, they are replaced at once.
    """

    def __init__(self, conninfo: str, **kwargs: Any) -> None:
        me = weakref.ref(self)
        check = kwargs.pop("check", None)
        if check is not None:
            kwargs["check"] = self._drain_on_failure(me, check)
        kwargs.setdefault("connection_class", OrderedConnection)
        super().__init__(conninfo, **kwargs)
        planned = ordered_hosts(conninfo)
        self._hosts_key = planned[0] if planned else None
        self._stop_watching = HOSTS.on_move(self._moved(me)) if planned else (lambda: None)

    @staticmethod
    def _drain_on_failure(pool_ref: weakref.ref[Pool], check: Any) -> Any:
        def checked(conn: psycopg.Connection[Any]) -> None:
            try:
                check(conn)
            except Exception:
                pool = pool_ref()
                if pool is not None and not pool.closed:
                    pool.drain()
                raise
        return checked

    @staticmethod
    def _moved(pool_ref: weakref.ref[Pool]) -> Any:
        def moved(key: tuple[Any, ...]) -> None:
            pool = pool_ref()
            if pool is not None and key == pool._hosts_key and not pool.closed:
                pool.drain()
        return moved

    def schedule_task(self, task: Any, delay: float) -> None:
        if isinstance(task, AddConnection):
            delay = min(delay, RECONNECT_SECONDS)
        super().schedule_task(task, delay)

    def close(self, timeout: float = 5.0) -> None:
        self._stop_watching()
        super().close(timeout)


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


def _forget_request(conn: psycopg.Connection[Any]) -> None:
    conn.execute(Q.clear_actor)


@contextmanager
def open_pool(
    url: str, *, min_size: int = 1, max_size: int = 4, application_name: str = "crondepot",
    through_pooler: bool = False,
) -> Iterator[Pool]:
    """The API's request pool. ``through_pooler``: ``url`` is a transaction-mode pooler's; its
    connections are ``RequestConnection``s, with no startup options and no prepared
    statements, and nothing to forget when they come back (a request's settings end with
    its transaction)."""
    extra: dict[str, Any] = ({"connection_class": RequestConnection} if through_pooler
                             else {"reset": _forget_request})
    pool = Pool(
        pooled(url) if through_pooler else bounded(url),
        min_size=min_size,
        max_size=max_size,
        timeout=POOL_WAIT_SECONDS,
        kwargs={**(POOLED_CONNECTION if through_pooler else {"autocommit": True}),
                "application_name": application_name},
        # A restarted database leaves dead connections in the pool: probe the ones that sat
        # idle before lending them (as HikariCP does), not every one (a round trip per
        # request). A direct connection back in the pool forgets its last user's actor and
        # tenant.
        **idle_check(),
        **extra,
        open=False,
    )
    pool.open(wait=True, timeout=30)
    try:
        yield pool
    finally:
        pool.close()
