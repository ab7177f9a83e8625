"""Holds: a tenant's queued runs of one rate limit or one target host are not claimed while
the hold lasts ("the SMS gateway is down"). Jobs are not touched: the scheduler
goes on writing their fires, which wait queued; after the resume the workers take them, and
a run whose misfire deadline passed meanwhile is recorded skipped, never sent (docs/ledger.md).

Held runs are taken out of the claim's ready range (migration 0018): a new hold moves the
tenant's matching queued runs to ``available_at = 'infinity'`` in one statement, keeping
each run's ready time in ``held_available_at``; runs queued later for a held job (new fires,
retries, replays) are moved by the maintenance leader's rescuer each turn (``sweep``); the
release puts back the runs no other hold names. So a claim never walks a held backlog: it
meets at most the few runs queued since the rescuer's last turn, which its own check
(``crondepot_run_held``, read only for tenants with a hold) passes over. A held run keeps
its misfire deadline: the rescuer records it skipped when that passes, held or not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import class_row

from crondepot.base.errors import InvalidJob
from crondepot.base.vocab import LIMIT_NAME
from crondepot.db import Q
from crondepot.tenancy.audit import record_summary

Kind = Literal["rate_limit", "host"]
# The sweep moves out held runs ready within this many seconds: the claim meets no others,
# and the rescuer turns every few seconds (maintenance reap_seconds, 5 by default).
SWEEP_HORIZON = 300.0
# A host as crondepot_host_of (functions/host_of.sql) reads it from a URL: a name or
# address, or an IPv6 address in brackets; compared lowercase.
HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]")


@dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    tenant: str             # its name
    kind: str
    name: str
    created_at: datetime
    created_by: str
    queued: int             # queued runs it holds now

    def document(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "kind": self.kind, "name": self.name,
                "queued": self.queued, "created_at": self.created_at.isoformat(),
                "created_by": self.created_by}


def checked_host(host: str) -> str:
    """A host as the claim compares it (lowercase), or InvalidJob naming ``host``."""
    if not HOST_NAME.fullmatch(host):
        raise InvalidJob(f"expected host to be a host name like sms.example.com (no scheme, "
                         f"port or path), got {host!r}", field="host")
    return host.lower()


def checked(kind: str, name: str) -> tuple[Kind, str]:
    if kind == "host":
        return "host", checked_host(name)
    if kind == "rate_limit":
        if not LIMIT_NAME.fullmatch(name):
            raise InvalidJob(f"expected a rate limit name (lowercase letters, digits, '.', "
                             f"'_' or '-'), got {name!r}", field="name")
        return "rate_limit", name
    raise InvalidJob(f"expected kind rate_limit or host, got {kind!r}", field="kind")


def hold(conn: psycopg.Connection[Any], tenant_id: int, kind: str, name: str) -> bool:
    """Hold the tenant's runs of ``name``; False if it was held already (nothing changes)."""
    kind, name = checked(kind, name)
    with conn.transaction():
        conn.execute(Q.lock_holds)
        row = conn.execute(Q.insert_hold, {"tenant_id": tenant_id, "kind": kind,
                                           "name": name}).fetchone()
        if row is not None:
            conn.execute(Q.move_out_held_runs, {"tenant_id": tenant_id, "horizon": None})
            record_summary(conn, tenant_id, f"{kind}.pause", name, {"held": True})
    return row is not None


def release(conn: psycopg.Connection[Any], tenant_id: int, kind: str, name: str) -> bool:
    """End the hold; False if there was none. Wakes the workers: the runs are ready."""
    kind, name = checked(kind, name)
    with conn.transaction():
        conn.execute(Q.lock_holds)
        row = conn.execute(Q.delete_hold, {"tenant_id": tenant_id, "kind": kind,
                                           "name": name}).fetchone()
        if row is not None:
            conn.execute(Q.put_back_released_runs, {"tenant_id": tenant_id})
            record_summary(conn, tenant_id, f"{kind}.resume", name, {"held": False})
            conn.execute(Q.notify_runs_queued, {"priorities": "urgent,normal,bulk"})
    return row is not None


def sweep(conn: psycopg.Connection[Any], *, horizon_seconds: float = SWEEP_HORIZON) -> int:
    """Move out the held queued runs ready within ``horizon_seconds`` that are not yet (the
    rescuer's turn); return how many. Costs one probe of the empty ``holds`` table when
    there is no hold."""
    with conn.transaction():
        if conn.execute(Q.any_hold).fetchone() is None:
            return 0
        conn.execute(Q.lock_holds)
        return conn.execute(Q.move_out_held_runs,
                            {"tenant_id": None, "horizon": horizon_seconds}).rowcount


def list_holds(conn: psycopg.Connection[Any], tenant_id: int | None) -> list[Hold]:
    """A tenant's holds (every tenant's for None), each with the queued runs it holds."""
    with conn.cursor(row_factory=class_row(Hold)) as cur:
        return cur.execute(Q.list_holds, {"tenant_id": tenant_id}).fetchall()
