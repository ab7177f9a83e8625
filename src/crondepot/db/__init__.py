"""The database: where to find it, connections to it, its schema and its named queries.

Everything else in crondepot talks to PostgreSQL through this package's pieces: ``connect``
and ``open_pool`` for connections, ``Q`` for SQL, ``migrate`` for the schema.
"""

from __future__ import annotations

from crondepot.db.connect import (
    ALL_TENANTS,
    POOL_WAIT_SECONDS,
    UNAVAILABLE,
    Database,
    Pool,
    bounded,
    connect,
    idle_check,
    open_database,
    open_pool,
)
from crondepot.db.migrations import MigrationError, migrate
from crondepot.db.queries import Q

__all__ = [
    "ALL_TENANTS",
    "POOL_WAIT_SECONDS",
    "UNAVAILABLE",
    "Database",
    "MigrationError",
    "Pool",
    "Q",
    "bounded",
    "connect",
    "idle_check",
    "migrate",
    "open_database",
    "open_pool",
]
