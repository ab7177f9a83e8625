"""A transaction whose reads share one snapshot, on a connection in autocommit mode or inside
an API request's one transaction (its pool behind a transaction-mode pooler: db/connect.py,
``RequestConnection``).

``SET TRANSACTION ISOLATION LEVEL`` must come first in a transaction and never in a
savepoint. On an idle connection the block is its own REPEATABLE READ transaction; inside a
request's transaction, which a read request (GET) opens REPEATABLE READ already
(``tenancy.scope.serve``), it is a savepoint of that one snapshot. A request that
writes reads with READ COMMITTED and must not ask for this: an error says so.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from crondepot.db.queries import Q

_ONE_SNAPSHOT = ("repeatable read", "serializable")


@contextmanager
def one_snapshot(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """A transaction (or a savepoint of the enclosing one) whose reads share one snapshot."""
    if conn.info.transaction_status == TransactionStatus.IDLE:
        with conn.transaction():
            conn.execute(Q.repeatable_read)
            yield
        return
    row = conn.execute(Q.transaction_isolation).fetchone()
    if row is None or row[0] not in _ONE_SNAPSHOT:
        raise RuntimeError(f"one snapshot asked for inside a {row[0] if row else '?'} "
                           "transaction: open it REPEATABLE READ (a read request's is)")
    with conn.transaction():
        yield
