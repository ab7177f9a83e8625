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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from fastapi import FastAPI, Request, Response
from psycopg_pool import ConnectionPool

from crondepot.api import throttle
from crondepot.api.problems import Unauthorized
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
    """Add ``GET /metrics``. The database gauges borrow a connection from the pool the app's
    lifespan opens, at scrape time."""
    app.state.metrics_access = access
    app.state.metrics = metrics.database_registry(lambda: _every_tenant(app.state.pool),
                                                  tenant_labels=access.tenant_labels)
    app.add_api_route("/metrics", _scrape, methods=["GET"], include_in_schema=False)


@contextmanager
def _every_tenant(pool: ConnectionPool) -> Iterator[psycopg.Connection[Any]]:
    """A pooled connection that sees every tenant's rows: the gauges count across tenants
    by design (row-level security shows a pooled connection none until told; the pool's
    reset forgets this when it goes back)."""
    with pool.connection() as conn:
        scope.see_all(conn)
        yield conn


def _scrape(request: Request) -> Response:
    """Prometheus scrape: this process's metrics and the database-derived gauges."""
    access: MetricsAccess = request.app.state.metrics_access
    if access.token is not None:
        _check(request, access.token)
    body, content_type = metrics.exposition(request.app.state.metrics)
    return Response(body, media_type=content_type)


def _check(request: Request, token: str) -> None:
    throttle.refuse_if_throttled(request)
    header = request.headers.get("authorization")
    if not metrics.token_matches(header, token):
        if header:                      # a credential sent and wrong: a failure to count
            throttle.count_failure(request)
        raise Unauthorized("/metrics needs Authorization: Bearer <the metrics token>",
                           headers={"WWW-Authenticate": 'Bearer realm="metrics"'})
