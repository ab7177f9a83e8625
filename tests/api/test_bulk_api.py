"""Labels, bulk actions and holds through the API."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot


def _add(client: TestClient, h: dict[str, str], key: str, **doc: Any) -> int:
    body = {**EMI, "key": key, **doc}
    response = client.post("/v1/jobs", json=body, headers=h)
    assert response.status_code == 201, response.text
    job_id: int = response.json()["id"]
    return job_id


def test_labels_are_set_patched_shown_and_filtered(client: TestClient,
                                                    h: dict[str, str]) -> None:
    a = _add(client, h, "a", labels={"bank": "42", "kind": "emi"})
    b = _add(client, h, "b", labels={"bank": "42"})
    _add(client, h, "c")
    assert client.get(f"/v1/jobs/{a}", headers=h).json()["labels"] == {"bank": "42",
                                                                       "kind": "emi"}
    listed = client.get("/v1/jobs?label=bank=42", headers=h).json()["items"]
    assert [j["id"] for j in listed] == [a, b]
    listed = client.get("/v1/jobs?label=bank=42&label=kind=emi", headers=h).json()["items"]
    assert [j["id"] for j in listed] == [a]
    version = client.get(f"/v1/jobs/{b}", headers=h).json()["version"]
    patched = client.patch(f"/v1/jobs/{b}", json={"labels": {"bank": "7"}},
                           headers={**h, "If-Match": str(version)})
    assert patched.status_code == 200, patched.text
    assert patched.json()["labels"] == {"bank": "7"}


@pytest.mark.parametrize("query", ["label=bank", "label==42", "label=bank=4%202"])
def test_a_bad_label_filter_is_422_naming_it(client: TestClient, h: dict[str, str],
                                             query: str) -> None:
    response = client.get(f"/v1/jobs?{query}", headers=h)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")


def test_bad_labels_in_a_document_are_422(client: TestClient, h: dict[str, str],
                                          conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    response = client.post("/v1/jobs", json={**EMI, "labels": {"bank": 42}}, headers=h)
    assert response.status_code == 422
    assert "labels.bank" in response.text
    assert snapshot(conn) == before


def test_bulk_dry_run_counts_then_pause_changes_only_the_callers_jobs(
        client: TestClient, h: dict[str, str], other: dict[str, str]) -> None:
    mine = [_add(client, h, f"emi:{i}", labels={"bank": "42"}) for i in range(3)]
    theirs = _add(client, other, "emi:0", labels={"bank": "42"})
    body = {"labels": {"bank": "42"}, "rate_limit": "sms-gateway",
            "host": "hooks.example.com", "key_prefix": "emi:", "priority": "normal"}
    dry = client.post("/v1/jobs/bulk/pause", json={**body, "dry_run": True}, headers=h)
    assert dry.status_code == 200, dry.text
    assert dry.json() == {"action": "pause", "dry_run": True, "count": 3,
                          "sample": ["emi:0", "emi:1", "emi:2"]}
    assert not any(client.get(f"/v1/jobs/{j}", headers=h).json()["paused"] for j in mine)
    done = client.post("/v1/jobs/bulk/pause", json=body, headers=h).json()
    assert done["count"] == 3
    assert all(client.get(f"/v1/jobs/{j}", headers=h).json()["paused"] for j in mine)
    assert not client.get(f"/v1/jobs/{theirs}", headers=other).json()["paused"]
    assert client.post("/v1/jobs/bulk/resume", json=body, headers=h).json()["count"] == 3
    assert client.post("/v1/jobs/bulk/cancel", json=body, headers=h).json()["count"] == 3
    assert client.get(f"/v1/jobs/{theirs}", headers=other).json()["active"]


@pytest.mark.parametrize(("body", "field"), [
    ({}, "filter"), ({"dry_run": True}, "filter"), ({"priority": "high"}, "priority"),
    ({"host": "https://x.example/"}, "host"), ({"labels": {"-": "x"}}, "labels.-"),
    ({"rate_limit": "Bad"}, "rate_limit"), ({"colour": "red"}, "colour"),
    ({"key_prefix": ""}, "key_prefix")])
def test_a_bad_or_empty_filter_is_422_and_changes_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        body: dict[str, Any], field: str) -> None:
    _add(client, h, "emi:0")
    before = snapshot(conn)
    response = client.post("/v1/jobs/bulk/pause", json=body, headers=h)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert field in response.text
    assert snapshot(conn) == before


def test_a_reader_may_not_bulk_pause(client: TestClient, reader: dict[str, str]) -> None:
    response = client.post("/v1/jobs/bulk/pause", json={"priority": "bulk"}, headers=reader)
    assert response.status_code == 403


def test_holds_on_a_limit_and_a_host_are_per_tenant(
        client: TestClient, h: dict[str, str], other: dict[str, str]) -> None:
    paused = client.post("/v1/limits/sms-gateway/pause", headers=h)
    assert paused.status_code == 200, paused.text
    assert paused.json() == {"kind": "rate_limit", "name": "sms-gateway", "held": True,
                             "changed": True}
    assert client.post("/v1/limits/sms-gateway/pause", headers=h).json()["changed"] is False
    assert client.post("/v1/hosts/Hooks.Example.com/pause", headers=h).json()["name"] == \
        "hooks.example.com"
    items = client.get("/v1/holds", headers=h).json()["items"]
    assert [(i["kind"], i["name"], i["queued"]) for i in items] == [
        ("host", "hooks.example.com", 0), ("rate_limit", "sms-gateway", 0)]
    assert client.get("/v1/holds", headers=other).json()["items"] == []
    assert client.post("/v1/limits/sms-gateway/resume", headers=h).json()["changed"] is True
    audited = [(i["action"], i["subject"]) for i in client.get("/v1/audit", headers=h)
               .json()["items"]]
    assert audited[:3] == [("rate_limit.resume", "sms-gateway"),
                           ("host.pause", "hooks.example.com"),
                           ("rate_limit.pause", "sms-gateway")]
    assert client.post("/v1/hosts/a:b/pause", headers=h).status_code == 422
    assert client.post("/v1/limits/Bad%20Name/pause", headers=h).status_code == 422


@pytest.mark.parametrize("lines", [3, 150])      # one INSERT, and the COPY path (>= 100)
def test_an_import_stores_labels_and_a_bulk_action_finds_them(
        client: TestClient, h: dict[str, str], lines: int) -> None:
    import json
    body = "\n".join(json.dumps({**EMI, "key": f"imp:{i}", "labels": {"batch": "7"}})
                     for i in range(lines))
    response = client.post("/v1/import", content=body.encode(),
                           headers={**h, "Content-Type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    listed = client.get("/v1/jobs?label=batch=7&limit=1000", headers=h).json()["items"]
    assert len(listed) == lines and listed[0]["labels"] == {"batch": "7"}
    dry = client.post("/v1/jobs/bulk/cancel", json={"labels": {"batch": "7"}, "dry_run": True},
                      headers=h)
    assert dry.json()["count"] == lines


def test_bulk_actions_are_audited_per_job_and_summarised(
        client: TestClient, h: dict[str, str]) -> None:
    a = _add(client, h, "emi:a", labels={"bank": "42"})
    client.post("/v1/jobs/bulk/pause", json={"labels": {"bank": "42"}}, headers=h)
    items = client.get("/v1/audit", headers=h).json()["items"]
    actions = [(i["action"], i["subject"]) for i in items]
    assert ("job.pause", str(a)) in actions
    summary = next(i for i in items if i["action"] == "job.bulk_pause")
    assert summary["after"] == {"filter": {"labels": {"bank": "42"}}, "changed": 1}


@pytest.mark.parametrize("prefix", ["a\u0000b", "a\ud800"])
def test_a_key_prefix_postgresql_cannot_store_is_a_422_not_a_500(
        client: TestClient, h: dict[str, str], prefix: str) -> None:
    _add(client, h, "a")
    for dry_run in (True, False):
        # escaped JSON: a lone surrogate can be spelled in JSON, not sent as UTF-8
        response = client.post("/v1/jobs/bulk/pause",
                               headers={**h, "Content-Type": "application/json"},
                               content=json.dumps({"key_prefix": prefix, "dry_run": dry_run}))
        assert response.status_code == 422, response.text
        assert "key_prefix" in response.text
    assert client.get("/v1/jobs?paused=true", headers=h).json()["items"] == []
