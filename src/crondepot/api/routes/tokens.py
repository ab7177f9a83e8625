"""The caller's tenant's API tokens, and the rotation of its webhook signing secret.

Any token may list its tenant's tokens; only an admin token may issue or revoke one, or
rotate the secret. A token may revoke itself, but not the tenant's last active admin token
(409: the tenant would be locked out; the operator's CLI may). Another tenant's token is a
404. A new token or secret is in its response only (``Cache-Control: no-store``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response
from fastapi.responses import JSONResponse

from crondepot.api.auth import Conn, Reader, Writer
from crondepot.api.models import NewToken, RotatedSecret, SecretRotation, TokenList, TokenRequest
from crondepot.api.openapi import link, location, problems
from crondepot.tenancy.tokens import TokenInfo, create_token, list_tokens, revoke_token
from crondepot.tenancy.webhook_secret import rotate_secret

router = APIRouter(prefix="/v1", tags=["tokens"])
MAX_ID = 2**63 - 1
NO_STORE = {"Cache-Control": "no-store"}


@router.get("/tokens", summary="The tenant's tokens (never the tokens themselves)",
            responses={200: {"model": TokenList}, **problems(401, 429)})
def list_(who: Reader, conn: Conn) -> JSONResponse:
    return JSONResponse({"items": [_token(t) for t in list_tokens(conn, who.tenant_id)]})


@router.post("/tokens", summary="Issue a token (shown once)", status_code=201,
             responses={201: {"model": NewToken, "description": "issued",
                              "headers": location("/v1/tokens/{id}"),
                              "links": link("RevokeToken", "tokens_revoke",
                                            token_id="$response.body#/id")},
                        **problems(401, 403, 409, 422, 429)})
def create(who: Writer, conn: Conn,
           body: Annotated[TokenRequest | None, Body(openapi_examples={
               "read": {"value": {"role": "read", "label": "ci read"}},
               "admin": {"value": {}}})] = None) -> JSONResponse:
    asked = body or TokenRequest()
    made = create_token(conn, who.tenant_id, role=asked.role, label=asked.label)
    return JSONResponse({**_token(made.info), "token": made.token}, status_code=201,
                        headers={**NO_STORE, "Location": f"/v1/tokens/{made.info.id}"})


@router.delete("/tokens/{token_id}", summary="Revoke a token (refused from the next request "
                                             "on; its console sessions end)",
               status_code=204, responses=problems(401, 403, 404, 409, 422, 429))
def revoke(who: Writer, conn: Conn,
           token_id: Annotated[int, Path(ge=1, le=MAX_ID)]) -> Response:
    revoke_token(conn, who.tenant_id, token_id, keep_an_admin=True)
    return Response(status_code=204)


@router.post("/signing-secret/rotate", summary="Make a new webhook signing secret (shown "
                                               "once); the old one signs during the overlap",
             responses={200: {"model": RotatedSecret}, **problems(401, 403, 422, 429)})
def rotate(who: Writer, conn: Conn,
           body: Annotated[SecretRotation | None, Body(openapi_examples={
               "a_day": {"value": {"overlap_seconds": 86400}},
               "now": {"summary": "the old secret leaked", "value": {"overlap_seconds": 0}}}
           )] = None) -> JSONResponse:
    asked = body or SecretRotation()
    done = rotate_secret(conn, who.tenant_id, timedelta(seconds=asked.overlap_seconds))
    return JSONResponse({"signing_secret": done.signing_secret,
                         "rotated_at": done.rotated_at.isoformat(),
                         "previous_valid_until": done.previous_valid_until.isoformat()},
                        headers=NO_STORE)


def _token(token: TokenInfo) -> dict[str, Any]:
    return {"id": token.id, "role": token.role, "label": token.label,
            "created_at": token.created_at.isoformat(),
            "last_used_at": token.last_used_at.isoformat() if token.last_used_at else None,
            "revoked_at": token.revoked_at.isoformat() if token.revoked_at else None}
