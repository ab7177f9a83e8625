"""Tokens through the API: issue, list and revoke within the caller's tenant, and the
rotation of the webhook signing secret. A read token may list, not change; another tenant's
token is a 404; the tenant's last admin token stays; bad input changes nothing."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.tenancy.tenants import hash_token
from crondepot.tenancy.tokens import MAX_ACTIVE_TOKENS, create_token
from crondepot.worker.targets import sign, verify
from tests.support.api import bearer


def _tokens(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    """Every token row, for 'nothing changed' checks."""
    return conn.execute("SELECT id, tenant_id, role, label, revoked_at FROM api_tokens "
                        "ORDER BY id").fetchall()


def _secrets(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT id, signing_secret, previous_signing_secret, "
                        "previous_secret_until FROM tenants ORDER BY id").fetchall()


def _field(response: Any) -> str:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    field: str = response.json()["errors"][0]["field"]
    return field


def _issue(client: TestClient, h: dict[str, str], **body: Any) -> dict[str, Any]:
    response = client.post("/v1/tokens", json=body, headers=h)
    assert response.status_code == 201, response.text
    issued: dict[str, Any] = response.json()
    return issued


def test_an_admin_issues_a_token_that_works_and_is_shown_once(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    response = client.post("/v1/tokens", json={"role": "read", "label": "ci read"}, headers=h)
    assert response.status_code == 201, response.text
    assert response.headers["cache-control"] == "no-store"
    issued = response.json()
    assert issued["role"] == "read" and issued["label"] == "ci read"
    assert issued["token"].startswith("cdp_") and issued["revoked_at"] is None
    # Only the hash is stored.
    stored = conn.execute("SELECT token_hash FROM api_tokens WHERE id = %s",
                          (issued["id"],)).fetchone()
    assert stored is not None and bytes(stored[0]) == hash_token(issued["token"])
    assert client.get("/v1/jobs", headers=bearer(issued["token"])).status_code == 200
    assert client.post("/v1/jobs", json={}, headers=bearer(issued["token"])).status_code == 403
    # The list never shows a token again.
    listed = client.get("/v1/tokens", headers=h).json()["items"]
    mine = next(t for t in listed if t["id"] == issued["id"])
    assert "token" not in mine and issued["token"] not in str(listed)
    assert set(mine) == {"id", "role", "label", "created_at", "last_used_at", "revoked_at"}
    # Without a body: an admin token, no label.
    bare = client.post("/v1/tokens", headers=h)
    assert bare.status_code == 201 and bare.json()["role"] == "admin"
    assert bare.json()["label"] is None


def test_a_read_token_lists_but_cannot_issue_revoke_or_rotate(
        client: TestClient, h: dict[str, str], reader: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    listed = client.get("/v1/tokens", headers=reader)
    assert listed.status_code == 200 and len(listed.json()["items"]) == 2
    tokens, secrets = _tokens(conn), _secrets(conn)
    admin_id = listed.json()["items"][0]["id"]
    for method, path in (("POST", "/v1/tokens"), ("DELETE", f"/v1/tokens/{admin_id}"),
                         ("POST", "/v1/signing-secret/rotate")):
        response = client.request(method, path, headers=reader)
        assert response.status_code == 403, (path, response.text)
        assert response.json()["type"].endswith("/forbidden")
    assert _tokens(conn) == tokens and _secrets(conn) == secrets


def test_a_tenant_sees_only_its_own_tokens_and_another_tenants_is_not_found(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    theirs = client.get("/v1/tokens", headers=other).json()["items"]
    mine = client.get("/v1/tokens", headers=h).json()["items"]
    assert len(theirs) == 1 and len(mine) == 1 and theirs[0]["id"] != mine[0]["id"]
    before = _tokens(conn)
    response = client.delete(f"/v1/tokens/{theirs[0]['id']}", headers=h)
    assert response.status_code == 404 and response.json()["type"].endswith("/not-found")
    assert client.delete("/v1/tokens/999999", headers=h).status_code == 404
    assert _tokens(conn) == before
    assert client.get("/v1/tokens", headers=other).status_code == 200     # still works


@pytest.mark.parametrize(("token_id", "status"), [("abc", 422), ("0", 422),
                                                  ("99999999999999999999", 422)])
def test_a_token_id_that_is_not_one_is_refused(client: TestClient, h: dict[str, str],
                                               token_id: str, status: int) -> None:
    assert client.delete(f"/v1/tokens/{token_id}", headers=h).status_code == status


@pytest.mark.parametrize(("body", "field"), [
    ({"role": "owner"}, "role"),
    ({"role": None}, "role"),
    ({"label": "x" * 101}, "label"),
    ({"label": ""}, "label"),
    ({"label": "   "}, "label"),
    ({"label": "tab\there"}, "label"),
    ({"label": "nul\u0000"}, "label"),
    ({"label": 7}, "label"),
    ({"token": "cdp_mine"}, "token"),
])
def test_a_bad_token_request_names_the_field_and_issues_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        body: dict[str, Any], field: str) -> None:
    before = _tokens(conn)
    assert _field(client.post("/v1/tokens", json=body, headers=h)) == field
    assert _tokens(conn) == before


def test_a_revoked_token_is_refused_at_once_and_listed_as_revoked(
        client: TestClient, h: dict[str, str]) -> None:
    issued = _issue(client, h, label="to revoke")
    other_h = bearer(issued["token"])
    assert client.get("/v1/jobs", headers=other_h).status_code == 200
    assert client.delete(f"/v1/tokens/{issued['id']}", headers=h).status_code == 204
    refused = client.get("/v1/jobs", headers=other_h)
    assert refused.status_code == 401 and "unknown or revoked" in refused.json()["detail"]
    listed = {t["id"]: t for t in client.get("/v1/tokens", headers=h).json()["items"]}
    revoked_at = listed[issued["id"]]["revoked_at"]
    assert revoked_at is not None
    # Revoking again is not an error and keeps the first revocation time.
    assert client.delete(f"/v1/tokens/{issued['id']}", headers=h).status_code == 204
    again = {t["id"]: t for t in client.get("/v1/tokens", headers=h).json()["items"]}
    assert again[issued["id"]]["revoked_at"] == revoked_at


def test_a_token_may_revoke_itself_but_not_the_last_admin_token(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    (first,) = client.get("/v1/tokens", headers=h).json()["items"]
    # The only admin token (a read token does not count): refused, 409, still works.
    _issue(client, h, role="read")
    refused = client.delete(f"/v1/tokens/{first['id']}", headers=h)
    assert refused.status_code == 409, refused.text
    assert refused.json()["type"].endswith("/token-conflict")
    assert "last active admin token" in refused.json()["detail"]
    assert client.get("/v1/jobs", headers=h).status_code == 200
    # With a second admin token, a token may revoke itself; then it is refused.
    second = _issue(client, h, role="admin")
    assert client.delete(f"/v1/tokens/{first['id']}", headers=h).status_code == 204
    assert client.get("/v1/jobs", headers=h).status_code == 401
    # The second one is now the last admin: it cannot revoke itself.
    h2 = bearer(second["token"])
    assert client.delete(f"/v1/tokens/{second['id']}", headers=h2).status_code == 409
    assert client.get("/v1/tokens", headers=h2).status_code == 200


def _revoke(client: TestClient, headers: dict[str, str], token_id: int,
            gate: threading.Barrier, answers: list[int]) -> None:
    gate.wait()
    answers.append(client.delete(f"/v1/tokens/{token_id}", headers=headers).status_code)


def test_two_admin_tokens_revoking_each_other_at_once_leave_one(
        client: TestClient, token: str, conn: psycopg.Connection[Any]) -> None:
    survivor = token
    (survivor_id,) = conn.execute("SELECT id FROM api_tokens").fetchone() or ()
    for _ in range(8):
        fresh = _issue(client, bearer(survivor), role="admin")
        pairs = [(bearer(survivor), fresh["id"]), (bearer(fresh["token"]), survivor_id)]
        answers: list[int] = []
        gate = threading.Barrier(2)
        threads = [threading.Thread(target=_revoke, args=(client, *pair, gate, answers))
                   for pair in pairs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        alive = [row[0] for row in conn.execute(
            "SELECT id FROM api_tokens WHERE role = 'admin' AND revoked_at IS NULL")]
        assert len(alive) == 1, (answers, alive)
        # The loser was refused as the last admin (409), or was already revoked (401).
        assert sorted(answers) in ([204, 401], [204, 409]), answers
        if alive[0] == fresh["id"]:
            survivor, survivor_id = fresh["token"], fresh["id"]


def test_a_tenant_has_at_most_100_active_tokens(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    tenant_id = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()[0]  # type: ignore[index]
    made = [create_token(conn, tenant_id, role="read") for _ in range(MAX_ACTIVE_TOKENS - 1)]
    before = _tokens(conn)
    refused = client.post("/v1/tokens", headers=h)
    assert refused.status_code == 409 and "revoke one first" in refused.json()["detail"]
    assert _tokens(conn) == before
    assert client.delete(f"/v1/tokens/{made[0].info.id}", headers=h).status_code == 204
    assert client.post("/v1/tokens", headers=h).status_code == 201


def test_last_use_is_recorded_to_the_minute(
        client: TestClient, h: dict[str, str], token: str,
        conn: psycopg.Connection[Any]) -> None:
    (listed,) = client.get("/v1/tokens", headers=h).json()["items"]
    first = datetime.fromisoformat(listed["last_used_at"])
    assert datetime.now(first.tzinfo) - first < timedelta(seconds=30)
    # A minute ago: the next request writes it again; within the minute it does not.
    conn.execute("UPDATE api_tokens SET last_used_at = now() - interval '61 seconds'")
    client.get("/v1/jobs", headers=h)
    used = conn.execute("SELECT last_used_at, now() - last_used_at FROM api_tokens"
                        ).fetchone()
    assert used is not None and used[1] < timedelta(seconds=5)
    client.get("/v1/jobs", headers=h)
    assert conn.execute("SELECT last_used_at FROM api_tokens").fetchone() == (used[0],)


def test_token_changes_and_rotations_are_audited_without_the_secrets(
        client: TestClient, h: dict[str, str]) -> None:
    issued = _issue(client, h, role="read", label="audited")
    client.delete(f"/v1/tokens/{issued['id']}", headers=h)
    rotated = client.post("/v1/signing-secret/rotate", json={"overlap_seconds": 60},
                          headers=h).json()
    items = [i for i in client.get("/v1/audit", headers=h).json()["items"]
             if not i["actor"].startswith("role:")]   # the fixtures' setup names no actor
    assert [(i["action"], i["subject"]) for i in items] == [
        ("secret.rotate", "signing-secret"), ("token.revoke", f"token:{issued['id']}"),
        ("token.create", f"token:{issued['id']}")]
    assert items[2]["after"]["role"] == "read" and items[2]["after"]["label"] == "audited"
    assert items[0]["after"]["previous_valid_until"] is not None
    text = str(items)
    assert issued["token"] not in text and rotated["signing_secret"] not in text


def test_rotating_the_secret_shows_the_new_one_once_and_keeps_the_old_one_signing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    (old,) = conn.execute("SELECT signing_secret FROM tenants WHERE name = 'bank42'"
                          ).fetchone() or ()
    response = client.post("/v1/signing-secret/rotate", json={"overlap_seconds": 7200},
                           headers=h)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    new = body["signing_secret"]
    assert new.startswith("whsec_") and new != old
    rotated_at = datetime.fromisoformat(body["rotated_at"])
    until = datetime.fromisoformat(body["previous_valid_until"])
    assert until - rotated_at == timedelta(hours=2)
    row = conn.execute("SELECT signing_secret, previous_signing_secret, previous_secret_until "
                       "FROM tenants WHERE name = 'bank42'").fetchone()
    assert row == (new, old, until)
    # The secret is usable: a signature made with it verifies.
    verify(new, {"webhook-id": "m", "webhook-timestamp": "1700000000",
                 "webhook-signature": sign(new, "m", 1700000000, b"{}")}, b"{}",
           now=1700000000)
    # The default overlap is a day; the other tenant's secret is untouched.
    default = client.post("/v1/signing-secret/rotate", headers=h).json()
    assert datetime.fromisoformat(default["previous_valid_until"]) - \
        datetime.fromisoformat(default["rotated_at"]) == timedelta(days=1)
    assert conn.execute("SELECT previous_signing_secret FROM tenants WHERE name = 'bank42'"
                        ).fetchone() == (new,)


def test_a_rotation_with_overlap_0_retires_the_old_secret_now(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    body = client.post("/v1/signing-secret/rotate", json={"overlap_seconds": 0},
                       headers=h).json()
    assert body["previous_valid_until"] == body["rotated_at"]


@pytest.mark.parametrize("body", [{"overlap_seconds": -1}, {"overlap_seconds": 30 * 86400 + 1},
                                  {"overlap_seconds": "a day"}, {"overlap_seconds": 1.5},
                                  {"overlap": 60}])
def test_a_bad_overlap_names_the_field_and_rotates_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        other: dict[str, str], body: dict[str, Any]) -> None:
    before = _secrets(conn)
    field = _field(client.post("/v1/signing-secret/rotate", json=body, headers=h))
    assert field == next(iter(body))
    assert _secrets(conn) == before
