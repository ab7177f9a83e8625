"""The audit log: who did what to which job or run, and when, with the row before and after.

Entries are written by database triggers, SECURITY DEFINER functions owned by the owner
(migrations 0003 and 0020, functions/audit_jobs.sql and audit_runs.sql). Every write to
jobs, tokens, grants and tenants (their signing secrets included) is recorded whatever the
session's settings: by the actor the session names (the API the token's tenant and token id
per request, the CLI the operating-system user and host per command), or else as
``role:<session_user>``. The scheduler's bookkeeping columns are left out, so its ticks
write none. Runs are audited only for sessions that name an actor (manual triggers,
replays, retries, cancels). A bulk insert of jobs is one ``job.bulk_create`` entry per
statement. The runtime role may only read the table; it refuses updates, deletes and
truncation to anyone.
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


def record_summary(conn: psycopg.Connection[Any], tenant_id: int, action: str, subject: str,
                   after: dict[str, Any]) -> None:
    """One entry next to the row entries the triggers wrote: a bulk action's batch, a
    backfill, a hold. Only those actions (``crondepot_audit_summary``, migration 0020)."""
    conn.execute(Q.audit_summary, {"tenant_id": tenant_id, "action": action,
                                   "subject": subject, "after": Jsonb(after)})


def list_audit(conn: psycopg.Connection[Any], tenant_id: int, *, subject: str | None = None,
               action: str | None = None, before_id: int | None = None,
               limit: int = 100) -> list[AuditEntry]:
    with conn.cursor(row_factory=class_row(AuditEntry)) as cur:
        return cur.execute(Q.list_audit, {"tenant_id": tenant_id, "subject": subject,
                                          "action": action, "before_id": before_id,
                                          "limit": limit}).fetchall()
