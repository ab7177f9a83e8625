"""One interface, API side: a job by its key, and one paging style
(``?cursor=`` in, ``next_cursor`` out) on every list, the dead letter and the audit log
included."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import psycopg
from fastapi.testclient import TestClient

from crondepot.tenancy.tenants import new_token
from tests.integration.test_deadletter import seed_dead_letter
from tests.support.api import EMI, bearer


def test_a_job_is_read_by_its_key_and_digits_there_are_a_key(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        job: dict[str, Any]) -> None:
    got = client.get(f"/v1/jobs/by-key/{quote(EMI['key'], safe='')}", headers=h)
    assert got.status_code == 200, got.text
    assert got.json()["id"] == job["id"] and got.headers["etag"] == f'"{job["version"]}"'
    numeric = client.post("/v1/jobs", headers=h, json={**EMI, "key": str(job["id"])}).json()
    by_key = client.get(f"/v1/jobs/by-key/{job['id']}", headers=h).json()
    assert by_key["id"] == numeric["id"] != job["id"]
    slashed = client.post("/v1/jobs", headers=h, json={**EMI, "key": "a/b c"}).json()
    assert client.get("/v1/jobs/by-key/a%2Fb%20c", headers=h).json()["id"] == slashed["id"]


def test_an_unknown_or_another_tenants_key_is_not_found(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        job: dict[str, Any]) -> None:
    for headers, key in ((h, "no-such-key"), (other, EMI["key"])):
        missing = client.get(f"/v1/jobs/by-key/{quote(key, safe='')}", headers=headers)
        assert missing.status_code == 404
        assert missing.headers["content-type"] == "application/problem+json"
    too_long = client.get("/v1/jobs/by-key/" + "k" * 201, headers=h)
    assert too_long.status_code == 422, too_long.text
    assert "key" in [e["field"] for e in too_long.json()["errors"]]
    assert client.get("/v1/jobs/by-key/x", headers=bearer(new_token())).status_code == 401


def test_by_key_is_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "get" in paths["/v1/jobs/by-key/{key}"]


def _token_of(conn: psycopg.Connection[Any], name: str) -> dict[str, str]:
    from crondepot.db import Q
    from crondepot.tenancy.tenants import hash_token

    token = new_token()
    row = conn.execute("SELECT id FROM tenants WHERE name = %s", (name,)).fetchone()
    assert row is not None
    conn.execute(Q.insert_api_token, {"tenant_id": row[0], "token_hash": hash_token(token),
                                      "role": "admin", "label": "test"})
    return bearer(token)


def test_the_dead_letter_pages_with_cursor_and_next_cursor(
        conn: psycopg.Connection[Any], client: TestClient) -> None:
    seed_dead_letter(conn)
    h = _token_of(conn, "bank42")
    whole = client.get("/v1/dead-letter", headers=h).json()
    assert whole["next_cursor"] is None
    expected = [r["run_id"] for r in whole["items"]]
    assert len(expected) == 6      # bank42: a1-a3, b1, b2, c1 (a2 and b1 died at one instant)
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/dead-letter", headers=h, params=params)
        assert page.status_code == 200, page.text
        seen += [r["run_id"] for r in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == expected
    first = whole["items"][0]
    assert {"nominal_at", "finished_at", "last_error"} <= set(first)
    bad = client.get("/v1/dead-letter", headers=h, params={"cursor": "nope"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "cursor"


def test_the_audit_log_pages_with_cursor_and_keeps_before_id_for_one_release(
        client: TestClient, h: dict[str, str], job: dict[str, Any]) -> None:
    for action in ("pause", "resume", "pause", "resume"):
        assert client.post(f"/v1/jobs/{job['id']}/{action}", headers=h).status_code == 200
    # The job's own entries: the tenant's setup (creation, grants) is audited too.
    subject = {"subject": str(job["id"])}
    whole = client.get("/v1/audit", headers=h, params=subject).json()
    assert whole["next_cursor"] is None and len(whole["items"]) == 5
    first = client.get("/v1/audit", headers=h, params={**subject, "limit": 3}).json()
    assert first["next_cursor"] == str(first["items"][-1]["id"])
    assert first["next_before_id"] == first["items"][-1]["id"]       # deprecated alias
    second = client.get("/v1/audit", headers=h,
                        params={**subject, "limit": 3, "cursor": first["next_cursor"]}).json()
    assert [e["id"] for e in first["items"] + second["items"]] == [
        e["id"] for e in whole["items"]]
    assert second["next_cursor"] is None      # no empty last page
    old = client.get("/v1/audit", headers=h,
                     params={**subject, "limit": 3, "before_id": first["next_before_id"]}
                     ).json()
    assert old["items"] == second["items"]
    bad = client.get("/v1/audit", headers=h, params={"cursor": "x1"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "cursor"


def test_a_key_postgresql_cannot_store_is_a_422_not_a_500(
        client: TestClient, h: dict[str, str]) -> None:
    for path in ("/v1/jobs/by-key/a%00b", "/v1/jobs/by-key/%ED%A0%80"):
        got = client.get(path, headers=h)
        assert got.status_code in (404, 422), (path, got.status_code, got.text)
    assert client.get("/v1/jobs/by-key/", headers=h).status_code in (404, 405, 422)
