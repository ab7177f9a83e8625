"""Jobs: create (idempotent on key), read, list, patch, pause, resume, trigger, cancel."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Query, Response
from fastapi import Body as BodyOf
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.body import json_body
from crondepot.api.models import (
    BILL_DUE_ONCE,
    BILL_TO_REDIS_STREAM,
    BRANCH_HOURS_REMINDER,
    EMI_REMINDER,
    EMI_SMS_IN_HOURS,
    EMI_TO_RABBITMQ,
    EMI_TWELVE_MONTH_ENDS,
    NIGHTLY_RECONCILIATION,
    PAYMENT_RECHECK_EVERY_4H,
    PYTHON_JOB,
    RENEWAL_TO_NATS,
    Job,
    JobDocument,
    JobPage,
    JobPatch,
    JobWithHealth,
    PauseRequest,
    TriggerResult,
)
from crondepot.api.openapi import etag, job_links, link, location, problems, request_body
from crondepot.api.params import MAX_BIGINT, ascii_digits, bigint
from crondepot.api.problems import Invalid, PreconditionRequired
from crondepot.base.vocab import Priority
from crondepot.job import fields as F
from crondepot.job.bulk import parse_label
from crondepot.job.health import job_health, list_unhealthy_jobs
from crondepot.job.spec import JobSpec
from crondepot.job.store import (
    JobFilter,
    StoredJob,
    cancel_job,
    create_job,
    get_job,
    list_jobs,
    pause_job,
    resume_job,
    trigger_job,
    update_job,
)
from crondepot.runs.reads import get_run
from crondepot.runs.render import job_json, run_json

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
LABEL_FILTER = f"^(?:{F.LABEL_KEY.pattern})=(?:{F.LABEL_VALUE.pattern})$"
Body = Annotated[Any, Depends(json_body)]
MAX_JOB_ID = MAX_BIGINT


def _job_response(job: StoredJob, status: int = 200) -> JSONResponse:
    new = {"Location": f"/v1/jobs/{job.id}"} if status == 201 else {}
    return JSONResponse(job_json(job), status_code=status,
                        headers={"ETag": f'"{job.version}"', **new})


@router.post("", summary="Create a job (idempotent on key)", status_code=201,
             responses={200: {"model": Job, "description": "the key existed with this "
                                                           "document: the stored job",
                              "headers": etag(), "links": job_links("$response.body#")},
                        201: {"model": Job, "description": "created",
                              "headers": {**location("/v1/jobs/{id}"), **etag()},
                              "links": job_links("$response.body#")},
                        **problems(401, 403, 409, 413, 415, 422, 429)},
             openapi_extra=request_body(JobDocument, {"emi_reminder": EMI_REMINDER,
                                                      "python_handler": PYTHON_JOB,
                                                      "bill_due_once": BILL_DUE_ONCE,
                                                      "emi_twelve_month_ends":
                                                          EMI_TWELVE_MONTH_ENDS,
                                                      "payment_recheck_every_4h":
                                                          PAYMENT_RECHECK_EVERY_4H,
                                                      "weekdays_and_saturdays":
                                                          BRANCH_HOURS_REMINDER,
                                                      "emi_sms_in_hours": EMI_SMS_IN_HOURS,
                                                      "nightly_reconciliation_no_overlap":
                                                          NIGHTLY_RECONCILIATION,
                                                      "renewal_to_nats": RENEWAL_TO_NATS,
                                                      "emi_to_rabbitmq": EMI_TO_RABBITMQ,
                                                      "bill_to_redis_stream":
                                                          BILL_TO_REDIS_STREAM}))
def create(who: Writer, conn: Conn, doc: Body) -> JSONResponse:
    spec = JobSpec.from_document(doc)
    job, created = create_job(conn, who.tenant_id, spec)
    return _job_response(job, 201 if created else 200)


@router.get("", summary="List jobs (cursor pagination by id)",
            responses={200: {"model": JobPage,
                             "links": job_links("$response.body#/items/0", etag=False)},
                       **problems(401, 422, 429)})
def list_(who: Reader, conn: Conn,
          limit: Annotated[int, Query(ge=1, le=1000)] = 100,
          cursor: Annotated[str | None, Query(max_length=20,
                                              description="next_cursor of the last page")] = None,
          priority: Annotated[Priority | None, Query()] = None,
          paused: bool | None = None, active: bool | None = None,
          key_prefix: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
          unhealthy: Annotated[bool | None, Query(
              description="true: only jobs whose latest failed fires in a row reached "
                          "their alert threshold (see the job's health)")] = None,
          label: Annotated[list[str] | None, Query(
              max_length=16, description="key=value: jobs with this label (repeat: all of "
                                         "them)", examples=["bank=42"],
              json_schema_extra={"items": {"type": "string", "pattern": LABEL_FILTER}})
          ] = None,
          ) -> JSONResponse:
    after = _cursor(cursor)
    labels: dict[str, str] = {}
    for key, value in map(parse_label, label or ()):
        if labels.setdefault(key, value) != value:       # bank=42 and bank=7: no job has both
            return JSONResponse({"items": [], "next_cursor": None})
    where = JobFilter(priority=priority, paused=paused, active=active, key_prefix=key_prefix,
                      labels=labels or None)
    jobs = list_unhealthy_jobs(conn, who.tenant_id, where, after=after, limit=limit + 1) \
        if unhealthy else list_jobs(conn, who.tenant_id, where, after=after, limit=limit + 1)
    page = jobs[:limit]
    next_cursor = str(page[-1].id) if len(jobs) > limit else None
    return JSONResponse({"items": [job_json(j) for j in page], "next_cursor": next_cursor})


@router.get("/{job_id}", summary="Get a job, with its health",
            responses={200: {"model": JobWithHealth, "headers": etag(),
                             "links": job_links("$response.body#")},
                       **problems(401, 404, 429)})
def read(who: Reader, conn: Conn, job_id: int) -> JSONResponse:
    job = get_job(conn, who.tenant_id, known_job_id(job_id))
    health = job_health(conn, who.tenant_id, job.id)
    assert health is not None        # the job was just read
    return JSONResponse(job_json(job) | {"health": health.document()},
                        headers={"ETag": f'"{job.version}"'})


@router.patch("/{job_id}", summary="Change a job (If-Match: its version)",
              responses={200: {"model": Job, "headers": etag()},
                         **problems(401, 403, 404, 409, 412, 413, 415, 422, 428, 429)},
              openapi_extra=request_body(JobPatch, {
                  "move_to_10am": {"cron": "0 10 5 * *",
                                   "misfire": {"policy": "skip_after", "seconds": 3600}},
                  # the whole curve is replaced: members left out take their defaults
                  "gentler_retries": {"retry": {"max_attempts": 8, "base_s": 120,
                                                "cap_s": 3600}},
                  # the tenant's calendar (PUT /v1/calendars/in-bank-holidays) must exist
                  "day_before_bank_holidays": {"calendar": {
                      "exclude": "in-bank-holidays", "on_excluded": "previous_business_day",
                      "business_days": "mon-fri"}},
                  # "none": no window, not even the tenant's default; null: the default
                  "sms_hours_only": {"delivery_window": {"from": "09:00", "to": "21:00",
                                                         "days": "mon-sat"}},
                  # a fire that comes while the previous run still runs waits for it
                  "wait_for_the_previous_run": {"overlap": "buffer_one"}},
                  media_type="application/merge-patch+json"))
def patch(who: Writer, conn: Conn, job_id: int, doc: Body,
          if_match: Annotated[str | None, Header(description="the job's version, from its "
                                                             "ETag or `version`")] = None,
          ) -> JSONResponse:
    version = if_match_version(if_match)
    if not isinstance(doc, dict):
        raise Invalid(f"expected a JSON object of fields to change, got {type(doc).__name__}",
                      field="body")
    return _job_response(update_job(conn, who.tenant_id, known_job_id(job_id), doc,
                                    version=version))


@router.post("/{job_id}/pause", summary="Pause a job, saying why",
             responses={200: {"model": Job, "headers": etag()},
                        **problems(401, 403, 404, 409, 422, 429)})
def pause(who: Writer, conn: Conn, job_id: int,
          body: Annotated[PauseRequest | None, BodyOf(openapi_examples={
              "with a note": {"value": {"note": "SMS gateway migration until Monday 09:00"}},
              "without": {"value": {}}})] = None) -> JSONResponse:
    """The job's pause keeps the note, when and who (its ``pause`` field) until the resume;
    pausing a paused job changes nothing, its note included."""
    note = body.note if body is not None else None
    return _job_response(pause_job(conn, who.tenant_id, known_job_id(job_id), note=note))


@router.post("/{job_id}/resume", summary="Resume a job from now",
             responses={200: {"model": Job, "headers": etag()},
                        **problems(401, 403, 404, 409, 429)})
def resume(who: Writer, conn: Conn, job_id: int) -> JSONResponse:
    return _job_response(resume_job(conn, who.tenant_id, known_job_id(job_id)))


@router.post("/{job_id}/trigger", summary="Queue one run now", status_code=201,
             responses={201: {"model": TriggerResult, "description": "queued",
                              "headers": location("/v1/runs/{run_id}"),
                              "links": link("GetRun", "runs_read_run",
                                            run_id="$response.body#/run_id")},
                        200: {"model": TriggerResult,
                              "description": "a run with this id (same second) existed"},
                        **problems(401, 403, 404, 409, 429)})
def trigger(who: Writer, conn: Conn, job_id: int) -> JSONResponse:
    done = trigger_job(conn, who.tenant_id, known_job_id(job_id))
    run = get_run(conn, who.tenant_id, done.run_id)
    new = {"Location": f"/v1/runs/{quote(done.run_id, safe=':')}"} if done.created else {}
    return JSONResponse({"run_id": done.run_id, "created": done.created, "run": run_json(run)},
                        status_code=201 if done.created else 200, headers=new)


@router.delete("/{job_id}", summary="Cancel a job (its history is kept)", status_code=204,
               responses=problems(401, 403, 404, 429))
def cancel(who: Writer, conn: Conn, job_id: int) -> Response:
    cancel_job(conn, who.tenant_id, known_job_id(job_id))
    return Response(status_code=204)


def known_job_id(job_id: int) -> int:
    """Ids outside bigint are unknown ids (404), not errors."""
    return job_id if 1 <= job_id <= MAX_JOB_ID else 0


def _cursor(cursor: str | None) -> int:
    if cursor is None:
        return 0
    return bigint(cursor, field="cursor", expected="a next_cursor value")


def if_match_version(header: str | None) -> int:
    """The version an If-Match header names (428 without one: a PATCH needs it)."""
    if header is None:
        raise PreconditionRequired("send If-Match: <version> (the job's ETag); a PATCH "
                                   "without it could overwrite a change you have not seen")
    text = header.strip().removeprefix("W/").strip('"')
    if not ascii_digits(text) or len(text) > 9:
        raise Invalid(f"expected If-Match to be a job version like \"3\", got "
                      f"{json.dumps(header)}", field="If-Match")
    return int(text)
