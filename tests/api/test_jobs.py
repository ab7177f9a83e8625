"""Jobs over HTTP: create (idempotent), read, list, patch, pause, resume, trigger, cancel."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot


def test_create_returns_the_job_with_its_next_run(job: dict[str, Any]) -> None:
    assert job["key"] == EMI["key"]
    assert job["cron"] == "0 9 5 * *" and job["tz"] == "Asia/Kolkata"
    assert job["version"] == 1 and job["paused"] is False and job["active"] is True
    nominal = datetime.fromisoformat(job["next_nominal_at"])
    assert nominal.day == 5 or nominal.day == 4       # 09:00 IST on the 5th is 03:30 UTC
    assert datetime.fromisoformat(job["next_run_at"]) >= nominal


def test_create_again_with_the_same_document_returns_the_same_job(
        client: TestClient, h: dict[str, str], job: dict[str, Any]) -> None:
    again = client.post("/v1/jobs", json=EMI, headers=h)
    assert again.status_code == 200
    assert again.json()["id"] == job["id"]


def test_create_with_the_key_and_another_document_is_a_conflict_naming_the_key(
        client: TestClient, h: dict[str, str], job: dict[str, Any],
        conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    response = client.post("/v1/jobs", json={**EMI, "cron": "0 10 5 * *"}, headers=h)
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"] == "https://crondepot.dev/problems/key-conflict"
    assert problem["key"] == EMI["key"] and EMI["key"] in problem["detail"]
    assert snapshot(conn) == before


def test_ten_concurrent_identical_creates_make_one_job(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(lambda _: client.post("/v1/jobs", json=EMI, headers=h),
                                  range(10)))
    assert sorted(r.status_code for r in responses) == [200] * 9 + [201]
    assert len({r.json()["id"] for r in responses}) == 1
    row = conn.execute("SELECT count(*) FROM jobs").fetchone()
    assert row is not None and row[0] == 1


def test_get_and_list_with_filters_and_cursor(client: TestClient, h: dict[str, str]) -> None:
    ids = []
    for n in range(5):
        doc = {"key": f"k{n}", "cron": "*/5 * * * *", "tz": "UTC",
               "priority": "bulk" if n % 2 else "normal",
               "target": {"type": "python", "handler": "sms.send"}}
        ids.append(client.post("/v1/jobs", json=doc, headers=h).json()["id"])
    assert client.get(f"/v1/jobs/{ids[0]}", headers=h).json()["key"] == "k0"
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/v1/jobs", params=params, headers=h).json()
        seen += [j["id"] for j in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    bulk = client.get("/v1/jobs", params={"priority": "bulk"}, headers=h).json()["items"]
    assert [j["key"] for j in bulk] == ["k1", "k3"]
    prefixed = client.get("/v1/jobs", params={"key_prefix": "k4"}, headers=h).json()["items"]
    assert [j["key"] for j in prefixed] == ["k4"]


def test_patch_needs_if_match_and_rejects_a_stale_version(
        client: TestClient, h: dict[str, str], job: dict[str, Any],
        conn: psycopg.Connection[Any]) -> None:
    url = f"/v1/jobs/{job['id']}"
    before = snapshot(conn)
    missing = client.patch(url, json={"cron": "0 10 5 * *"}, headers=h)
    assert missing.status_code == 428
    stale = client.patch(url, json={"cron": "0 10 5 * *"}, headers={**h, "If-Match": '"7"'})
    assert stale.status_code == 412 and stale.json()["current_version"] == 1
    assert snapshot(conn) == before
    done = client.patch(url, json={"cron": "0 10 5 * *"}, headers={**h, "If-Match": '"1"'})
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["version"] == 2 and body["cron"] == "0 10 5 * *"
    assert body["payload"] == EMI["payload"]                    # untouched fields kept
    assert body["next_nominal_at"] != job["next_nominal_at"]    # recomputed
    assert done.headers["etag"] == '"2"'


def test_patch_validates_the_merged_document(
        client: TestClient, h: dict[str, str], job: dict[str, Any],
        conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    response = client.patch(f"/v1/jobs/{job['id']}", json={"misfire": {
        "policy": "skip_after_local_time", "until": "25:00"}}, headers={**h, "If-Match": "1"})
    assert response.status_code == 422
    assert response.json()["errors"][0]["field"] == "misfire.until"
    assert snapshot(conn) == before


def test_pause_resume_trigger_cancel(client: TestClient, h: dict[str, str],
                                     job: dict[str, Any], conn: psycopg.Connection[Any]) -> None:
    url = f"/v1/jobs/{job['id']}"
    paused = client.post(f"{url}/pause", headers=h).json()
    assert paused["paused"] is True and paused["version"] == 2
    resumed = client.post(f"{url}/resume", headers=h).json()
    assert resumed["paused"] is False and resumed["version"] == 3
    assert resumed["next_run_at"] is not None
    triggered = client.post(f"{url}/trigger", headers=h)
    assert triggered.status_code == 201, triggered.text
    run = triggered.json()["run"]
    assert run["status"] == "queued" and run["job_id"] == job["id"]
    seconds = int(datetime.fromisoformat(run["nominal_at"]).timestamp())
    assert run["run_id"] == f"{job['id']}:{seconds}"
    assert run["due_at"] == run["nominal_at"]
    assert client.get(f"/v1/runs/{run['run_id']}", headers=h).json()["run_id"] == run["run_id"]
    runs = client.get(f"{url}/runs", headers=h).json()["items"]
    assert [r["run_id"] for r in runs] == [run["run_id"]]
    assert client.delete(url, headers=h).status_code == 204
    cancelled = client.get(url, headers=h).json()
    assert cancelled["active"] is False and cancelled["cancelled_at"] is not None
    status = conn.execute("SELECT status FROM runs").fetchone()
    assert status is not None and status[0] == "cancelled"       # history kept, not sent
    assert client.delete(url, headers=h).status_code == 204       # idempotent
    assert client.post(f"{url}/trigger", headers=h).status_code == 409
    assert client.post(f"{url}/pause", headers=h).status_code == 409
