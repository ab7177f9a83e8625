"""The audit log of the caller's tenant: who changed which job or run, and how."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader
from crondepot.api.openapi import problems
from crondepot.api.params import MAX_BIGINT
from crondepot.audit import AuditEntry, list_audit

router = APIRouter(prefix="/v1", tags=["audit"])


@router.get("/audit", summary="Audit entries, newest first",
            responses=problems(401, 422, 429))
def read_audit(who: Reader, conn: Conn,
               subject: Annotated[str | None, Query(max_length=200)] = None,
               action: Annotated[str | None, Query(max_length=40)] = None,
               before_id: Annotated[int | None, Query(ge=1, le=MAX_BIGINT)] = None,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> JSONResponse:
    entries = list_audit(conn, who.tenant_id, subject=subject, action=action,
                         before_id=before_id, limit=limit)
    return JSONResponse({"items": [_entry(e) for e in entries],
                         "next_before_id": entries[-1].id if len(entries) == limit else None})


def _entry(entry: AuditEntry) -> dict[str, Any]:
    return {"id": entry.id, "at": entry.at.isoformat(), "actor": entry.actor,
            "action": entry.action, "subject": entry.subject, "before": entry.before,
            "after": entry.after}
