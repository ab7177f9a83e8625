"""Runs: the runs of a job (newest first), runs across jobs, one run by id, and retrying a
failed or dead run."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Body, Query
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.models import (
    ListedRunPage,
    RetryRequest,
    RetryResult,
    RunDetail,
    RunPage,
    StorableText,
)
from crondepot.api.openapi import problems
from crondepot.api.params import MAX_BIGINT, Instant, window
from crondepot.api.problems import Invalid
from crondepot.api.routes.jobs import known_job_id
from crondepot.job.store import get_job
from crondepot.runs.attempts import run_attempts, run_worker
from crondepot.runs.deadletter import retry
from crondepot.runs.reads import (
    RUN_STATES,
    RunFilter,
    encode_run_cursor,
    get_run,
    job_runs,
    run_cursor_or_none,
    runs_page,
)
from crondepot.runs.render import run_json

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


@router.get("/runs", summary="The tenant's runs across jobs, newest first",
            description="Ordered by ended_at (finished_at; due_at for a run not ended yet), "
                        "newest first; since/until bound ended_at (since inclusive). Page "
                        "with next_cursor.",
            responses={200: {"model": ListedRunPage}, **problems(401, 422, 429)})
def list_all_runs(
        who: Reader, conn: Conn,
        status: Annotated[str | None, Query(description="one of " + ", ".join(RUN_STATES),
                                            json_schema_extra={"enum": list(RUN_STATES)})]
        = None,
        job_id: Annotated[int | None, Query(ge=1, le=MAX_BIGINT)] = None,
        error: Annotated[StorableText | None, Query(
            min_length=1, max_length=500,
            description="error class, or a part of the error message")] = None,
        since: Instant | None = None, until: Instant | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cursor: Annotated[str | None, Query(max_length=400)] = None) -> JSONResponse:
    if status is not None and status not in RUN_STATES:
        raise Invalid(f"expected status to be one of {', '.join(RUN_STATES)}",
                      field="status")
    window(since, until)
    before = _decode(cursor)
    where = RunFilter(status=status, job_id=job_id, error=error, since=since, until=until)
    page, next_cursor = runs_page(conn, who.tenant_id, where, before=before, limit=limit)
    return JSONResponse({"items": [run_json(r) for r in page], "next_cursor": next_cursor})


@router.get("/runs/{run_id}", summary="One run, with its attempts",
            description="attempts: every call of the run, oldest first (start, end, "
                        "outcome, error, worker); worker: who made the latest one.",
            responses={200: {"model": RunDetail}, **problems(401, 404, 429)})
def read_run(who: Reader, conn: Conn, run_id: str) -> JSONResponse:
    row = get_run(conn, who.tenant_id, run_id)
    attempts = run_attempts(conn, row)
    return JSONResponse(run_json(row) | {
        "worker": run_worker(conn, run_id),
        "attempts": [run_json(a) for a in attempts]})


@router.post("/runs/{run_id}/retry", summary="Queue a failed or dead run again (same run id)",
             description="The dead-letter replay for one run that failed (a permanent error) "
                         "or is dead: same run id, fresh attempt budget. A run in another "
                         "state is a 409 (run-not-retryable), as is one past its misfire "
                         "deadline unless ignore_deadline (run-past-deadline).",
             responses={200: {"model": RetryResult}, **problems(401, 403, 404, 409, 422, 429)})
def retry_run(who: Writer, conn: Conn, run_id: str,
              body: Annotated[RetryRequest | None, Body(openapi_examples={
                  "default": {"summary": "retry (no body is the same)", "value": {}},
                  "past_deadline": {"summary": "also past its misfire deadline",
                                    "value": {"ignore_deadline": True}}})] = None
              ) -> JSONResponse:
    request = body or RetryRequest(ignore_deadline=False)
    done = retry(conn, who.tenant_id, run_id, ignore_deadline=request.ignore_deadline)
    return JSONResponse({"run_id": run_id, "previous_status": done.previous_status,
                         "run": run_json(get_run(conn, who.tenant_id, run_id))})


def _decode(cursor: str | None) -> tuple[datetime, str] | None:
    return run_cursor_or_none(cursor, lambda _: Invalid(
        "expected cursor to be a next_cursor value", field="cursor"))
