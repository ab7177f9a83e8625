"""Stats of the caller's tenant, and the process probes outside /v1."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from psycopg_pool import ConnectionPool

from crondepot.api.auth import Conn, Reader
from crondepot.api.models import Stats
from crondepot.api.openapi import problems
from crondepot.api.problems import problem
from crondepot.db.migrations import MigrationError, pending_names
from crondepot.runs.reads import stats

router = APIRouter(tags=["service"])


@router.get("/v1/stats", summary="Queue depth, start lag, dead-letter size",
            responses={200: {"model": Stats}, **problems(401, 429)})
def read_stats(who: Reader, conn: Conn) -> JSONResponse:
    return JSONResponse(stats(conn, who.tenant_id))


@router.get("/healthz", summary="The process is up")
def healthz() -> JSONResponse:
    return JSONResponse({"status": "ok"})


@router.get("/readyz", summary="The database answers and its schema is current",
            responses=problems(503))
def readyz(request: Request) -> JSONResponse:
    pool: ConnectionPool = request.app.state.pool
    try:
        with pool.connection(timeout=5) as conn:
            todo = pending_names(conn)
    except MigrationError as exc:
        return problem(503, "schema-not-current", "Database schema not current", str(exc))
    except Exception as exc:   # any failure to reach the database means "not ready"
        return problem(503, "database-unavailable", "Database unavailable",
                       f"{type(exc).__name__}: {str(exc).strip()[:200]}")
    if todo:
        return problem(503, "schema-not-current", "Database schema not current",
                       f"pending migrations: {', '.join(todo)}; run `crondepot migrate`")
    return JSONResponse({"status": "ready"})
