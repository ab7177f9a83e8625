"""A Python client of the crondepot HTTP API: ``Client`` (blocking) and ``AsyncClient``
(asyncio), over httpx. docs/client.md is the reference.

    with crondepot.Client("https://crondepot.bank.internal", token) as api:
        job = api.jobs.create({"key": "bank42:48213:emi", "cron": "0 9 5 * *",
                               "tz": "Asia/Kolkata", "target": {...}})
        for run in api.runs.iter(job_id=job["id"], status="failed"):
            ...

It imports nothing of the server (crondepot.base only): a user's process imports it.
"""

from __future__ import annotations

from crondepot.client import models
from crondepot.client._http import RetryPolicy
from crondepot.client.aio import AsyncClient
from crondepot.client.errors import (
    ApiError,
    BadRequest,
    BodiesFull,
    CalendarInUse,
    ClientError,
    Conflict,
    DatabaseUnavailable,
    FieldError,
    Forbidden,
    JobCancelled,
    KeyConflict,
    LimitNotOwned,
    MethodNotAllowed,
    NotFound,
    NotGranted,
    PayloadTooLarge,
    PoolStarved,
    PreconditionFailed,
    PreconditionRequired,
    QuotaExceeded,
    RateLimited,
    RequestTimeout,
    RunNotRetryable,
    RunPastDeadline,
    SchemaNotCurrent,
    ServerError,
    TokenConflict,
    TransportError,
    Unauthorized,
    Unavailable,
    UnsupportedMediaType,
    UrgentNotAllowed,
    ValidationError,
    VersionMismatch,
)
from crondepot.client.sync import Client

__all__ = [
    "ApiError", "AsyncClient", "BadRequest", "BodiesFull", "CalendarInUse", "Client",
    "ClientError", "Conflict", "DatabaseUnavailable", "FieldError", "Forbidden", "JobCancelled",
    "KeyConflict", "LimitNotOwned", "MethodNotAllowed", "NotFound", "NotGranted",
    "PayloadTooLarge", "PoolStarved", "PreconditionFailed", "PreconditionRequired",
    "QuotaExceeded", "RateLimited", "RequestTimeout", "RetryPolicy", "RunNotRetryable",
    "RunPastDeadline", "SchemaNotCurrent", "ServerError", "TokenConflict", "TransportError",
    "Unauthorized", "Unavailable", "UnsupportedMediaType", "UrgentNotAllowed", "ValidationError",
    "VersionMismatch", "models",
]
