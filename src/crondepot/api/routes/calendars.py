"""Exclusion calendars a tenant owns: list, read, replace (JSON or an iCalendar file), delete.

A job names one in its ``calendar`` field (docs/schedules.md, "Holiday calendars"). Another
tenant's calendar reads as one that does not exist (404); a calendar live jobs name cannot
be deleted (409, with some of their ids).
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Request
from fastapi.responses import JSONResponse, Response

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.body import parse_json
from crondepot.api.models import Calendar, CalendarDocument, CalendarList
from crondepot.api.openapi import link, location, problems, request_body
from crondepot.api.problems import Invalid, UnsupportedMedia
from crondepot.base.vocab import CALENDAR_NAME
from crondepot.tenancy.calendars import (
    CalendarNotFound,
    check_dates,
    delete_calendar,
    get_calendar,
    list_calendars,
    parse_ics,
    set_calendar,
)

router = APIRouter(prefix="/v1/calendars", tags=["calendars"])
Name = Annotated[str, Path(json_schema_extra={"pattern": f"^(?:{CALENDAR_NAME.pattern})$"})]
ICS = "text/calendar"


@router.get("", summary="List this tenant's calendars",
            responses={200: {"model": CalendarList}, **problems(401, 429)})
def list_(who: Reader, conn: Conn) -> JSONResponse:
    return JSONResponse({"items": [c.document() for c in list_calendars(conn, who.tenant_id)]})


@router.get("/{name}", summary="Get one of this tenant's calendars",
            responses={200: {"model": Calendar}, **problems(401, 404, 429)})
def read(who: Reader, conn: Conn, name: str) -> JSONResponse:
    return JSONResponse(get_calendar(conn, who.tenant_id, name).document())


async def _body(request: Request) -> tuple[str, bytes]:
    """(media type, body), read before the route takes a database connection."""
    media = request.headers.get("content-type", "application/json")
    return media.split(";")[0].strip().lower(), await request.body()


_EXAMPLES = {"india_bank_holidays": {"dates": ["2026-12-25", "2027-01-26", "2027-08-15"]}}
_BODY = request_body(CalendarDocument, _EXAMPLES)
_BODY["requestBody"]["content"][ICS] = {
    "schema": {"type": "string", "pattern": "^[^\\u0000]*$",
               "description": "an iCalendar file (RFC 5545): the dates of its all-day events "
                              "(VEVENT; a recurring one expanded over ten years)"},
    "examples": {"one_holiday": {"value": "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bank//"
                                          "EN\r\nBEGIN:VEVENT\r\nUID:xmas@bank\r\nDTSTART;"
                                          "VALUE=DATE:20261225\r\nSUMMARY:Christmas\r\n"
                                          "END:VEVENT\r\nEND:VCALENDAR\r\n"}}}


@router.put("/{name}", summary="Create or replace one of this tenant's calendars",
            status_code=201,
            responses={200: {"model": Calendar, "description": "replaced"},
                       201: {"model": Calendar, "description": "created",
                             "headers": location("/v1/calendars/{name}"),
                             "links": link("GetCalendar", "calendars_read",
                                           name="$request.path.name")},
                       **problems(401, 403, 413, 415, 422, 429)},
            openapi_extra=_BODY)
def put(who: Writer, conn: Conn, name: Name,
        body: Annotated[tuple[str, bytes], Depends(_body)]) -> JSONResponse:
    dates = _dates(*body)
    try:
        get_calendar(conn, who.tenant_id, name)
        created = False
    except CalendarNotFound:
        created = True
    calendar = set_calendar(conn, who.tenant_id, name, dates)
    new = {"Location": f"/v1/calendars/{quote(name, safe='')}"} if created else {}
    return JSONResponse(calendar.document(), status_code=201 if created else 200, headers=new)


@router.delete("/{name}", summary="Delete a calendar no live job names", status_code=204,
               responses={204: {"description": "deleted"}, **problems(401, 403, 404, 409,
                                                                       429)})
def delete(who: Writer, conn: Conn, name: str) -> Response:
    delete_calendar(conn, who.tenant_id, name)
    return Response(status_code=204)




def _dates(media: str, body: bytes) -> list[Any]:
    if media == ICS:
        return parse_ics(body)
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMedia(f"expected Content-Type application/json or {ICS}, got {media}")
    doc = parse_json(body, field="body")
    example = 'a JSON object like {"dates": ["2026-12-25", "2027-01-26"]}'
    if not isinstance(doc, dict):
        raise Invalid(f"expected {example}", field="body")
    unknown = sorted(set(doc) - {"dates"})
    if unknown:
        raise Invalid(f"unknown field {unknown[0]!r}; allowed: dates", field=unknown[0])
    if not isinstance(doc.get("dates"), list):
        raise Invalid(f"expected dates to be a list of YYYY-MM-DD dates, in {example}",
                      field="dates")
    return check_dates(doc["dates"])
