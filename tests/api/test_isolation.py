"""Another tenant's jobs and runs answer 404 on every endpoint; read tokens cannot write."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot

JOB_ENDPOINTS = [
    ("GET", "/v1/jobs/{job}", None, {}),
    ("PATCH", "/v1/jobs/{job}", {"cron": "0 1 * * *"}, {"If-Match": "1"}),
    ("POST", "/v1/jobs/{job}/pause", None, {}),
    ("POST", "/v1/jobs/{job}/resume", None, {}),
    ("POST", "/v1/jobs/{job}/trigger", None, {}),
    ("DELETE", "/v1/jobs/{job}", None, {}),
    ("GET", "/v1/jobs/{job}/runs", None, {}),
    ("GET", "/v1/runs/{run}", None, {}),
]
WRITES = [
    ("POST", "/v1/jobs", EMI, {}),
    ("PATCH", "/v1/jobs/{job}", {"cron": "0 1 * * *"}, {"If-Match": "1"}),
    ("POST", "/v1/jobs/{job}/pause", None, {}),
    ("POST", "/v1/jobs/{job}/resume", None, {}),
    ("POST", "/v1/jobs/{job}/trigger", None, {}),
    ("DELETE", "/v1/jobs/{job}", None, {}),
    ("POST", "/v1/dead-letter/replay", {"job_id": 1}, {}),
    ("POST", "/v1/import", None, {"Content-Type": "application/x-ndjson"}),
    ("PUT", "/v1/limits/bank42-own", {"rate_per_second": 5}, {}),
]


@pytest.fixture
def run_id(client: TestClient, h: dict[str, str], job: dict[str, Any]) -> str:
    response = client.post(f"/v1/jobs/{job['id']}/trigger", headers=h)
    value: str = response.json()["run_id"]
    return value


@pytest.mark.parametrize(("method", "path", "body", "extra"), JOB_ENDPOINTS,
                         ids=[f"{m} {p}" for m, p, _, _ in JOB_ENDPOINTS])
def test_another_tenants_job_or_run_is_not_found(
        method: str, path: str, body: Any, extra: dict[str, str], client: TestClient,
        job: dict[str, Any], run_id: str, other: dict[str, str], h: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    url = path.format(job=job["id"], run=run_id)
    theirs = client.request(method, url, json=body, headers={**other, **extra})
    assert theirs.status_code == 404, theirs.text
    unknown = client.request(method, path.format(job=10**9, run="999:1"), json=body,
                             headers={**other, **extra})
    assert unknown.status_code == 404
    # the same answer for "exists elsewhere" and "does not exist": nothing is revealed
    assert theirs.json()["title"] == unknown.json()["title"]
    assert snapshot(conn) == before
    assert client.request("GET", f"/v1/jobs/{job['id']}", headers=h).status_code == 200


def test_lists_stats_and_dead_letter_show_only_the_callers_tenant(
        client: TestClient, job: dict[str, Any], run_id: str, other: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    conn.execute("UPDATE runs SET status = 'dead', finished_at = now(), attempt = 6")
    assert client.get("/v1/jobs", headers=other).json()["items"] == []
    assert client.get("/v1/dead-letter", headers=other).json()["items"] == []
    stats = client.get("/v1/stats", headers=other).json()
    assert stats["dead_letter"] == 0
    replay = client.post("/v1/dead-letter/replay", json={"run_ids": [run_id]}, headers=other)
    assert replay.status_code == 200 and replay.json()["count"] == 0
    status = conn.execute("SELECT status FROM runs").fetchone()
    assert status is not None and status[0] == "dead"
    # the same key in another tenant is another job
    theirs = client.post("/v1/jobs", json=EMI, headers=other)
    assert theirs.status_code == 201 and theirs.json()["id"] != job["id"]


@pytest.mark.parametrize(("method", "path", "body", "extra"), WRITES,
                         ids=[f"{m} {p}" for m, p, _, _ in WRITES])
def test_a_read_token_may_not_write(
        method: str, path: str, body: Any, extra: dict[str, str], client: TestClient,
        job: dict[str, Any], reader: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    response = client.request(method, path.format(job=job["id"]), json=body,
                              headers={**reader, **extra})
    assert response.status_code == 403
    assert response.json()["type"] == "https://crondepot.dev/problems/forbidden"
    assert snapshot(conn) == before


def test_a_read_token_may_read(client: TestClient, job: dict[str, Any],
                               reader: dict[str, str]) -> None:
    for path in (f"/v1/jobs/{job['id']}", "/v1/jobs", f"/v1/jobs/{job['id']}/runs",
                 "/v1/dead-letter", "/v1/stats", "/v1/limits"):
        assert client.get(path, headers=reader).status_code == 200, path
