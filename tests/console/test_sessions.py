"""Console sessions are kept by the server: the cookie holds a random session id (never the
token), logout ends the session so a replayed cookie is refused, a revoked token ends its
sessions, sessions expire, and the cookie is Secure over TLS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings
from crondepot.tenancy.tenants import hash_token
from crondepot.tenancy.tokens import revoke_token
from tests.support.console import World, csrf_of, login
from tests.support.pooler import api_app

COOKIE = "crondepot_console"


def _cookie(client: TestClient) -> str:
    value = client.cookies.get(COOKIE, path="/console")
    assert value, "no session cookie"
    return value


def _replay(client: TestClient, cookie: str) -> int:
    """GET the overview with only this cookie; the status (200 or 303 to login)."""
    client.cookies.clear()
    client.cookies.set(COOKIE, cookie, path="/console")
    status: int = client.get("/console").status_code
    return status


def _token_id(conn: psycopg.Connection[Any], token: str) -> int:
    row = conn.execute("SELECT id FROM api_tokens WHERE token_hash = %s",
                       (hash_token(token),)).fetchone()
    assert row is not None
    value: int = row[0]
    return value


def test_the_cookie_holds_a_session_id_not_the_token(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    page = client.get("/console/login")
    done = client.post("/console/login", data={"csrf": csrf_of(page.text),
                                               "token": world.admin})
    assert world.admin not in done.headers["set-cookie"]
    cookie = _cookie(client)
    assert cookie != world.admin and len(cookie) >= 40
    # Only the id's hash is stored, tied to the token that logged in.
    rows = conn.execute("SELECT id_hash, token_id, expires_at - created_at "
                        "FROM console_sessions").fetchall()
    assert [(bytes(r[0]), r[1]) for r in rows] == [(hash_token(cookie),
                                                    _token_id(conn, world.admin))]
    assert rows[0][2].total_seconds() == 8 * 3600
    assert "Max-Age=28800" in done.headers["set-cookie"]
    assert client.get("/console").status_code == 200


def test_logout_ends_the_session_and_a_replayed_cookie_is_refused(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    cookie = _cookie(client)
    out = client.post("/console/logout", data={"csrf": csrf})
    assert out.status_code == 303
    assert conn.execute("SELECT count(*) FROM console_sessions").fetchone() == (0,)
    assert _replay(client, cookie) == 303
    # The token itself still works, in the API and for a new login.
    assert client.get("/v1/jobs", headers={"Authorization": f"Bearer {world.admin}"}
                      ).status_code == 200
    login(client, world.admin)


def test_logout_ends_only_its_own_session(client: TestClient, world: World) -> None:
    login(client, world.admin)
    first = _cookie(client)
    client.cookies.clear()
    csrf = login(client, world.admin)
    second = _cookie(client)
    assert first != second
    client.post("/console/logout", data={"csrf": csrf})
    assert _replay(client, second) == 303
    assert _replay(client, first) == 200


def test_a_sessions_csrf_token_is_not_valid_for_another_session(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    old_csrf = login(client, world.admin)
    client.cookies.clear()
    login(client, world.admin)
    refused = client.post(f"/console/jobs/{world.daily}/pause", data={"csrf": old_csrf})
    assert refused.status_code == 403
    assert conn.execute("SELECT paused FROM jobs WHERE id = %s",
                        (world.daily,)).fetchone() == (False,)


def test_revoking_the_token_ends_its_sessions(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    login(client, world.reader)
    reader_cookie = _cookie(client)
    client.cookies.clear()
    login(client, world.admin)
    admin_cookie = _cookie(client)
    done = revoke_token(conn, world.tenant_id, _token_id(conn, world.reader),
                        keep_an_admin=True)
    assert not done.already
    assert conn.execute("SELECT count(*) FROM console_sessions").fetchone() == (1,)
    assert _replay(client, reader_cookie) == 303
    assert _replay(client, admin_cookie) == 200


def test_a_revoked_tokens_session_is_refused_even_if_its_row_remains(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    # A revocation written by hand (or racing a login) leaves the row: the lookup still
    # refuses it.
    login(client, world.admin)
    cookie = _cookie(client)
    conn.execute("UPDATE api_tokens SET revoked_at = now() WHERE id = %s",
                 (_token_id(conn, world.admin),))
    assert _replay(client, cookie) == 303


def test_an_expired_session_is_refused_and_swept_at_the_next_login(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    login(client, world.admin)
    cookie = _cookie(client)
    conn.execute("UPDATE console_sessions SET created_at = now() - interval '9 hours', "
                 "expires_at = now() - interval '1 hour'")
    assert _replay(client, cookie) == 303
    client.cookies.clear()
    login(client, world.reader)
    assert conn.execute("SELECT count(*) FROM console_sessions").fetchone() == (1,)


@pytest.fixture
def short_sessions(db_url: str) -> Iterator[TestClient]:
    settings = ApiSettings(pool_max_size=4, rate_per_second=1000, burst=1000,
                           console_session_seconds=120)
    with TestClient(api_app(db_url, settings), follow_redirects=False) as test_client:
        yield test_client


def test_the_session_lifetime_is_a_setting(short_sessions: TestClient, world: World,
                                           conn: psycopg.Connection[Any]) -> None:
    page = short_sessions.get("/console/login")
    done = short_sessions.post("/console/login", data={"csrf": csrf_of(page.text),
                                                       "token": world.admin})
    assert "Max-Age=120" in done.headers["set-cookie"]
    assert conn.execute("SELECT expires_at - created_at FROM console_sessions"
                        ).fetchone()[0].total_seconds() == 120  # type: ignore[index]
    assert ApiSettings.from_env({"CRONDEPOT_CONSOLE_SESSION_SECONDS": "600"}
                                ).console_session_seconds == 600


@pytest.mark.parametrize(("base", "secure"), [("https://console.example", True),
                                              ("http://console.example", False)])
def test_the_cookie_is_secure_when_the_request_came_over_tls(
        db_url: str, world: World, base: str, secure: bool) -> None:
    settings = ApiSettings(pool_max_size=4, rate_per_second=1000, burst=1000)
    with TestClient(api_app(db_url, settings), base_url=base,
                    follow_redirects=False) as client:
        page = client.get("/console/login")
        done = client.post("/console/login", data={"csrf": csrf_of(page.text),
                                                   "token": world.admin})
        assert done.status_code == 303
        cookie = done.headers["set-cookie"]
        assert COOKIE in cookie and ("; Secure" in cookie) is secure
