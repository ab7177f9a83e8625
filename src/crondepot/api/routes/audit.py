"""The audit log of the caller's tenant: who changed which job or run, and how."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader
from crondepot.api.openapi import problems
from crondepot.api.params import MAX_BIGINT, bigint
from crondepot.tenancy.audit import AuditEntry, list_audit

router = APIRouter(prefix="/v1", tags=["audit"])


@router.get("/audit", summary="Audit entries, newest first (cursor pagination)",
            responses=problems(401, 422, 429))
def read_audit(who: Reader, conn: Conn,
               subject: Annotated[str | None, Query(max_length=200)] = None,
               action: Annotated[str | None, Query(max_length=40)] = None,
               cursor: Annotated[str | None, Query(
                   max_length=20, description="next_cursor of the last page")] = None,
               before_id: Annotated[int | None, Query(
                   ge=1, le=MAX_BIGINT, deprecated=True,
                   description="deprecated alias of cursor (next_before_id of the last "
                               "page); removed in the next release")] = None,
               limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> JSONResponse:
    # One paging style for every list (docs/operations.md "Conventions"): ?cursor= in,
    # next_cursor out, null on the last page. The cursor is the last entry's id.
    if cursor is not None:
        before_id = bigint(cursor, field="cursor", expected="a next_cursor value")
    entries = list_audit(conn, who.tenant_id, subject=subject, action=action,
                         before_id=before_id, limit=limit + 1)
    page = entries[:limit]
    more = len(entries) > limit
    return JSONResponse({"items": [_entry(e) for e in page],
                         "next_cursor": str(page[-1].id) if more else None,
                         # deprecated: the same position as a number, for one release
                         "next_before_id": page[-1].id if more else None})


def _entry(entry: AuditEntry) -> dict[str, Any]:
    return {"id": entry.id, "at": entry.at.isoformat(), "actor": entry.actor,
            "action": entry.action, "subject": entry.subject, "before": entry.before,
            "after": entry.after}
