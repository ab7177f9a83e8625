"""Holds (crondepot.limits.holds): keep the caller's tenant's queued runs of a rate limit or a
target host from being claimed, without touching its jobs; list the holds."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.openapi import problems
from crondepot.base.vocab import LIMIT_NAME
from crondepot.limits import holds
from crondepot.limits.holds import HOST_NAME

router = APIRouter(prefix="/v1", tags=["holds"])
# The names, documented as holds.checked reads them (it answers 422 naming the field).
LimitName = Annotated[str, Path(json_schema_extra={"pattern": f"^(?:{LIMIT_NAME.pattern})$"})]
HostName = Annotated[str, Path(json_schema_extra={"pattern": f"^(?:{HOST_NAME.pattern})$"})]


class HoldChange(BaseModel):
    kind: str = Field(description="rate_limit or host")
    name: str
    held: bool = Field(description="whether it is held now")
    changed: bool = Field(description="false: it already was (or was not) held")


class HoldItem(BaseModel):
    kind: str
    name: str
    created_at: str
    created_by: str
    queued: int = Field(description="queued runs it holds now")


class HoldList(BaseModel):
    items: list[HoldItem]


def _change(kind: str, name: str, held: bool, changed: bool) -> JSONResponse:
    return JSONResponse({"kind": kind, "name": name, "held": held, "changed": changed})


_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"model": HoldChange},
                                               **problems(401, 403, 422, 429)}


@router.get("/holds", summary="List this tenant's holds",
            responses={200: {"model": HoldList}, **problems(401, 429)})
def list_(who: Reader, conn: Conn) -> JSONResponse:
    return JSONResponse({"items": [
        {k: v for k, v in h.document().items() if k != "tenant"}
        for h in holds.list_holds(conn, who.tenant_id)]})


@router.post("/limits/{name}/pause", summary="Hold this tenant's queued runs of a rate limit",
             responses=_RESPONSES)
def pause_limit(who: Writer, conn: Conn, name: LimitName) -> JSONResponse:
    return _change("rate_limit", name, True,
                   holds.hold(conn, who.tenant_id, "rate_limit", name))


@router.post("/limits/{name}/resume", summary="End the hold on a rate limit",
             responses=_RESPONSES)
def resume_limit(who: Writer, conn: Conn, name: LimitName) -> JSONResponse:
    return _change("rate_limit", name, False,
                   holds.release(conn, who.tenant_id, "rate_limit", name))


@router.post("/hosts/{host}/pause", summary="Hold this tenant's queued runs to a host",
             responses=_RESPONSES)
def pause_host(who: Writer, conn: Conn, host: HostName) -> JSONResponse:
    name = holds.checked_host(host)
    return _change("host", name, True,
                   holds.hold(conn, who.tenant_id, "host", name))


@router.post("/hosts/{host}/resume", summary="End the hold on a host", responses=_RESPONSES)
def resume_host(who: Writer, conn: Conn, host: HostName) -> JSONResponse:
    name = holds.checked_host(host)
    return _change("host", name, False, holds.release(conn, who.tenant_id, "host", name))
