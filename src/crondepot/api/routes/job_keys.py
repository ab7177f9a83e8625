"""A job by its key: ``GET /v1/jobs/by-key/{key}``, and ``PUT`` to upsert it (schedules as
code, crondepot.job.apply).

The API's one way to address a job by the key the client gave it (every other operation
takes the id; this answer carries it, and its links lead to them). A key is always a key
here, digits or not: ``/v1/jobs/123`` is the job with id 123, ``/v1/jobs/by-key/123`` the
one with key "123". Percent-encode the key (``/`` as ``%2F``). Registered before the jobs
router, so ``/v1/jobs/by-key/...`` is never read as a job id.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.body import json_body
from crondepot.api.models import EMI_REMINDER, Job, JobDocument
from crondepot.api.openapi import etag, job_links, location, problems, request_body
from crondepot.api.problems import Invalid
from crondepot.api.routes.jobs import if_match_version
from crondepot.job.apply import apply_set, read_documents
from crondepot.job.by_key import job_id_by_key
from crondepot.job.store import JobNotFound, get_job
from crondepot.runs.render import job_json

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
Body = Annotated[Any, Depends(json_body)]
# The key comes from the path; the document may leave it out.
_UPSERT_EXAMPLE = {k: v for k, v in EMI_REMINDER.items() if k != "key"}


@router.get("/by-key/{key:path}", summary="Get a job by its key",
            description="The job whose `key` is exactly `{key}` (percent-encoded; digits are "
                        "a key here, never an id), cancelled ones included. Use its `id` "
                        "for the other operations on it.",
            responses={200: {"model": Job, "headers": etag(),
                             "links": job_links("$response.body#")},
                       **problems(401, 404, 422, 429)})
def read_by_key(who: Reader, conn: Conn,
                key: Annotated[str, Path(min_length=1, max_length=200,
                                         examples=["bank42:48213:emi"])]) -> JSONResponse:
    job_id = job_id_by_key(conn, who.tenant_id, key)
    if job_id is None:
        raise JobNotFound(f"no job with key {key!r}")
    job = get_job(conn, who.tenant_id, job_id)
    return JSONResponse(job_json(job), headers={"ETag": f'"{job.version}"'})


@router.put("/by-key/{key:path}", summary="Create or replace a job by its key (upsert)",
            description="The body is the whole job document (its `key`, if given, must be "
                        "`{key}`): a new key creates the job (201), a stored job whose "
                        "document differs is replaced by it (200; fields left out take their "
                        "defaults; the fires before the change are settled first), the same "
                        "document changes nothing (200). Grants and quotas apply as for a "
                        "create. If-Match (optional): the version you read; 412 if the job "
                        "is at another or does not exist.",
            status_code=200,
            responses={200: {"model": Job, "description": "replaced, or already this document",
                             "headers": etag(), "links": job_links("$response.body#")},
                       201: {"model": Job, "description": "created",
                             "headers": {**location("/v1/jobs/{id}"), **etag()},
                             "links": job_links("$response.body#")},
                       **problems(401, 403, 409, 412, 413, 415, 422, 429)},
            openapi_extra=request_body(JobDocument, {"emi_reminder": _UPSERT_EXAMPLE}))
def upsert_by_key(who: Writer, conn: Conn, doc: Body,
                  key: Annotated[str, Path(min_length=1, max_length=200,
                                           examples=["bank42:48213:emi"])],
                  if_match: Annotated[str | None, Header(
                      description="the job's version, from its ETag or `version`")] = None,
                  ) -> JSONResponse:
    if not isinstance(doc, dict):
        raise Invalid(f"expected a JSON object (a job document), got {type(doc).__name__}",
                      field="body")
    if doc.get("key", key) != key:
        raise Invalid(f"the document's key {doc['key']!r} is not the path's {key!r}",
                      field="key")
    declared = read_documents([("body", "", {**doc, "key": key})], None)
    expect = {key: if_match_version(if_match)} if if_match is not None else None
    plan = apply_set(conn, who.tenant_id, declared, scope=None, expect=expect, audit=False)
    job_id = job_id_by_key(conn, who.tenant_id, key)
    assert job_id is not None         # it was just written or found
    job = get_job(conn, who.tenant_id, job_id)
    created = plan.count("create") == 1
    new = {"Location": f"/v1/jobs/{job.id}"} if created else {}
    return JSONResponse(job_json(job), status_code=201 if created else 200,
                        headers={"ETag": f'"{job.version}"', **new})
