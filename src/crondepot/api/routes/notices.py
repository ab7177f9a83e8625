"""Failure notices: a tenant's notification channels (add, list, read, remove) and the
notices sent to them (sent, pending, failed with the last error).

Another tenant's channel reads as one that does not exist (404), and cannot be removed; a
channel's bad input (a URL the address guard refuses, a malformed e-mail address) is a 422
naming the field, and nothing is stored. docs/notices.md says what a notice carries.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query, Response
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.models import Channel as ChannelModel
from crondepot.api.models import ChannelDocument, ChannelList, NoticeList
from crondepot.api.openapi import link, location, problems
from crondepot.api.problems import Invalid
from crondepot.base.vocab import NoticeStatus
from crondepot.notices.channels import add_channel, get_channel, list_channels, remove_channel
from crondepot.notices.outbox import MAX_LIST, held_events, list_messages

router = APIRouter(prefix="/v1", tags=["notices"])
MAX_ID = 2**63 - 1
ChannelId = Annotated[int, Path(ge=1, le=MAX_ID)]


@router.get("/notification-channels", summary="List this tenant's notification channels",
            responses={200: {"model": ChannelList}, **problems(401, 429)})
def list_(who: Reader, conn: Conn) -> JSONResponse:
    return JSONResponse({"items": [c.document() for c in list_channels(conn, who.tenant_id)]})


@router.post("/notification-channels", summary="Add a notification channel (a signed "
                                                "webhook or an e-mail address)",
             status_code=201,
             responses={200: {"model": ChannelModel, "description": "already there"},
                        201: {"model": ChannelModel, "description": "added",
                              "headers": location("/v1/notification-channels/{id}"),
                              "links": link("GetChannel", "notices_read",
                                            channel_id="$response.body#/id")},
                        **problems(401, 403, 422, 429)})
def create(who: Writer, conn: Conn,
           body: Annotated[ChannelDocument, Body(openapi_examples={
               "webhook": {"summary": "a webhook, signed as run deliveries are",
                           "value": {"type": "webhook",
                                     "url": "https://hooks.bank42.example/crondepot"}},
               "email": {"summary": "an e-mail address",
                         "value": {"type": "email",
                                   "address": "payments-oncall@bank42.example"}}})]
           ) -> JSONResponse:
    address, other = (body.url, "address") if body.type == "webhook" else (body.address, "url")
    if getattr(body, other) is not None:
        raise Invalid(f"{other} is not a field of a {body.type} channel; send "
                      f"{'url' if other == 'address' else 'address'}", field=other)
    channel, added = add_channel(conn, who.tenant_id, body.type, address)
    where = {"Location": f"/v1/notification-channels/{channel.id}"} if added else {}
    return JSONResponse(channel.document(), status_code=201 if added else 200, headers=where)


@router.get("/notification-channels/{channel_id}", summary="Get one notification channel",
            responses={200: {"model": ChannelModel}, **problems(401, 404, 422, 429)})
def read(who: Reader, conn: Conn, channel_id: ChannelId) -> JSONResponse:
    return JSONResponse(get_channel(conn, who.tenant_id, channel_id).document())


@router.delete("/notification-channels/{channel_id}",
               summary="Remove a notification channel, its waiting events and its notices",
               status_code=204, responses=problems(401, 403, 404, 422, 429))
def delete(who: Writer, conn: Conn, channel_id: ChannelId) -> Response:
    remove_channel(conn, who.tenant_id, channel_id)
    return Response(status_code=204)


@router.get("/notices", summary="The notices sent, pending or failed, newest first",
            responses={200: {"model": NoticeList}, **problems(401, 422, 429)})
def list_notices(who: Reader, conn: Conn,
            status: Annotated[NoticeStatus | None, Query()] = None,
            before: Annotated[int | None, Query(ge=1, le=MAX_ID,
                                                description="only notices with a smaller "
                                                            "id (the next page)")] = None,
            limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 50) -> JSONResponse:
    items = list_messages(conn, who.tenant_id, status=status, before=before, limit=limit)
    return JSONResponse({"items": [m.document() for m in items],
                         "held": held_events(conn, who.tenant_id)})
