"""The forecast of the caller's tenant: its runs over the next hours against its limits."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader
from crondepot.api.models import Forecast
from crondepot.api.openapi import problems
from crondepot.api.problems import Invalid
from crondepot.forecast.report import DEFAULT_HOURS, MAX_HOURS, ForecastError, forecast

router = APIRouter(prefix="/v1", tags=["forecast"])


@router.get("/forecast", summary="Forecast the tenant's runs against its rate limits",
            description="Counts the runs the tenant's live, unpaused jobs will write over the "
                        "next `hours` (timetables, calendars, delivery windows, max_runs, "
                        "start_at/end_at), computed once per distinct timetable, and drains "
                        "them with the runs queued now through each rate limit's token "
                        "bucket (burst first, then the rate; first due, first sent): when each "
                        "wave is drained and how many would pass their misfire deadline. A "
                        "held limit sends nothing. Runs with no rate limit are counted only: "
                        "workers bound them, and workers are not modelled. Other tenants' runs "
                        "on a shared bucket are not counted.",
            responses={200: {"model": Forecast}, **problems(401, 422, 429)})
def read_forecast(who: Reader, conn: Conn,
                  hours: Annotated[int, Query(
                      ge=1, le=MAX_HOURS,
                      description=f"how far ahead, in hours (1 to {MAX_HOURS})")] = DEFAULT_HOURS
                  ) -> JSONResponse:
    try:
        report = forecast(conn, who.tenant_id, hours=hours)
    except ForecastError as exc:
        raise Invalid(str(exc), field=exc.field) from None
    return JSONResponse(report.document())
