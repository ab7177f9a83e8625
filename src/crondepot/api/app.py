"""The API's app factory: the pool, the limits, the routes and the error mapping in one place.

``create_app(url)`` returns a FastAPI app whose lifespan opens a psycopg connection pool (and
closes it). Endpoints are plain functions: FastAPI runs them in its thread pool, each with a
pooled autocommit connection, so a request's transaction is exactly the ``with
conn.transaction()`` of the store function it calls.

``create_app(url, pooled_url=…)`` puts the request pool behind a transaction-mode pooler
(PgBouncer): each request's work is then one transaction, the tenant and actor are set for
it only, and the store functions' transactions are savepoints of it (db/connect.py,
tenancy/scope.py). ``url`` stays the direct one: it is checked at start, not used by
requests.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from fastapi import Depends, FastAPI

from crondepot.api import console, docs, problems, scrape, throttle
from crondepot.api.body import text_params
from crondepot.api.intake import DEFAULT_BODY_TIMEOUT_SECONDS, Intake
from crondepot.api.limits import RequestBudget
from crondepot.api.openapi import finish, operation_id
from crondepot.api.routes import (
    apply,
    audit,
    backfill,
    bulk,
    calendars,
    deadletter,
    forecast,
    holds,
    imports,
    job_keys,
    jobs,
    ledger,
    notices,
    ratelimits,
    runs,
    service,
    tokens,
)
from crondepot.api.slots import DEFAULT_WAIT_SECONDS, DbSlots
from crondepot.db import connect, open_pool
from crondepot.db.connect import (
    POOLED_URL_ENV,
    URL_ENV,
    connect_request_pooled,
    refuse_all_tenants_role,
    refuse_transaction_pooler,
)
from crondepot.job.url import check_allow_list
from crondepot.runtime import logs

DESCRIPTION = """Cron at scale on PostgreSQL.

Every `/v1` route needs `Authorization: Bearer <token>` (on /docs: Authorize); a token
belongs to one tenant, and another tenant's jobs and runs answer 404. `read` tokens may only
GET. Errors are RFC 9457 `application/problem+json`; a validation error is 422 and names the
field in `errors`.

