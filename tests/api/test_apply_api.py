"""Schedules as code over HTTP: PUT /v1/jobs/by-key/{key} (upsert, If-Match optional) and
POST /v1/apply (a set, with its plan), their refusals (RFC 9457, naming the document and
field, changing nothing), the write role, grants and tenant isolation."""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot

KEY = "bank42:48213:emi"
BILL = {**EMI, "key": "bank42:48213:bill", "cron": "0 10 1 * *"}


def test_put_by_key_creates_then_replaces_then_no_ops(client: TestClient,
                                                      h: dict[str, str]) -> None:
    doc = {k: v for k, v in EMI.items() if k != "key"}
    made = client.put(f"/v1/jobs/by-key/{KEY}", json=doc, headers=h)
    assert made.status_code == 201, made.text
    assert made.headers["Location"] == f"/v1/jobs/{made.json()['id']}"
    assert made.json()["key"] == KEY and made.headers["ETag"] == '"1"'
    same = client.put(f"/v1/jobs/by-key/{KEY}", json=doc, headers=h)
    assert same.status_code == 200 and same.json()["version"] == 1
    changed = client.put(f"/v1/jobs/by-key/{KEY}", json={**doc, "cron": "0 9 6 * *"},
                         headers={**h, "If-Match": '"1"'})
    assert changed.status_code == 200 and changed.json()["version"] == 2
    assert changed.json()["cron"] == "0 9 6 * *"
    # a field left out goes back to its default (the document replaces the stored one)
    plain = {k: v for k, v in doc.items() if k not in ("spread", "misfire")}
    reset = client.put(f"/v1/jobs/by-key/{KEY}", json={**plain, "cron": "0 9 6 * *"},
                       headers=h).json()
    assert reset["misfire"] == {"policy": "run_late"} and "spread" not in reset


def test_put_by_key_if_match_mismatch_is_412_and_changes_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    client.put(f"/v1/jobs/by-key/{KEY}", json=EMI, headers=h)
    before = snapshot(conn)
    stale = client.put(f"/v1/jobs/by-key/{KEY}", json={**EMI, "cron": "0 8 5 * *"},
                       headers={**h, "If-Match": '"7"'})
    assert stale.status_code == 412 and stale.json()["type"].endswith("/version-mismatch")
    missing = client.put("/v1/jobs/by-key/nope", json=EMI | {"key": "nope"},
                         headers={**h, "If-Match": '"1"'})
    assert missing.status_code == 412
    assert snapshot(conn) == before


def test_put_by_key_bad_input(client: TestClient, h: dict[str, str],
                              conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    other_key = client.put(f"/v1/jobs/by-key/{KEY}", json={**EMI, "key": "x"}, headers=h)
    assert other_key.status_code == 422 and other_key.json()["errors"][0]["field"] == "key"
    bad = client.put(f"/v1/jobs/by-key/{KEY}", json={**EMI, "tz": "Mars/Base"}, headers=h)
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "tz"
    ungranted = client.put(f"/v1/jobs/by-key/{KEY}", json={
        **EMI, "target": {"type": "python", "handler": "not.granted"}}, headers=h)
    assert ungranted.status_code == 422, ungranted.text
    assert snapshot(conn) == before


def test_put_by_key_needs_the_write_role(client: TestClient, reader: dict[str, str]) -> None:
    assert client.put(f"/v1/jobs/by-key/{KEY}", json=EMI, headers=reader).status_code == 403


def test_apply_plans_applies_and_prunes(client: TestClient, h: dict[str, str],
                                        conn: psycopg.Connection[Any]) -> None:
    body = {"scope": {"deploy": "reminders"}, "jobs": [EMI, BILL]}
    review = client.post("/v1/apply", json={**body, "dry_run": True}, headers=h)
    assert review.status_code == 200, review.text
    plan = review.json()
    assert plan["counts"]["created"] == 2 and plan["dry_run"] is True
    assert [c["key"] for c in plan["changes"]] == sorted([EMI["key"], BILL["key"]])
    assert all(c["id"] is None for c in plan["changes"])
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    done = client.post("/v1/apply", json=body, headers=h).json()
    assert done["counts"]["created"] == 2
    again = client.post("/v1/apply", json=body, headers=h).json()
    assert again["counts"]["changes"] == 0 and again["counts"]["unchanged"] == 2
    pruned = client.post("/v1/apply", json={**body, "jobs": [EMI], "prune": True},
                         headers=h).json()
    assert [(c["key"], c["action"]) for c in pruned["changes"]] == [(BILL["key"], "cancel")]
    entries = client.get("/v1/audit?action=job.apply", headers=h).json()
    assert len(entries["items"]) == 2


def test_apply_errors_name_the_index_and_field_and_change_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    client.post("/v1/apply", json={"scope": {"deploy": "reminders"}, "jobs": [EMI]}, headers=h)
    before = snapshot(conn)
    bad = client.post("/v1/apply", json={"scope": {"deploy": "reminders"}, "prune": True,
                                         "jobs": [BILL, {**EMI, "cron": "61 9 * * *"}]},
                      headers=h)
    assert bad.status_code == 422
    assert bad.json()["errors"][0]["field"] == "jobs[1].cron", bad.json()
    for body, field in (([], "body"), ({"jobs": [], "what": 1}, "what"),
                        ({"jobs": {}}, "jobs"), ({"jobs": [], "prune": "yes"}, "prune"),
                        ({"jobs": [], "scope": {"a": "b", "c": "d"}}, "scope"),
                        ({"jobs": [], "prune": True}, "prune"),
                        ({"jobs": [], "days": 0}, "days"),
                        ({"jobs": [{**EMI, "key": None}]}, "jobs[0].key")):
        answer = client.post("/v1/apply", json=body, headers=h)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.json()["errors"][0]["field"] == field, (body, answer.json())
    assert snapshot(conn) == before


def test_apply_is_per_tenant_and_needs_the_write_role(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        reader: dict[str, str]) -> None:
    body = {"scope": {"deploy": "reminders"}, "jobs": [EMI]}
    assert client.post("/v1/apply", json=body, headers=reader).status_code == 403
    client.post("/v1/apply", json=body, headers=h)
    theirs = client.post("/v1/apply", json=body, headers=other).json()
    assert theirs["counts"]["created"] == 1       # the same key, another tenant's job
    emptied = client.post("/v1/apply", json={**body, "jobs": [], "prune": True},
                          headers=other).json()
    assert emptied["counts"]["cancelled"] == 1
    mine = client.get(f"/v1/jobs/by-key/{KEY}", headers=h).json()
    assert mine["cancelled_at"] is None
