"""Notification channels and notices over HTTP (docs/notices.md): a tenant adds, lists,
reads and removes its channels and reads its notices; bad input is a 422 naming the field
and stores nothing; another tenant's channel is a 404 that changes nothing, and it never
hears of this tenant's jobs."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.notices.channels import MAX_CHANNELS
from tests.support.jobs import add_job
from tests.support.notices import dead_runs, sender
from tests.support.target_server import Route, TargetServer

HOOK = {"type": "webhook", "url": "https://hooks.bank42.example/crondepot"}
MAIL = {"type": "email", "address": "payments-oncall@bank42.example"}


def _channels(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT tenant_id, kind, address FROM notice_channels "
                        "ORDER BY id").fetchall()


def test_channels_are_added_listed_read_and_removed(client: TestClient,
                                                    h: dict[str, str]) -> None:
    made = client.post("/v1/notification-channels", json=HOOK, headers=h)
    assert made.status_code == 201, made.text
    hook = made.json()
    assert made.headers["Location"] == f"/v1/notification-channels/{hook['id']}"
    assert (hook["type"], hook["url"]) == ("webhook", HOOK["url"]) and "address" not in hook
    again = client.post("/v1/notification-channels", json=HOOK, headers=h)
    assert (again.status_code, again.json()) == (200, hook)          # the one there
    mail = client.post("/v1/notification-channels", json=MAIL, headers=h).json()
    assert mail["address"] == MAIL["address"] and "url" not in mail
    listed = client.get("/v1/notification-channels", headers=h).json()["items"]
    assert listed == [hook, mail]
    assert client.get(f"/v1/notification-channels/{mail['id']}", headers=h).json() == mail
    assert client.delete(f"/v1/notification-channels/{hook['id']}",
                         headers=h).status_code == 204
    gone = client.get(f"/v1/notification-channels/{hook['id']}", headers=h)
    assert gone.status_code == 404
    assert gone.headers["content-type"] == "application/problem+json"
    assert client.delete(f"/v1/notification-channels/{hook['id']}",
                         headers=h).status_code == 404


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"type": "webhook", "url": "ftp://files.bank42.example/x"}, "url", "http or https"),
    ({"type": "webhook", "url": "http://169.254.169.254/latest/meta-data"}, "url",
     "may not call"),
    ({"type": "webhook", "url": "http://10.0.0.7/hook"}, "url", "may not call"),
    ({"type": "webhook", "url": "http://[::1]:8080/hook"}, "url", "may not call"),
    ({"type": "webhook", "url": "https://user:pw@hooks.bank42.example/"}, "url",
     "credentials"),
    ({"type": "webhook", "url": "not a url"}, "url", ""),
    ({"type": "webhook"}, "url", "expected url"),
    ({"type": "webhook", "address": "ops@bank42.example"}, "address", "not a field"),
    ({"type": "email", "address": "ops@bank42.example", "url": "https://x.example/"}, "url",
     "not a field"),
    ({"type": "email", "address": "ops at bank42"}, "address", "e-mail address"),
    ({"type": "email", "address": "ops@bank42.example\r\nBcc: all@x.example"}, "address",
     "e-mail address"),
    ({"type": "email", "address": "a@b.example, c@d.example"}, "address", "e-mail address"),
    ({"type": "email"}, "address", "e-mail address"),
    ({"type": "email", "address": "ops@bank42.example", "url": None}, "url", "null"),
    ({"type": "sms", "address": "+919800000000"}, "type", ""),
    ({"type": "email", "address": "ops@bank42.example", "cc": "x"}, "cc", ""),
])
def test_bad_input_names_the_field_and_stores_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        body: dict[str, Any], field: str, words: str) -> None:
    response = client.post("/v1/notification-channels", json=body, headers=h)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"] == "https://crondepot.dev/problems/validation"
    assert field in [e["field"] for e in problem["errors"]], problem
    assert words in problem["detail"]
    assert _channels(conn) == []


def test_a_read_token_may_not_add_and_the_channels_are_capped(
        client: TestClient, h: dict[str, str], reader: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    assert client.post("/v1/notification-channels", json=MAIL,
                       headers=reader).status_code == 403
    for i in range(MAX_CHANNELS):
        assert client.post("/v1/notification-channels", headers=h, json={
            "type": "email", "address": f"ops{i}@bank42.example"}).status_code == 201
    over = client.post("/v1/notification-channels", json=MAIL, headers=h)
    assert over.status_code == 422 and f"at most {MAX_CHANNELS}" in over.json()["detail"]
    assert len(_channels(conn)) == MAX_CHANNELS


def test_another_tenants_channel_is_not_found_and_never_told(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWLIST_ENV, "127.0.0.1/32")
    receiver = TargetServer()
    try:
        mine = client.post("/v1/notification-channels", headers=h,
                           json={"type": "webhook", "url": receiver.url("/mine")}).json()
        before = _channels(conn)
        for method in ("get", "delete"):
            answer = client.request(method, f"/v1/notification-channels/{mine['id']}",
                                     headers=other)
            assert answer.status_code == 404
            assert answer.headers["content-type"] == "application/problem+json"
        assert client.get("/v1/notification-channels", headers=other).json()["items"] == []
        assert _channels(conn) == before                          # nothing changed
        # The other tenant's failures are not told on this tenant's channel, and this
        # tenant's notices are not the other's to read.
        theirs = conn.execute("SELECT id FROM tenants WHERE name = 'otherbank'").fetchone()
        ours = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()
        assert theirs is not None and ours is not None
        dead_runs(conn, add_job(conn, theirs[0], key="theirs", cron="0 9 * * *"), 1)
        assert sender().turn(conn).composed == 0 and receiver.received == []
        dead_runs(conn, add_job(conn, ours[0], key="ours", cron="0 9 * * *"), 1,
                  first=1_800_000_000)
        assert sender().turn(conn).sent == 1
        assert [r.path for r in receiver.received] == ["/mine"]
        assert client.get("/v1/notices", headers=other).json() == {"items": [], "held": 0}
    finally:
        receiver.close()


def test_notices_show_sent_pending_and_failed_with_the_last_error(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWLIST_ENV, "127.0.0.1/32")
    receiver = TargetServer()
    receiver.routes["/down"] = Route(status=503, body=b"maintenance")
    receiver.routes["/gone"] = Route(status=404)
    try:
        for path in ("/ok", "/down", "/gone"):
            client.post("/v1/notification-channels", headers=h,
                        json={"type": "webhook", "url": receiver.url(path)})
        tenant = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()
        assert tenant is not None
        job = add_job(conn, tenant[0], key="emi", cron="0 9 * * *")
        (run_id,) = dead_runs(conn, job, 1)
        sender().turn(conn)
        page = client.get("/v1/notices", headers=h).json()
        by = {n["status"]: n for n in page["items"]}
        assert sorted(by) == ["failed", "pending", "sent"] and page["held"] == 0
        assert by["sent"]["last_error"] is None and by["sent"]["sent_at"] is not None
        assert "HTTP 503" in by["pending"]["last_error"]
        assert by["pending"]["next_attempt_at"] is not None
        assert "HTTP 404" in by["failed"]["last_error"]
        assert by["sent"]["events"][0]["run_id"] == run_id
        assert by["sent"]["type"] == "notice" and by["sent"]["job_id"] == job
        failed = client.get("/v1/notices?status=failed", headers=h).json()["items"]
        assert [n["id"] for n in failed] == [by["failed"]["id"]]
        newest = page["items"][0]["id"]
        older = client.get(f"/v1/notices?before={newest}&limit=1", headers=h).json()["items"]
        assert [n["id"] for n in older] == [page["items"][1]["id"]]
        assert client.get("/v1/notices?status=lost", headers=h).status_code == 422
        # Removing a channel takes its notices with it.
        gone = by["failed"]["channel_id"]
        assert client.delete(f"/v1/notification-channels/{gone}", headers=h).status_code == 204
        left = client.get("/v1/notices", headers=h).json()["items"]
        assert sorted(n["status"] for n in left) == ["pending", "sent"]
    finally:
        receiver.close()
