"""Which tenant's rows a session sees: the session setting ``crondepot.tenant_id`` that
row-level security keys on (migration 0021, docs/operations.md, "Row-level security").

A connection from ``crondepot.db.connect`` sees no tenant's rows unless it was opened with
``tenants=ALL_TENANTS`` (the processes that work across tenants). The API's pooled
connections are told per request: ``serve`` names the authenticated token's tenant (and the
actor of the audit log) once the token is known. ``see_all`` is for the API paths that read
across tenants by design, the database gauges of ``/metrics`` and the operator's console.

Two ways to forget it, one per kind of request pool (db/connect.py):

- **direct** (``crondepot api --db``): the setting is the session's, and the pool's reset
  clears it when the connection goes back;
- **through a transaction-mode pooler** (``crondepot api --pooled-db``): the connection is a
  ``RequestConnection``, and the request's database work is one transaction, opened by
  ``serve`` (or ``see_all``) and ended by ``end_request`` before the response is sent: the
  setting is the transaction's (``set_config(…, true)``) and ends with it, so the pooler
  never lends a server connection that still carries it. A request that commits in batches
  (a bulk action, an import) calls ``checkpoint`` between them.

  What runs before ``serve`` runs on its own, in autocommit: the token's (or console
  session's) look-up, a SECURITY DEFINER function that sees no tenant and keeps no session
  state, and ``/readyz``'s schema read. The look-up writes the token's last use once a
  minute; inside the request's transaction that row lock would be held to the request's
  end, and two admin tokens revoking each other at once deadlocked on it (each request
  holding its own token's row, wanting the other's).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from crondepot.db import Q
from crondepot.db.connect import RequestConnection


def serve(conn: psycopg.Connection[Any], tenant_id: int, actor: str) -> None:
    """From now on this session (on a ``RequestConnection``: the request's transaction,
    opened here) sees ``tenant_id``'s rows only, and every change it makes is audited under
    ``actor``."""
    params = {"tenant_id": tenant_id, "actor": actor}
    if isinstance(conn, RequestConnection):
        _enter_request_transaction(conn)
        conn.execute(Q.serve_tenant_in_transaction, params)
    else:
        conn.execute(Q.serve_tenant, params)


def see_all(conn: psycopg.Connection[Any]) -> None:
    """From now on this session (or request transaction, as ``serve``) sees every tenant's
    rows."""
    if isinstance(conn, RequestConnection):
        _enter_request_transaction(conn)
        conn.execute(Q.see_all_tenants_in_transaction)
    else:
        conn.execute(Q.see_all_tenants)


def begin_request(conn: psycopg.Connection[Any], *, snapshot: bool = False) -> None:
    """A request takes ``conn``: on a ``RequestConnection``, say whether its transaction
    (opened by ``serve``) is a read's, REPEATABLE READ, whose reads then share one snapshot
    as the ledger check and the forecast need (db/transactions.py). No round trip."""
    if isinstance(conn, RequestConnection):
        conn.read_snapshot = snapshot


def end_request(conn: psycopg.Connection[Any]) -> None:
    """End the request's transaction: commit what it did, as autocommit and the store
    functions' own transactions would have done on a direct connection, or roll it back if
    a statement failed outside a savepoint (the transaction is aborted then). A commit that
    fails raises: the request fails rather than answer for a change that is not there."""
    if not isinstance(conn, RequestConnection) or conn.closed:
        return
    status = conn.info.transaction_status
    if status == TransactionStatus.INTRANS:
        conn.commit()
    elif status == TransactionStatus.INERROR:
        conn.rollback()


def checkpoint(conn: psycopg.Connection[Any]) -> None:
    """Between two batches of a request that commits in batches (a bulk action, an import):
    on a ``RequestConnection``, commit the request's transaction so far and open the next
    one with the same tenant and actor, so its row locks are held for one batch as on a
    direct connection; elsewhere nothing (each batch's own transaction has committed).
    Only outside the caller's ``conn.transaction()`` blocks."""
    if not isinstance(conn, RequestConnection):
        return
    _require_request_transaction(conn)
    row = conn.execute(Q.request_scope).fetchone()
    tenant, actor = row if row is not None else (None, None)
    conn.commit()
    conn.execute(Q.begin_request)
    conn.execute(Q.restore_request_scope, {"tenant": tenant, "actor": actor})


def _enter_request_transaction(conn: RequestConnection) -> None:
    status = conn.info.transaction_status
    if status == TransactionStatus.IDLE:
        conn.execute(Q.begin_read_request if conn.read_snapshot else Q.begin_request)
    elif status != TransactionStatus.INTRANS:
        raise RuntimeError(f"the request's transaction cannot take its tenant ({status.name})")


def _require_request_transaction(conn: RequestConnection) -> None:
    # Outside a transaction a local setting would end with its own statement: the request
    # would see nothing, and a session-level one would outlive it. Neither is right.
    if conn.info.transaction_status != TransactionStatus.INTRANS:
        raise RuntimeError("a request on a pooled connection must run inside its "
                           "transaction (opened by tenancy.scope.serve)")
