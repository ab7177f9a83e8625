"""Runs: the runs of a job (newest first) and one run by id."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader
from crondepot.api.openapi import problems
from crondepot.api.problems import Invalid
from crondepot.api.reads import decode_run_cursor, encode_run_cursor, get_run, job_runs
from crondepot.api.render import run_json
from crondepot.api.routes.jobs import known_job_id
from crondepot.api.schemas import Run, RunPage
from crondepot.job.store import get_job

router = APIRouter(prefix="/v1", tags=["runs"])


@router.get("/jobs/{job_id}/runs", summary="A job's runs, newest first",
            responses={200: {"model": RunPage}, **problems(401, 404, 422, 429)})
def list_runs(who: Reader, conn: Conn, job_id: int,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100,
              cursor: Annotated[str | None, Query(max_length=400)] = None) -> JSONResponse:
    before = _decode(cursor)
    job = get_job(conn, who.tenant_id, known_job_id(job_id))     # 404 for another tenant's job
    rows = job_runs(conn, who.tenant_id, job.id, before=before, limit=limit + 1)
    page = rows[:limit]
    next_cursor = encode_run_cursor(page[-1]["nominal_at"], page[-1]["run_id"]) \
        if len(rows) > limit else None
    return JSONResponse({"items": [run_json(r) for r in page], "next_cursor": next_cursor})


@router.get("/runs/{run_id}", summary="One run",
            responses={200: {"model": Run}, **problems(401, 404, 429)})
def read_run(who: Reader, conn: Conn, run_id: str) -> JSONResponse:
    return JSONResponse(run_json(get_run(conn, who.tenant_id, run_id)))


def _decode(cursor: str | None) -> tuple[datetime, str] | None:
    if cursor is None:
        return None
    try:
        return decode_run_cursor(cursor)
    except ValueError:
        raise Invalid("expected cursor to be a next_cursor value", field="cursor") from None
