"""Stats of the caller's tenant, and the process probes outside /v1."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader
from crondepot.api.models import Health, Stats
from crondepot.api.openapi import problems
from crondepot.api.problems import PoolStarved, problem
from crondepot.api.slots import DbSlots
from crondepot.base.version import __version__
from crondepot.db.migrations import MigrationError, pending_names, schema_revision
from crondepot.runs.reads import stats

router = APIRouter(tags=["service"])


@router.get("/v1/stats", summary="Queue depth, start lag, dead-letter size",
            responses={200: {"model": Stats}, **problems(401, 429)})
def read_stats(who: Reader, conn: Conn) -> JSONResponse:
    return JSONResponse(stats(conn, who.tenant_id))


# Read once: the files of the release this process runs do not change under it.
_HEALTH = {"status": "ok", "version": __version__, "schema_revision": schema_revision()}


@router.get("/healthz", summary="The process is up, its release and schema revision",
            responses={200: {"model": Health}})
def healthz() -> JSONResponse:
    # No database: a liveness probe must not fail (and restart every API process) because
    # the database is away; /readyz asks the database.
    return JSONResponse(_HEALTH)


# A probe must answer fast (Kubernetes gives it 1 s by default): it waits this long for a
# database slot, then says the pool is starved.
READY_WAIT_SECONDS = 0.5


@router.get("/readyz", summary="A database connection is free, the database answers and its "
                               "schema is current", responses=problems(503))
async def readyz(request: Request) -> JSONResponse:
    slots: DbSlots = request.app.state.db_slots
    try:
        async with slots.connection(wait=READY_WAIT_SECONDS, connect=5) as conn:
            todo = await run_in_threadpool(pending_names, conn)
    except PoolStarved as exc:
        return problem(503, exc.slug, exc.title, exc.detail, headers=exc.headers)
    except MigrationError as exc:
        return problem(503, "schema-not-current", "Database schema not current", str(exc))
    except Exception as exc:   # any failure to reach the database means "not ready"
        return problem(503, "database-unavailable", "Database unavailable",
                       f"{type(exc).__name__}: {str(exc).strip()[:200]}")
    if todo:
        return problem(503, "schema-not-current", "Database schema not current",
                       f"pending migrations: {', '.join(todo)}; run `crondepot migrate`")
    return JSONResponse({"status": "ready"})
