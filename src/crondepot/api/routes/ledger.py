"""The ledger check for the caller's tenant: every fire of its jobs has exactly one row."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader
from crondepot.api.models import LedgerReport
from crondepot.api.openapi import problems
from crondepot.api.params import Instant
from crondepot.api.problems import Invalid
from crondepot.scheduler.ledger import WindowError, verify

router = APIRouter(prefix="/v1", tags=["ledger"])


@router.get("/verify", summary="Check that every fire of the tenant's jobs has one row",
            description="Rebuilds the fires of each job's timetable in the window (as it was "
                        "in force: edits of cron or tz and cancels included) and compares "
                        "them with the runs. `unaccounted` fires were owed a row and have "
                        "none; `duplicated` fires have more than one. The window defaults "
                        "to the 24 hours before now and may span at most 31 days.",
            responses={200: {"model": LedgerReport}, **problems(401, 422, 429)})
def verify_ledger(who: Reader, conn: Conn,
                  since: Annotated[Instant | None, Query(
                      description="earliest nominal time checked (RFC 3339)")] = None,
                  until: Annotated[Instant | None, Query(
                      description="latest nominal time checked (default and at most: "
                                  "now)")] = None) -> JSONResponse:
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.utcoffset() is None:
            raise Invalid(f"{name} needs a UTC offset (Z or +HH:MM)", field=name)
    try:
        report = verify(conn, tenant_id=who.tenant_id, since=since, until=until)
    except WindowError as exc:
        raise Invalid(str(exc), field="since") from None
    except OverflowError:       # until in the first day of year 1: the default since is before
        raise Invalid("the window reaches before 0001-01-01, the first date there is",
                      field="since" if since is not None else "until") from None
    return JSONResponse(report.document())
