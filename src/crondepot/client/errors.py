"""What the client raises: an RFC 9457 problem as a typed exception, or no answer at all.

    ClientError (a CrondepotError)
    ├── TransportError              no HTTP answer: refused, reset, timed out
    └── ApiError                    the API answered a problem document (``.problem``)
        ├── BadRequest        400
        ├── Unauthorized      401   no token, or an unknown or revoked one
        ├── Forbidden         403   a read token asked for a change
        │   ├── UrgentNotAllowed    the tenant may not use priority urgent
        │   └── LimitNotOwned       a shared rate limit is the operator's
        ├── NotFound          404   unknown id, or another tenant's (never said which)
        ├── MethodNotAllowed  405
        ├── RequestTimeout    408   the body did not arrive whole in time
        ├── Conflict          409
        │   ├── KeyConflict         the key is used by another document (``.key``)
        │   ├── JobCancelled
        │   ├── RunNotRetryable     (``.run_status``)
        │   ├── RunPastDeadline
        │   ├── TokenConflict       the tenant's last admin token
        │   └── CalendarInUse       live jobs name the calendar (``.job_ids``: some of them)
        ├── PreconditionFailed 412
        │   └── VersionMismatch     the job changed since it was read (``.current_version``)
        ├── PayloadTooLarge   413
        ├── UnsupportedMediaType 415
        ├── ValidationError   422   ``.errors``: every (field, message[, line]) at fault
        │   ├── QuotaExceeded       (``.quota``, ``.limit``)
        │   └── NotGranted          a handler or rate limit the tenant was not granted
        ├── PreconditionRequired 428
        ├── RateLimited       429   ``.retry_after`` seconds
        ├── ServerError       5xx
        │   └── Unavailable   503   ``.retry_after`` seconds when the server gave one
        │       ├── PoolStarved, BodiesFull        refused before the route ran
        │       └── DatabaseUnavailable, SchemaNotCurrent

The class is chosen by the problem's ``type`` slug (``https://crondepot.dev/problems/<slug>``,
the table in ``crondepot.api.problems``), falling back to the status. This module imports
nothing of the server: it is what a user's process imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crondepot.base.errors import CrondepotError

PROBLEM_BASE = "https://crondepot.dev/problems/"


class ClientError(CrondepotError):
    """The root of what the client raises."""


class TransportError(ClientError):
    """No HTTP answer (connection refused or reset, timeout), after the retries allowed.
    ``sent`` is False when the request surely never reached the server (it could not
    connect), so nothing changed."""

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.sent = sent


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem of a request: the field at fault (a JSON path, a parameter or a
    header), what is wrong with it, and the NDJSON line for an import."""

    field: str
    message: str
    line: int | None = None


class ApiError(ClientError):
    """A problem document the API answered. ``problem`` is the whole document (extension
    members included), ``headers`` the response's headers."""

    status = 0
    slug = ""

    def __init__(self, problem: dict[str, Any], *, status: int,
                 headers: dict[str, str] | None = None) -> None:
        self.problem = problem
        self.status = status
        self.headers = headers or {}
        self.type: str = str(problem.get("type", "about:blank"))
        self.slug = self.type.removeprefix(PROBLEM_BASE)
        self.title: str = str(problem.get("title", ""))
        self.detail: str = str(problem.get("detail", self.title))
        self.errors: list[FieldError] = [
            FieldError(str(e.get("field", "body")), str(e.get("message", "")),
                       e.get("line") if isinstance(e.get("line"), int) else None)
            for e in problem.get("errors") or () if isinstance(e, dict)]
        super().__init__(f"{status} {self.slug}: {self.detail}")


class BadRequest(ApiError):
    pass


class Unauthorized(ApiError):
    pass


class Forbidden(ApiError):
    pass


class UrgentNotAllowed(Forbidden):
    pass


class LimitNotOwned(Forbidden):
    pass


class NotFound(ApiError):
    pass


class MethodNotAllowed(ApiError):
    pass


class RequestTimeout(ApiError):
    pass


class Conflict(ApiError):
    pass