Bad input changes nothing and is never a 500. Limits on a job document (also each NDJSON
import line, where a bad line is reported by number and field and the others are stored):
bodies at most 64 KiB (imports 64 MiB, each line at most a body's 64 KiB), the payload
at most 16 KiB of compact JSON, arrays and objects nested at most 32 levels in any field
(the payload object is the first; the field named is the path to the first container too
deep, or the top-level member for text nested beyond what the parser reads, about 1,000
levels). No string (value or object key) may hold a NUL (`\\u0000`) or a lone UTF-16
surrogate (`\\ud800`): PostgreSQL cannot store them; nor may a query or path parameter
hold a NUL (`%00`).
"""


BODY_TIMEOUT_ENV = "CRONDEPOT_API_BODY_TIMEOUT"
POOL_WAIT_ENV = "CRONDEPOT_API_POOL_WAIT"
_FLOATS = ("rate_per_second", "body_timeout_seconds", "pool_wait_seconds")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiSettings:
    """Limits and pool size; ``from_env`` reads ``CRONDEPOT_API_*`` variables (seconds as
    plain numbers: ``crondepot api`` writes its duration options there in that form)."""

    rate_per_second: float = 50.0
    burst: int = 100
    json_body_bytes: int = 64 * 1024
    import_body_bytes: int = 64 * 1024 * 1024
    pool_min_size: int = 1
    pool_max_size: int = 10
    console_session_seconds: int = 8 * 3600   # a console login lasts this long at most
    body_timeout_seconds: float = DEFAULT_BODY_TIMEOUT_SECONDS   # the whole body, or 408
    pool_wait_seconds: float = DEFAULT_WAIT_SECONDS   # for a database slot, or 503

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ApiSettings:
        env = dict(os.environ) if env is None else env
        names = {"rate_per_second": "CRONDEPOT_API_RATE", "burst": "CRONDEPOT_API_BURST",
                 "json_body_bytes": "CRONDEPOT_API_JSON_BODY_BYTES",
                 "import_body_bytes": "CRONDEPOT_API_IMPORT_BODY_BYTES",
                 "pool_max_size": "CRONDEPOT_API_POOL_SIZE",
                 "console_session_seconds": "CRONDEPOT_CONSOLE_SESSION_SECONDS",
                 "body_timeout_seconds": BODY_TIMEOUT_ENV, "pool_wait_seconds": POOL_WAIT_ENV}
        values: dict[str, Any] = {}
        for name, variable in names.items():
            if env.get(variable):
                values[name] = float(env[variable]) if name in _FLOATS else int(env[variable])
        return cls(**values)

    def body_limit(self, path: str) -> int:
        return self.import_body_bytes if path == "/v1/import" else self.json_body_bytes

    def for_one_of(self, processes: int) -> ApiSettings:
        """The settings of one of ``processes`` API processes serving the same port: each
        keeps its own request budget in memory, so each gets its share of the rate and the
        burst, and the total stays what the operator set."""
        if processes <= 1:
            return self
        return replace(self, rate_per_second=self.rate_per_second / processes,
                       burst=max(1, self.burst // processes))


PROCESSES_ENV = "CRONDEPOT_API_PROCESSES"


def app_from_env() -> FastAPI:
    """The factory uvicorn calls in each process of ``crondepot api --workers N``: the
    database URL, the settings and the process count come from the environment."""
    logs.setup()
    url = os.environ[URL_ENV]
    processes = int(os.environ.get(PROCESSES_ENV, "1"))
    return create_app(url, ApiSettings.from_env().for_one_of(processes),
                      pooled_url=os.environ.get(POOLED_URL_ENV) or None,
                      metrics_access=scrape.MetricsAccess.from_env(),
                      auth_throttle=throttle.ThrottleSettings.from_env())


def create_app(database_url: str, settings: ApiSettings | None = None, *,
               pooled_url: str | None = None,
               metrics_access: scrape.MetricsAccess | None = None,
               auth_throttle: throttle.ThrottleSettings | None = None) -> FastAPI:
    """Raises ValueError for a ``CRONDEPOT_TARGET_ALLOWLIST`` that does not parse: every
    create with a webhook target would fail on it (the worker refuses to start on it too).
    ``pooled_url``: a transaction-mode pooler in front of ``database_url`` for the request
    pool (the module's docstring); ``metrics_access``: who may scrape /metrics and whether it
    names tenants (api/scrape.py); ``auth_throttle``: failed authentication per client
    address (api/throttle.py)."""
    config = settings or ApiSettings()
    check_allow_list()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The direct URL: never a role that sees every tenant, never a transaction pooler
        # (whose place is --pooled-db). Two connections, both open (the pool may hold one).
        with connect(database_url, application_name="crondepot-api-check") as conn, \
                connect(database_url, application_name="crondepot-api-check") as other:
            refuse_all_tenants_role(conn)
            refuse_transaction_pooler(conn, other)
        if pooled_url is not None:
            # Through the pooler the role's own defaults are all a connection starts with:
            # they must not show every tenant (the workers' pooled role does).
            with connect_request_pooled(pooled_url,
                                        application_name="crondepot-api-check") as conn:
                refuse_all_tenants_role(conn)
        with open_pool(pooled_url or database_url, min_size=config.pool_min_size,
                       max_size=config.pool_max_size, application_name="crondepot-api",
                       through_pooler=pooled_url is not None) as pool:
            app.state.pool = pool
            # At most one request per pooled connection holds or waits for one (slots.py).
            app.state.db_slots = DbSlots(pool, size=config.pool_max_size,
                                         wait_seconds=config.pool_wait_seconds,
                                         one_transaction=pooled_url is not None)
            yield

    app = FastAPI(title="crondepot", version="1", description=DESCRIPTION, lifespan=lifespan,
                  docs_url=None, redoc_url=None, generate_unique_id_function=operation_id)
    app.state.budget = RequestBudget(config.rate_per_second, config.burst)
    app.state.settings = config
    throttle.install(app, auth_throttle)
    # The body is read whole before any route runs, so no database slot waits on a client.
    app.add_middleware(Intake, limit_for=config.body_limit,
                       timeout_seconds=config.body_timeout_seconds)
    problems.install(app)
    for module in (job_keys, bulk, holds, jobs, backfill, runs, deadletter, imports, audit, ledger,
                   forecast, service,
                   ratelimits, calendars, tokens, apply, notices):
        app.include_router(module.router, dependencies=[Depends(text_params)])
    console.install(app)
    scrape.install(app, metrics_access or scrape.MetricsAccess())
    docs.install(app)
    _document(app)
    return app


def _document(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = finish(app, build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
