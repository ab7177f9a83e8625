"""Rate limits a tenant may use: list them, and create or change its own.

A bucket a tenant makes with ``PUT /v1/limits/{name}`` is its own: usable by its jobs
(``"rate_limit": name``) with no grant, by no other tenant's, and invisible to them (404).
Shared buckets are the operator's (``crondepot limits set``); a tenant sees the ones granted
to it and may not change them (403).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.body import json_body
from crondepot.api.models import Limit, LimitDocument, LimitList
from crondepot.api.openapi import link, location, problems, request_body
from crondepot.api.problems import Invalid
from crondepot.base.vocab import LIMIT_NAME
from crondepot.limits.buckets import (
    Bucket,
    InvalidLimit,
    LimitNotFound,
    put_own_limit,
    tenant_limits,
)

router = APIRouter(prefix="/v1/limits", tags=["limits"])
Body = Annotated[Any, Depends(json_body)]
# documented, not enforced here: put_own_limit refuses another name with its own message
NewName = Annotated[str, Path(json_schema_extra={"pattern": f"^(?:{LIMIT_NAME.pattern})$"})]
MAX_RATE = 1_000_000


def _json(bucket: Bucket) -> dict[str, Any]:
    return {"name": bucket.name, "rate_per_second": bucket.rate_per_second,
            "burst": bucket.burst, "owned": bucket.owned}


@router.get("", summary="List the rate limits this tenant may use",
            responses={200: {"model": LimitList}, **problems(401, 429)})
def list_(who: Reader, conn: Conn) -> JSONResponse:
    return JSONResponse({"items": [_json(b) for b in tenant_limits(conn, who.tenant_id)]})


@router.get("/{name}", summary="Get a rate limit this tenant may use",
            responses={200: {"model": Limit}, **problems(401, 404, 429)})
def read(who: Reader, conn: Conn, name: str) -> JSONResponse:
    for bucket in tenant_limits(conn, who.tenant_id):
        if bucket.name == name:
            return JSONResponse(_json(bucket))
    raise LimitNotFound(f"no rate limit {name!r}")


@router.put("/{name}", summary="Create or change a rate limit of this tenant's own",
            status_code=201,
            responses={200: {"model": Limit, "description": "changed"},
                       201: {"model": Limit, "description": "created",
                             "headers": location("/v1/limits/{name}"),
                             "links": link("GetLimit", "ratelimits_read",
                                           name="$request.path.name")},
                       **problems(401, 403, 404, 413, 415, 422, 429)},
            openapi_extra=request_body(LimitDocument, {"sms": {"rate_per_second": 450,
                                                               "burst": 50}}))
def put(who: Writer, conn: Conn, name: NewName, doc: Body) -> JSONResponse:
    rate, burst = _document(doc)
    try:
        bucket, created = put_own_limit(conn, who.tenant_id, name, rate, burst)
    except InvalidLimit as exc:     # the body was checked above: it is the name
        raise Invalid(str(exc), field="name") from None
    new = {"Location": f"/v1/limits/{quote(bucket.name, safe='')}"} if created else {}
    return JSONResponse(_json(bucket), status_code=201 if created else 200, headers=new)


def _document(doc: Any) -> tuple[float, int]:
    """(rate_per_second, burst) of a LimitDocument; Invalid naming the field otherwise."""
    if not isinstance(doc, dict):
        raise Invalid(f"expected a JSON object like {{\"rate_per_second\": 450, \"burst\": "
                      f"50}}, got {type(doc).__name__}", field="body")
    unknown = sorted(set(doc) - {"rate_per_second", "burst"})
    if unknown:
        raise Invalid(f"unknown field {unknown[0]!r}; allowed: burst, rate_per_second",
                      field=unknown[0])
    rate = doc.get("rate_per_second")
    if isinstance(rate, bool) or not isinstance(rate, int | float) \
            or not 0 < rate <= MAX_RATE:
        raise Invalid(f"expected rate_per_second to be a number above 0 and at most "
                      f"{MAX_RATE}, got {rate!r}", field="rate_per_second")
    burst = doc.get("burst")
    if burst is None:
        burst = max(1, int(rate))       # one second's worth, as `crondepot limits set`
    if isinstance(burst, float) and burst.is_integer():
        burst = int(burst)              # 50.0 is an integer to JSON Schema, as the doc says
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= MAX_RATE:
        raise Invalid(f"expected burst to be an integer from 1 to {MAX_RATE}, got {burst!r}",
                      field="burst")
    return float(rate), burst
