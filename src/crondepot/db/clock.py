"""The database clock: every "now" that decides a schedule is read here, never on a host.

Tests inject ``now``; production passes None and gets the server's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg

from crondepot.db.queries import Q


def database_now(conn: psycopg.Connection[Any], now: datetime | None = None) -> datetime:
    """The transaction's start on the database clock (``now()``), or ``now`` if given."""
    return _read(conn, Q.db_now, now)


def database_clock(conn: psycopg.Connection[Any], now: datetime | None = None) -> datetime:
    """The database clock at this instant (``clock_timestamp()``), or ``now`` if given: read
    after a row lock, it is later than the now() of whoever held the lock before."""
    return _read(conn, Q.db_clock, now)


def _read(conn: psycopg.Connection[Any], query: str, now: datetime | None) -> datetime:
    row = conn.execute(query, {"now": now}).fetchone()
    assert row is not None
    value: datetime = row[0]
    return value
