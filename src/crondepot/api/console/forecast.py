"""The console's forecast page: the tenant's runs over the next hours against its rate
limits (crondepot.forecast), the same computation as ``crondepot forecast`` and
``GET /v1/forecast``. Not refreshed live: a forecast of half a million jobs takes a second.
"""

from __future__ import annotations

from datetime import UTC

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from crondepot.api.auth import Conn
from crondepot.api.console.routes import refuse_unstorable_params, render_page
from crondepot.api.console.session import PATH, session
from crondepot.forecast.report import DEFAULT_HOURS, MAX_HOURS, forecast
from crondepot.forecast.text import lines, wave_line

router = APIRouter(prefix=PATH, include_in_schema=False,
                   dependencies=[Depends(refuse_unstorable_params)])


def _hours(text: str | None) -> int | None:
    """The horizon asked for, or None when it is not a number of hours in range."""
    if text is None or text == "":
        return DEFAULT_HOURS
    if not text.isdigit() or not 1 <= int(text) <= MAX_HOURS:
        return None
    return int(text)


@router.get("/forecast")
def forecast_page(request: Request, conn: Conn) -> HTMLResponse:
    current = session(request, conn)
    asked = request.query_params.get("hours")
    hours = _hours(asked)
    if hours is None:
        return render_page(request, current, "forecast.html", status=422, nav="forecast",
                           hours=asked, max_hours=MAX_HOURS, result=None,
                           error=f"hours: expected a whole number of hours from 1 to "
                                 f"{MAX_HOURS}, got {asked!r}")
    result = forecast(conn, current.who.tenant_id, hours=hours)
    text = lines(result, UTC)
    return render_page(request, current, "forecast.html", nav="forecast", hours=hours,
                       max_hours=MAX_HOURS, result=result, headline=text[0], error=None,
                       limits=[(lf, [wave_line(lf, w, UTC) for w in lf.waves
                                     if w.waited or w.past_deadline][:50])
                               for lf in result.limits])
