"""Which tenant's rows a session sees: the session setting ``crondepot.tenant_id`` that
row-level security keys on (migration 0021, docs/operations.md, "Row-level security").

A connection from ``crondepot.db.connect`` sees no tenant's rows unless it was opened with
``tenants=ALL_TENANTS`` (the processes that work across tenants). The API's pooled
connections are told per request: ``serve`` names the authenticated token's tenant (and the
actor of the audit log) once the token is known, and the pool's reset forgets both when the
connection goes back (db/connect.py). ``see_all`` is for the one API path that reads across
tenants by design, the database gauges of ``/metrics``.
"""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.db import Q


def serve(conn: psycopg.Connection[Any], tenant_id: int, actor: str) -> None:
    """From now on this session sees ``tenant_id``'s rows only, and every change it makes
    is audited under ``actor``."""
    conn.execute(Q.serve_tenant, {"tenant_id": tenant_id, "actor": actor})


def see_all(conn: psycopg.Connection[Any]) -> None:
    """From now on this session sees every tenant's rows."""
    conn.execute(Q.see_all_tenants)
