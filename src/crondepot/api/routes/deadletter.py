"""The dead letter of the caller's tenant: list it, replay from it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.models import DeadRunList, ReplayRequest, ReplayResult
from crondepot.api.openapi import problems
from crondepot.api.params import MAX_BIGINT, Instant, window
from crondepot.api.problems import Invalid
from crondepot.runs.deadletter import DeadFilter, dead_page, replay
from crondepot.runs.reads import encode_run_cursor, run_cursor_or_none
from crondepot.runs.render import dead_json

router = APIRouter(prefix="/v1/dead-letter", tags=["dead letter"])


@router.get("", summary="Dead runs, newest first (cursor pagination)",
            responses={200: {"model": DeadRunList}, **problems(401, 422, 429)})
def list_(who: Reader, conn: Conn,
          job_id: Annotated[int | None, Query(ge=1, le=MAX_BIGINT)] = None,
          error: Annotated[str | None, Query(min_length=1, max_length=500)] = None,
          since: Instant | None = None, until: Instant | None = None,
          cursor: Annotated[str | None, Query(max_length=400,
                                              description="next_cursor of the last page")
                            ] = None,
          limit: Annotated[int, Query(ge=1, le=10_000)] = 100) -> JSONResponse:
    window(since, until)
    after = run_cursor_or_none(cursor, lambda text: Invalid(
        f"expected cursor to be a next_cursor value, got {text[:40]!r}", field="cursor"))
    where = DeadFilter(tenant=who.tenant, job_id=job_id, error=error, since=since, until=until,
                       limit=limit, after=after)
    page, last = dead_page(conn, where)
    return JSONResponse({"items": [dead_json(r) for r in page],
                         "next_cursor": encode_run_cursor(*last) if last else None})


@router.post("/replay", summary="Queue dead runs again (same run ids)",
             responses={200: {"model": ReplayResult}, **problems(401, 403, 413, 422, 429)})
def replay_(who: Writer, conn: Conn, body: ReplayRequest) -> JSONResponse:
    if not any((body.run_ids, body.job_id, body.error, body.since, body.until)):
        raise Invalid("give at least one of run_ids, job_id, error, since, until",
                      field="run_ids")
    window(body.since, body.until)
    where = DeadFilter(tenant=who.tenant, job_id=body.job_id, run_ids=body.run_ids,
                       error=body.error, since=body.since, until=body.until, limit=body.limit)
    done = replay(conn, where, dry_run=body.dry_run, ignore_deadline=body.ignore_deadline)
    return JSONResponse({"dry_run": body.dry_run, "count": len(done.replayed),
                         "items": [dead_json(r) for r in done.replayed],
                         "past_deadline": len(done.past_deadline),
                         "past_deadline_run_ids": [r.run_id for r in done.past_deadline]})
