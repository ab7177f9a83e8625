"""The API's ``/metrics``: this process's metrics and the gauges read from the database.

Who may scrape and what it says are the operator's choice (``MetricsAccess``):

- ``token``: with one (``crondepot api --metrics-token``, env ``CRONDEPOT_METRICS_TOKEN``),
  a scrape must send ``Authorization: Bearer <token>`` (compared in constant time) or gets
  401. It is not a tenant's token: a tenant's token cannot scrape, and this one reaches
  nothing under ``/v1``. A wrong one is a failed authentication of the client address like
  a bad bearer token (api/throttle.py). Without one ``/metrics`` is open to whoever reaches
  the port.
- ``tenant_labels``: tenant names are labels of the per-tenant gauges only when asked
  (``--metrics-tenant-labels``, env ``CRONDEPOT_METRICS_TENANT_LABELS=1``); otherwise each
  is one sum over the tenants.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import psycopg
from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool

from crondepot.api import throttle
from crondepot.api.problems import PoolStarved, Unauthorized
from crondepot.api.slots import DbSlots
from crondepot.runtime import metrics
from crondepot.tenancy import scope

TOKEN_ENV = "CRONDEPOT_METRICS_TOKEN"
TENANT_LABELS_ENV = "CRONDEPOT_METRICS_TENANT_LABELS"


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsAccess:
    token: str | None = None
    tenant_labels: bool = False

    def __post_init__(self) -> None:
        if self.token is not None and not self.token.strip():
            raise ValueError("the metrics token is empty")

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> MetricsAccess:
        env = dict(os.environ) if env is None else env
        return cls(token=env.get(TOKEN_ENV) or None,
                   tenant_labels=flag(env.get(TENANT_LABELS_ENV, "")))

    def env(self) -> dict[str, str]:
        """The variables ``from_env`` reads back to these settings (for the processes of
        ``crondepot api --workers N``)."""
        return {TOKEN_ENV: self.token or "", TENANT_LABELS_ENV: "1" if self.tenant_labels
                else ""}


def flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def install(app: FastAPI, access: MetricsAccess) -> None:
    """Add ``GET /metrics``. The database gauges read a connection taken, at scrape time,
    like a request's (api/slots.py)."""
    app.state.metrics_access = access
    app.add_api_route("/metrics", _scrape, methods=["GET"], include_in_schema=False)


async def _scrape(request: Request) -> Response:
    """Prometheus scrape: this process's metrics and the database-derived gauges; only the
    former while no database connection is free (``crondepot_api_refused_total`` says so,
    and a starved pool is when it matters)."""
    access: MetricsAccess = request.app.state.metrics_access
    if access.token is not None:
        _check(request, access.token)
    slots: DbSlots = request.app.state.db_slots
    try:
        async with slots.connection() as conn:
            body, content_type = await run_in_threadpool(
                _exposition_across_tenants, conn, access.tenant_labels)
    except PoolStarved:
        body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


def _exposition_across_tenants(conn: psycopg.Connection[Any],
                               tenant_labels: bool) -> tuple[bytes, str]:
    """The exposition with the database gauges, read on ``conn`` across every tenant: they
    count across tenants by design (row-level security shows a pooled connection no row
    until told; the pool's reset forgets this when it goes back)."""
    scope.see_all(conn)
    database = metrics.database_registry(lambda: nullcontext(conn),
                                         tenant_labels=tenant_labels)
    return metrics.exposition(database)


def _check(request: Request, token: str) -> None:
    throttle.refuse_if_throttled(request)
    header = request.headers.get("authorization")
    if not metrics.token_matches(header, token):
        if header:                      # a credential sent and wrong: a failure to count
            throttle.count_failure(request)
        raise Unauthorized("/metrics needs Authorization: Bearer <the metrics token>",
                           headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
