"""The audit log: who did what to which job or run, and when, with the row before and after.

Entries are written by database triggers (migration 0003), for sessions that name an actor:
the API names the token's tenant and token id per request, the CLI the operating-system user
and host per command. Schedulers and workers name none, so their bookkeeping is not
audited. The table refuses updates, deletes and truncation.
"""

from __future__ import annotations

import getpass
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

from crondepot.db import Q


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    id: int
    at: datetime
    actor: str
    action: str
    subject: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


def act_as(conn: psycopg.Connection[Any], actor: str) -> None:
    """Name the actor of everything this session changes from now on."""
    conn.execute(Q.set_actor, {"actor": actor})


def cli_actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"cli:{user}@{socket.gethostname()}"


def without_row_entries(conn: psycopg.Connection[Any]) -> None:
    """Inside a transaction: its job rows are not audited one by one (bulk import)."""
    conn.execute(Q.audit_rows_off)


def record_summary(conn: psycopg.Connection[Any], tenant_id: int, action: str, subject: str,
                   after: dict[str, Any]) -> None:
    conn.execute(Q.audit_summary, {"tenant_id": tenant_id, "action": action,
                                   "subject": subject, "after": Jsonb(after)})


def list_audit(conn: psycopg.Connection[Any], tenant_id: int, *, subject: str | None = None,
               action: str | None = None, before_id: int | None = None,
               limit: int = 100) -> list[AuditEntry]:
    with conn.cursor(row_factory=class_row(AuditEntry)) as cur:
        return cur.execute(Q.list_audit, {"tenant_id": tenant_id, "subject": subject,
                                          "action": action, "before_id": before_id,
                                          "limit": limit}).fetchall()
