"""Backfill one job: write the fires of a past range that have no row (crondepot.runs.backfill)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Writer
from crondepot.api.models import BackfillRequest, BackfillResult
from crondepot.api.openapi import problems, request_body
from crondepot.api.problems import Invalid
from crondepot.api.routes.jobs import known_job_id
from crondepot.runs.backfill import BackfillRangeError, backfill

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

# The hour before the last whole hour of the day the process started: a range backfill
# accepts (it must end by now and start at most 30 days ago), which a fixed date would not
# for long.
_HOUR = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
AFTER_OUTAGE = {"from": _HOUR.isoformat().replace("+00:00", "Z"),
                "to": (_HOUR + timedelta(hours=1)).isoformat().replace("+00:00", "Z"),
                "include_skipped": False, "dry_run": True}


@router.post("/{job_id}/backfill", summary="Write the fires of a past range that have no row",
             description="Rebuilds the job's fires with `from` <= nominal time < `to` from "
                         "the timetables in force then (edits of cron or tz included) and "
                         "writes a run, queued and due now, for each fire without a row, "
                         "with the run id the scheduler would have given it: a fire never "
                         "gets a second row. Fires past their misfire deadline are written "
                         "skipped. With `include_skipped`, skipped fires are queued again "
                         "(same run id). Fires the scheduler has not reached (a paused job) "
                         "are left to it. At most 31 days and 10,000 fires per call: when "
                         "`next_from` is set, call again with it as `from`.",
             responses={200: {"model": BackfillResult}, **problems(401, 403, 404, 409, 422,
                                                                   429)},
             openapi_extra=request_body(BackfillRequest, {"after_an_outage": AFTER_OUTAGE}))
def backfill_job(who: Writer, conn: Conn, job_id: int, body: BackfillRequest) -> JSONResponse:
    for name, value in (("from", body.since), ("to", body.until)):
        if value is not None and value.utcoffset() is None:
            raise Invalid(f"{name} needs a UTC offset (Z or +HH:MM)", field=name)
    try:
        done = backfill(conn, who.tenant_id, known_job_id(job_id), since=body.since,
                        until=body.until, include_skipped=body.include_skipped,
                        dry_run=body.dry_run)
    except BackfillRangeError as exc:
        raise Invalid(str(exc), field=exc.field) from None
    return JSONResponse(done.document())
