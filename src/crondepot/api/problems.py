"""HTTP errors as RFC 9457 problem documents, and the one table mapping errors to statuses.

    ApiError                      raised by the HTTP layer itself
    ├── Unauthorized      401     no token, or an unknown or revoked one
    ├── Forbidden         403     a read-only token asked for a change
    ├── NotFound          404     unknown id, or another tenant's (never said which)
    ├── RequestTimeout    408     the body did not arrive whole in time (api/intake.py)
    ├── PayloadTooLarge   413     a request body over its bound
    ├── UnsupportedMedia  415     a body of the wrong Content-Type
    ├── PreconditionRequired 428  a PATCH without If-Match
    ├── RateLimited       429     the token's request budget is spent (Retry-After)
    ├── PoolStarved       503     no database connection free in time (api/slots.py)
    ├── BodiesFull        503     the process holds its budget of request bodies (api/intake.py)
    ├── Invalid           422     bad input found before a domain object was made
    └── NothingImported   422     an import none of whose lines is a valid job document

Domain errors (crondepot.base.errors, crondepot.job.store, crondepot.tenancy.grants,
crondepot.tenancy.quotas) are mapped in ``_DOMAIN`` below;
anything else is a 500 that says nothing about its insides.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from fastapi import FastAPI, Request, routing
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from crondepot.base.errors import CrondepotError, DatabaseUnavailable, InvalidJob, InvalidSchedule
from crondepot.db.migrations import MigrationError
from crondepot.job.store import JobCancelled, JobNotFound, KeyConflict, VersionMismatch
from crondepot.limits.buckets import LimitNotFound, LimitNotOwned
from crondepot.notices.channels import ChannelNotFound, InvalidChannel
from crondepot.runs.deadletter import RunNotRetryable, RunPastDeadline
from crondepot.tenancy.calendars import CalendarInUse, CalendarNotFound, InvalidCalendar
from crondepot.tenancy.grants import NotGranted
from crondepot.tenancy.quotas import QuotaExceeded, UrgentNotAllowed
from crondepot.tenancy.tokens import InvalidToken, TokenConflict, TokenNotFound
from crondepot.tenancy.webhook_secret import InvalidOverlap

PROBLEM_BASE = "https://crondepot.dev/problems/"
MEDIA_TYPE = "application/problem+json"
log = logging.getLogger("crondepot.api")


class ApiError(Exception):
    status = 400
    slug = "bad-request"
    title = "Bad request"

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None,
                 errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}
        self.errors = errors
        self.extra: dict[str, Any] = {}     # extension members of the problem document


class Unauthorized(ApiError):
    status, slug, title = 401, "unauthorized", "Missing or unknown bearer token"


class Forbidden(ApiError):
    status, slug, title = 403, "forbidden", "The token's role does not allow this"


class NotFound(ApiError):
    status, slug, title = 404, "not-found", "Not found"


class PayloadTooLarge(ApiError):
    status, slug, title = 413, "payload-too-large", "Request body too large"


class RequestTimeout(ApiError):
    status, slug, title = 408, "request-timeout", "Request body not received in time"


class UnsupportedMedia(ApiError):
    status, slug, title = 415, "unsupported-media-type", "Unsupported Content-Type"


class PreconditionRequired(ApiError):
    status, slug, title = 428, "precondition-required", "If-Match header required"


class RateLimited(ApiError):
    status, slug, title = 429, "rate-limited", "Too many requests"


class PoolStarved(ApiError):
    status, slug, title = 503, "pool-starved", "No database connection free"


class BodiesFull(ApiError):
    status, slug, title = 503, "bodies-full", "Too many request bodies held"


class Invalid(ApiError):
    status, slug, title = 422, "validation", "Invalid request"

    def __init__(self, detail: str, *, field: str) -> None:
        super().__init__(detail, errors=[{"field": field, "message": detail}])


class NothingImported(ApiError):
    status, slug, title = 422, "validation", "No valid job document in the import"

    def __init__(self, counts: dict[str, int], errors: list[dict[str, Any]]) -> None:
        detail = ("the body holds no line" if not counts["lines"] else
                  f"none of the {counts['lines']} lines is a valid job document; nothing "
                  "was stored")
        super().__init__(detail, errors=errors or [{"field": "body", "message": detail}])
        self.extra = {"lines": counts["lines"], "failed": counts["failed"]}


@dataclass(frozen=True, slots=True)
class _Kind:
    status: int
    slug: str
    title: str


# The error tree mapped to statuses, most specific first (the first isinstance match wins).
_DOMAIN: tuple[tuple[type[BaseException], _Kind], ...] = (
    (UrgentNotAllowed, _Kind(403, "urgent-not-allowed", "The tenant may not use urgent")),
    (QuotaExceeded, _Kind(422, "quota-exceeded", "Over the tenant's quota")),
    (NotGranted, _Kind(422, "not-granted", "Handler or rate limit not granted")),
    (InvalidJob, _Kind(422, "validation", "Invalid job document")),
    (InvalidSchedule, _Kind(422, "validation", "Invalid schedule")),
    (JobNotFound, _Kind(404, "not-found", "Not found")),
    (LimitNotFound, _Kind(404, "not-found", "Not found")),
    (CalendarNotFound, _Kind(404, "not-found", "Not found")),
    (InvalidCalendar, _Kind(422, "validation", "Invalid calendar")),
    (ChannelNotFound, _Kind(404, "not-found", "Not found")),
    (InvalidChannel, _Kind(422, "validation", "Invalid notification channel")),
    (CalendarInUse, _Kind(409, "calendar-in-use", "Calendar used by live jobs")),
    (LimitNotOwned, _Kind(403, "limit-not-owned", "A shared rate limit is the operator's")),
    (InvalidToken, _Kind(422, "validation", "Invalid token request")),
    (InvalidOverlap, _Kind(422, "validation", "Invalid overlap")),
    (TokenNotFound, _Kind(404, "not-found", "Not found")),
    (TokenConflict, _Kind(409, "token-conflict", "The tenant's other tokens forbid this")),
    (KeyConflict, _Kind(409, "key-conflict", "Key already used for another document")),
    (JobCancelled, _Kind(409, "job-cancelled", "Job is cancelled")),
    (RunNotRetryable, _Kind(409, "run-not-retryable", "Only a failed or dead run can be "
                                                      "retried")),
    (RunPastDeadline, _Kind(409, "run-past-deadline", "Run is past its misfire deadline")),
    (VersionMismatch, _Kind(412, "version-mismatch", "Job changed since it was read")),
    (MigrationError, _Kind(503, "schema-not-current", "Database schema not current")),
    (DatabaseUnavailable, _Kind(503, "database-unavailable", "Database unavailable")),
    (psycopg.OperationalError, _Kind(503, "database-unavailable", "Database unavailable")),
    (CrondepotError, _Kind(400, "bad-request", "Bad request")),
)


def problem(status: int, slug: str, title: str, detail: str, *,
            headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {"type": PROBLEM_BASE + slug, "title": title, "status": status,
                            "detail": detail}
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(body, status_code=status, headers=headers, media_type=MEDIA_TYPE)


def problem_for(exc: BaseException) -> JSONResponse:
    """The problem response for any exception: the single place statuses are decided."""
    if isinstance(exc, ApiError):
        return problem(exc.status, exc.slug, exc.title, exc.detail, headers=exc.headers,
                       errors=exc.errors, **exc.extra)
    if isinstance(exc, RequestValidationError):
        return _request_validation(exc)
    if isinstance(exc, StarletteHTTPException) and exc.status_code == 400 \
            and isinstance(exc.__cause__, ValueError):
        # FastAPI could not read a model's body (not UTF-8): malformed JSON, as json_body says
        return problem(422, "validation", "Invalid request", f"malformed JSON: {exc.__cause__}",
                       errors=[{"field": "body", "message": "malformed JSON"}])
    if isinstance(exc, StarletteHTTPException):
        return problem(exc.status_code, _http_slug(exc.status_code), str(exc.detail),
                       str(exc.detail), headers=dict(exc.headers or {}))
    for cls, kind in _DOMAIN:
        if isinstance(exc, cls):
            return problem(kind.status, kind.slug, kind.title, str(exc) or kind.title,
                           **_domain_extra(exc))
    log.exception("unhandled error in the API", exc_info=exc)
    return problem(500, "internal", "Internal error", "the server failed; see its log")


def _domain_extra(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, QuotaExceeded):
        return {"errors": [{"field": exc.field, "message": str(exc)}], "quota": exc.quota,
                "limit": exc.limit}
    if isinstance(exc, UrgentNotAllowed):
        return {"errors": [{"field": exc.field, "message": str(exc)}], "quota": exc.quota}
    if isinstance(exc, InvalidJob):
        return {"errors": [{"field": field or "body", "message": message}
                           for field, message in exc.problems]}
    if isinstance(exc, InvalidSchedule | InvalidToken | InvalidOverlap):
        return {"errors": [{"field": exc.field or "body", "message": str(exc)}]}
    if isinstance(exc, InvalidCalendar | InvalidChannel):
        return {"errors": [{"field": exc.field, "message": str(exc)}]}
    if isinstance(exc, CalendarInUse):
        return {"job_ids": exc.job_ids}
    if isinstance(exc, KeyConflict):
        return {"key": exc.key}
    if isinstance(exc, RunNotRetryable):
        return {"run_status": exc.status}
    if isinstance(exc, VersionMismatch):
        return {"current_version": exc.current}
    return {}


def _request_validation(exc: RequestValidationError) -> JSONResponse:
    errors = [{"field": _field(error), "message": str(error.get("msg", "invalid"))}
              for error in exc.errors()]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
    return problem(422, "validation", "Invalid request", detail, errors=errors)


def _field(error: dict[str, Any]) -> str:
    """("query", "limit") -> "limit"; ("body", "run_ids", 0) -> "run_ids.0"; a body that
    is not JSON at all -> "body"."""
    loc = [str(part) for part in error.get("loc", ())]
    if error.get("type") == "json_invalid" or loc == ["body"]:
        return "body"
    if loc and loc[0] in ("body", "query", "path", "header"):
        return ".".join(loc[1:])
    return ".".join(loc)


def _http_slug(status: int) -> str:
    return {404: "not-found", 405: "method-not-allowed"}.get(status, f"http-{status}")


def api_routes(app: FastAPI) -> Iterator[tuple[str, set[str], APIRoute]]:
    """(path, methods, route) of every API route, included routers flattened."""
    # A recent FastAPI keeps included routers whole (iter_route_contexts flattens them); an
    # older one has the routes themselves in app.routes.
    contexts: Callable[[list[Any]], Iterator[Any]] | None = \
        getattr(routing, "iter_route_contexts", None)
    for item in contexts(app.routes) if contexts else app.routes:
        route = getattr(item, "original_route", item)
        if isinstance(route, APIRoute):
            yield (getattr(item, "path_format", route.path_format),
                   set(getattr(item, "methods", None) or ()), route)


def _allow(app: FastAPI, path: str) -> str:
    """The methods every route of ``path`` answers (a 405's Allow lists them all, not only
    those of the first route that matched the path)."""
    methods: set[str] = set()
    for template, answered, _ in api_routes(app):
        if compile_path(template)[0].match(path):
            methods |= answered
    return ", ".join(sorted(methods))


def install(app: FastAPI) -> None:
    """Route every error through ``problem_for``."""

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, StarletteHTTPException) and exc.status_code == 405:
            allow = _allow(request.app, request.url.path)
            if allow:
                exc.headers = {**(exc.headers or {}), "Allow": allow}
        return problem_for(exc)

    for cls in (ApiError, RequestValidationError, StarletteHTTPException, CrondepotError,
                psycopg.OperationalError, Exception):
        app.add_exception_handler(cls, handle)
