"""A job by its key: ``GET /v1/jobs/by-key/{key}``.

The API's one way to address a job by the key the client gave it (every other operation
takes the id; this answer carries it, and its links lead to them). A key is always a key
here, digits or not: ``/v1/jobs/123`` is the job with id 123, ``/v1/jobs/by-key/123`` the
one with key "123". Percent-encode the key (``/`` as ``%2F``). Registered before the jobs
router, so ``/v1/jobs/by-key/...`` is never read as a job id.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader
from crondepot.api.models import Job
from crondepot.api.openapi import etag, job_links, problems
from crondepot.job.by_key import job_id_by_key
from crondepot.job.store import JobNotFound, get_job
from crondepot.runs.render import job_json

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


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
