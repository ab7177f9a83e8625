"""Database slots: how a request gets one of the API's pooled connections, within a bound.

There are as many slots as the pool has connections. A request waits for a slot on the event
loop *before* it takes a worker thread: waiting inside a thread instead (a plain
``pool.connection()``) lets requests blocked on an exhausted pool occupy every thread, while
the requests holding the connections wait for a thread to finish in, a deadlock under load.

The wait is bounded (``wait_seconds``, ``crondepot api --pool-wait``): a request that finds
no slot free in time is answered 503 with ``Retry-After`` (``PoolStarved``), never left
hanging, and ``/readyz`` says the process is not ready while that lasts. A slot taken, the
connection itself comes from the pool under the pool's own bound (``db/connect.py``); past it
the database is unavailable, which is another 503.

Behind a transaction-mode pooler (``one_transaction``) the connection is lent marked for
the request's one transaction (``tenancy.scope.begin_request``; ``serve`` opens it once the
token is known), and the transaction is ended (``end_request``: committed, or rolled back
if a statement failed) before the connection goes back, in the same thread hop as returning
it: the mode costs a ``BEGIN`` and a ``COMMIT``, and no thread switch.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from fastapi.concurrency import run_in_threadpool
from psycopg_pool import ConnectionPool

from crondepot.api.limits import retry_after
from crondepot.api.problems import PoolStarved
from crondepot.runtime import metrics
from crondepot.tenancy import scope

DEFAULT_WAIT_SECONDS = 2.0


class DbSlots:
    """The pool's connections, lent one per request with a bounded wait."""

    def __init__(self, pool: ConnectionPool, *, size: int,
                 wait_seconds: float = DEFAULT_WAIT_SECONDS,
                 one_transaction: bool = False) -> None:
        self.pool = pool
        self.wait_seconds = wait_seconds
        self.one_transaction = one_transaction
        self._free = asyncio.Semaphore(size)

    @asynccontextmanager
    async def connection(self, wait: float | None = None, *, connect: float | None = None,
                         snapshot: bool = False) -> AsyncIterator[psycopg.Connection[Any]]:
        """A pooled connection, held for the block; PoolStarved if no slot is free within
        ``wait`` seconds (default ``wait_seconds``). ``connect``: how long the pool may take
        to lend it (default the pool's own bound). ``snapshot``: with ``one_transaction``,
        the request's transaction is REPEATABLE READ (a read request's)."""
        await self._take(self.wait_seconds if wait is None else wait)
        try:
            if not self.one_transaction:
                conn = await run_in_threadpool(self.pool.getconn, connect)
                try:
                    yield conn
                finally:
                    await run_in_threadpool(self.pool.putconn, conn)
                return
            conn = await run_in_threadpool(self._lend, connect, snapshot)
            try:
                yield conn
            finally:
                await run_in_threadpool(self._give_back, conn)
        finally:
            self._free.release()

    def _lend(self, connect: float | None, snapshot: bool) -> psycopg.Connection[Any]:
        conn = self.pool.getconn(connect)
        try:
            scope.begin_request(conn, snapshot=snapshot)
        except BaseException:
            self.pool.putconn(conn)
            raise
        return conn

    def _give_back(self, conn: psycopg.Connection[Any]) -> None:
        try:
            scope.end_request(conn)
        finally:
            self.pool.putconn(conn)

    async def _take(self, wait: float) -> None:
        try:
            async with asyncio.timeout(wait):
                await self._free.acquire()
        except TimeoutError:
            metrics.labelled(metrics.api_refused, "pool_starved").inc()
            raise PoolStarved(
                f"every database connection of this API process stayed busy for {wait:g} s; "
                "retry later", headers={"Retry-After": retry_after(self.wait_seconds)}
            ) from None
