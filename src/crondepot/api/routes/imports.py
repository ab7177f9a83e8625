"""Bulk import: an NDJSON file of job documents, stored in batches; bad lines reported.

Each line is validated on its own; the valid ones are stored (5,000 to a statement), the bad
ones are reported with their line number and field and change nothing. A line the database
still refuses is reported the same way and the rest of its batch is stored (``import_batch``).
A key already used by the tenant is counted as ``existing`` and left as it is, so an import
can be re-run.

A file with no valid line at all (every line refused, or no line) stores nothing and is
refused whole: 422 with the per-line errors, as a client checking only the status expects.
A re-run whose lines all exist already is valid and keeps its 200.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Writer
from crondepot.api.body import ndjson_body, ndjson_spans, parse_json
from crondepot.api.models import EMI_REMINDER, PYTHON_JOB, ImportResult
from crondepot.api.openapi import ndjson_body as ndjson_doc
from crondepot.api.openapi import problems
from crondepot.api.problems import ApiError, NothingImported
from crondepot.base.errors import InvalidJob, InvalidSchedule
from crondepot.job.spec import JobSpec
from crondepot.job.store import import_batch
from crondepot.tenancy import scope

router = APIRouter(prefix="/v1", tags=["import"])
log = logging.getLogger("crondepot.api")
BATCH = 5000      # jobs per statement and commit, as bench/api.py's library path stores them
MAX_REPORTED = 1000


@router.post("/import", summary="Import jobs from NDJSON (one job document per line)",
             responses={200: {"model": ImportResult,
                              "description": "at least one line is a valid job document "
                                             "(created or already there); bad lines are "
                                             "reported in `errors`"},
                        **problems(401, 403, 413, 415, 422, 429)},
             openapi_extra=ndjson_doc({"two_jobs": [EMI_REMINDER, PYTHON_JOB]}))
def import_jobs(who: Writer, conn: Conn, request: Request,
                raw: Annotated[bytearray, Depends(ndjson_body)]) -> JSONResponse:
    counts = {"lines": 0, "created": 0, "existing": 0, "failed": 0}
    errors: list[dict[str, Any]] = []
    batch: list[tuple[int, JobSpec]] = []

    def failed(number: int, error: dict[str, str]) -> None:
        counts["failed"] += 1
        if len(errors) < MAX_REPORTED:
            errors.append({"line": number, **error})

    def store() -> None:
        for (number, _), job in zip(batch, import_batch(conn, who.tenant_id,
                                                        [spec for _, spec in batch]),
                                    strict=True):
            if isinstance(job, InvalidJob):
                failed(number, _line_error(job))
            else:
                counts["created" if job.created else "existing"] += 1
        batch.clear()
        # Each batch committed on its own, also when the request is one transaction.
        scope.checkpoint(conn)

    # A line is one job document: bound by what POST /v1/jobs takes, checked before the
    # line is copied or parsed (one 31 MiB line took the process to 684 MB).
    longest = request.app.state.settings.json_body_bytes
    for number, start, end in ndjson_spans(raw):
        counts["lines"] += 1
        if end - start > longest:
            failed(number, {"field": "line", "message": f"the line is {end - start} bytes; "
                            f"a job document is at most {longest} bytes"})
            continue
        try:
            line = bytes(raw[start:end])
            batch.append((number, JobSpec.from_document(parse_json(line, field="body"))))
        except (InvalidJob, ApiError) as exc:
            failed(number, _line_error(exc))
        except InvalidSchedule as exc:
            failed(number, {"field": "tz" if exc.field == "tz" else "cron",
                            "message": str(exc)})
        except (ValueError, TypeError, RecursionError, UnicodeError):
            # Not a refusal the validator means to give (a bug behind it): the line fails,
            # logged, and the rest of the file is still read and stored.
            log.exception("import: line %d could not be validated", number)
            failed(number, {"field": "line", "message": "this line could not be validated "
                                                        "(an internal error, logged)"})
        if len(batch) == BATCH:
            store()
    store()
    errors.sort(key=lambda e: e["line"])
    if counts["created"] + counts["existing"] == 0:
        raise NothingImported(counts, errors)
    return JSONResponse({**counts, "errors": errors})


def _line_error(exc: InvalidJob | ApiError) -> dict[str, str]:
    if isinstance(exc, InvalidJob):
        return {"field": exc.field or "line", "message": str(exc)}
    # parse_json names "body" for text that is not JSON at all (here, the line), or the
    # member that nests too deeply to parse
    named = exc.errors[0]["field"] if exc.errors else "body"
    return {"field": "line" if named == "body" else named, "message": exc.detail}
