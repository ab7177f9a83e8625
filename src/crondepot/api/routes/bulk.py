"""Bulk actions by filter (crondepot.job.bulk): pause, resume or cancel every job of the
caller's tenant that a filter matches; with ``dry_run``, only count them.

Its router is included before the jobs router: ``/v1/jobs/bulk/pause`` would otherwise be
read as ``/v1/jobs/{job_id}/pause`` with a job id of "bulk".
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from crondepot.api.auth import Conn, Writer
from crondepot.api.openapi import problems, request_body
from crondepot.base.jsontext import NO_NUL
from crondepot.base.vocab import LIMIT_NAME, PRIORITIES, Priority
from crondepot.job import bulk
from crondepot.job import fields as F
from crondepot.job.bulk import Action, BulkFilter
from crondepot.job.json_schema import field_schema
from crondepot.limits.holds import HOST_NAME

router = APIRouter(prefix="/v1/jobs/bulk", tags=["jobs"])

GATEWAY_DOWN = {"rate_limit": "sms-gateway", "labels": {"bank": "42"}, "dry_run": True}


def request_schema() -> dict[str, Any]:
    """BulkRequest's JSON Schema, written out: each criterion may be absent or null, and at
    least one must be given (a non-empty string, or labels with one label at least), which
    the generated schema of the model could not say."""
    criteria: dict[str, Any] = {
        "key_prefix": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": NO_NUL,
                       "description": "jobs whose key begins with this"},
        "labels": {**field_schema(F.LABELS), "description": "jobs that carry every one of "
                                                             "these labels"},
        "host": {"type": "string", "pattern": f"^(?:{HOST_NAME.pattern})$",
                 "description": "jobs whose http target calls this host (compared "
                                "lowercase)"},
        "rate_limit": {"type": "string", "pattern": f"^(?:{LIMIT_NAME.pattern})$",
                       "description": "jobs that use this rate limit"},
        "priority": {"type": "string", "enum": list(PRIORITIES)},
    }
    for schema in criteria.values():
        schema.pop("default", None)
    properties: dict[str, Any] = {name: {"anyOf": [schema, {"type": "null"}]}
                  for name, schema in criteria.items()}
    properties["dry_run"] = {"type": "boolean", "default": False,
                             "description": "count the jobs (and list a few keys); change "
                                            "nothing"}
    # "given": present and not null; the property's own schema says its type. (A type here
    # would be merged by ReDoc with the property's null alternative: a schema warning.)
    present = {"not": {"type": "null"}}
    given = {"labels": {**present, "minProperties": 1}}
    return {"title": "BulkRequest", "type": "object", "properties": properties,
            "additionalProperties": False,
            "description": "Which jobs: every criterion given must hold; at least one is "
                           "required.",
            "anyOf": [{"required": [name],
                       "properties": {name: given.get(name, present)}}
                      for name in criteria]}


class BulkRequest(BaseModel):
    """Which jobs (see request_schema); the criteria are checked by BulkFilter.checked."""

    model_config = ConfigDict(extra="forbid")
    key_prefix: str | None = Field(None, min_length=1, max_length=200)
    labels: dict[str, str] | None = None
    host: str | None = None
    rate_limit: str | None = None
    priority: Priority | None = None
    dry_run: bool = Field(False, strict=True)   # not "true" or 1: the schema says boolean

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return request_schema()


class BulkResult(BaseModel):
    action: Literal["pause", "resume", "cancel"]
    dry_run: bool
    count: int = Field(description="dry run: the jobs the action would change now; else "
                                   "the jobs it changed")
    sample: list[str] = Field(description="dry run: the first keys (ids of keyless jobs), "
                                          "in id order; else empty")


def _bulk(action: Action, who: Writer, conn: Conn, body: BulkRequest) -> JSONResponse:
    where = BulkFilter.checked(key_prefix=body.key_prefix, labels=body.labels,
                               host=body.host, rate_limit=body.rate_limit,
                               priority=body.priority)
    if body.dry_run:
        seen = bulk.preview(conn, who.tenant_id, action, where)
        count, sample = seen.count, seen.sample
    else:
        count, sample = bulk.apply(conn, who.tenant_id, action, where), []
    return JSONResponse({"action": action, "dry_run": body.dry_run, "count": count,
                         "sample": sample})


_RESPONSES = {200: {"model": BulkResult}, **problems(401, 403, 413, 415, 422, 429)}
_BODY = request_body(BulkRequest, {"sms_gateway_down": GATEWAY_DOWN})


@router.post("/pause", summary="Pause every job a filter matches", responses=_RESPONSES,
             openapi_extra=_BODY)
def pause(who: Writer, conn: Conn, body: BulkRequest) -> JSONResponse:
    return _bulk("pause", who, conn, body)


@router.post("/resume", summary="Resume every paused job a filter matches",
             responses=_RESPONSES, openapi_extra=_BODY)
def resume(who: Writer, conn: Conn, body: BulkRequest) -> JSONResponse:
    return _bulk("resume", who, conn, body)


@router.post("/cancel", summary="Cancel every job a filter matches", responses=_RESPONSES,
             openapi_extra=_BODY)
def cancel(who: Writer, conn: Conn, body: BulkRequest) -> JSONResponse:
    return _bulk("cancel", who, conn, body)