class KeyConflict(Conflict):
    @property
    def key(self) -> str | None:
        return self.problem.get("key")


class JobCancelled(Conflict):
    pass


class RunNotRetryable(Conflict):
    @property
    def run_status(self) -> str | None:
        return self.problem.get("run_status")


class RunPastDeadline(Conflict):
    pass


class TokenConflict(Conflict):
    pass


class CalendarInUse(Conflict):
    """A calendar live jobs name cannot be deleted: change or cancel them first."""

    @property
    def job_ids(self) -> list[int]:
        return list(self.problem.get("job_ids") or ())


class PreconditionFailed(ApiError):
    pass


class VersionMismatch(PreconditionFailed):
    @property
    def current_version(self) -> int | None:
        return self.problem.get("current_version")


class PayloadTooLarge(ApiError):
    pass


class UnsupportedMediaType(ApiError):
    pass


class ValidationError(ApiError):
    """422: ``errors`` lists every field at fault (every bad line, for an import)."""


class QuotaExceeded(ValidationError):
    @property
    def quota(self) -> str | None:
        return self.problem.get("quota")

    @property
    def limit(self) -> int | None:
        return self.problem.get("limit")


class NotGranted(ValidationError):
    pass


class PreconditionRequired(ApiError):
    pass


def _retry_after(headers: dict[str, str]) -> float | None:
    """Retry-After in seconds (the API sends whole seconds; an HTTP date is not used)."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


class RateLimited(ApiError):
    """429: the token's request budget (or the client address's failed logins) is spent;
    ``retry_after`` says in how many seconds to ask again."""

    @property
    def retry_after(self) -> float | None:
        return _retry_after(self.headers)


class ServerError(ApiError):
    pass


class Unavailable(ServerError):
    """503; ``retry_after`` is set for the refusals that say when to come back."""

    @property
    def retry_after(self) -> float | None:
        return _retry_after(self.headers)


class PoolStarved(Unavailable):
    pass


class BodiesFull(Unavailable):
    pass


class DatabaseUnavailable(Unavailable):
    pass


class SchemaNotCurrent(Unavailable):
    pass


# Every problem type the API answers (crondepot.api.problems), by slug; a test holds this
# table to the server's.
BY_SLUG: dict[str, type[ApiError]] = {
    "bad-request": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "urgent-not-allowed": UrgentNotAllowed,
    "limit-not-owned": LimitNotOwned,
    "not-found": NotFound,
    "method-not-allowed": MethodNotAllowed,
    "request-timeout": RequestTimeout,
    "key-conflict": KeyConflict,
    "job-cancelled": JobCancelled,
    "run-not-retryable": RunNotRetryable,
    "run-past-deadline": RunPastDeadline,
    "token-conflict": TokenConflict,
    "calendar-in-use": CalendarInUse,
    "version-mismatch": VersionMismatch,
    "payload-too-large": PayloadTooLarge,
    "unsupported-media-type": UnsupportedMediaType,
    "validation": ValidationError,
    "quota-exceeded": QuotaExceeded,
    "not-granted": NotGranted,
    "precondition-required": PreconditionRequired,
    "rate-limited": RateLimited,
    "pool-starved": PoolStarved,
    "bodies-full": BodiesFull,
    "database-unavailable": DatabaseUnavailable,
    "schema-not-current": SchemaNotCurrent,
    "internal": ServerError,
}

# A slug the client does not know (a newer server) still gets the class of its status.
BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    408: RequestTimeout, 409: Conflict, 412: PreconditionFailed, 413: PayloadTooLarge,
    415: UnsupportedMediaType, 422: ValidationError, 428: PreconditionRequired,
    429: RateLimited, 503: Unavailable,
}


def error_for(status: int, problem: dict[str, Any], headers: dict[str, str]) -> ApiError:
    """The exception for an error answer: by the problem's slug, else by its status."""
    slug = str(problem.get("type", "")).removeprefix(PROBLEM_BASE)
    cls = BY_SLUG.get(slug) or BY_STATUS.get(status) or \
        (ServerError if status >= 500 else ApiError)
    return cls(problem, status=status, headers=headers)
