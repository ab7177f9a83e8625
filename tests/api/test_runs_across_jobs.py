"""GET /v1/runs (a tenant's runs across jobs) and POST /v1/runs/{run_id}/retry, on a real
database: every filter's exact set of run ids, the pages of next_cursor, tenant isolation,
bad input (422, nothing changes), and a retried failed run claimed again with its run id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.queue import claim_runs
from crondepot.runs.reads import encode_run_cursor
from tests.support.api import bearer, granted_tenant, snapshot
from tests.support.runs import BANK42, RUNS, newest_first, seed_runs

PROBLEM = "application/problem+json"


@pytest.fixture
def seeded(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    bank, acme = granted_tenant(conn, "bank42"), granted_tenant(conn, "acme")
    ids, jobs = seed_runs(conn)
    return {"ids": ids, "jobs": jobs, "bank": bearer(bank.token), "acme": bearer(acme.token)}


def _ago(minutes: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).isoformat()


def _listed(client: TestClient, headers: dict[str, str], **params: Any) -> list[str]:
    response = client.get("/v1/runs", params=params, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["next_cursor"] is None
    return [item["run_id"] for item in body["items"]]


def _ids(seeded: dict[str, Any], labels: list[str]) -> list[str]:
    return [seeded["ids"][label] for label in newest_first(labels)]


def test_filters_give_exactly_their_runs_newest_first(client: TestClient,
                                                      seeded: dict[str, Any]) -> None:
    bank = seeded["bank"]
    assert _listed(client, bank) == _ids(seeded, BANK42)
    assert _listed(client, bank, status="failed", since=_ago(60)) == \
        _ids(seeded, ["a_f1", "b_f1", "a_f2"])
    assert _listed(client, bank, status="failed") == \
        _ids(seeded, ["a_f1", "b_f1", "a_f2", "a_f3"])
    assert _listed(client, bank, status="failed", since=_ago(60), until=_ago(15)) == \
        _ids(seeded, ["b_f1", "a_f2"])
    assert _listed(client, bank, status="failed", job_id=seeded["jobs"]["A"]) == \
        _ids(seeded, ["a_f1", "a_f2", "a_f3"])
    assert _listed(client, bank, error="404 not") == _ids(seeded, ["a_f1", "a_f3"])
    assert _listed(client, bank, error="OutcomeUnknown") == _ids(seeded, ["b_d1"])
    for status in ("succeeded", "dead", "skipped", "queued", "running"):
        expected = [label for label in BANK42 if RUNS[label][1] == status]
        assert _listed(client, bank, status=status) == _ids(seeded, expected), status
    first = client.get("/v1/runs", params={"status": "dead"}, headers=bank).json()["items"][0]
    assert first["job_key"] == "job-B" and first["last_error"].startswith("timeout")
    assert first["ended_at"] == first["finished_at"]


def test_pages_walk_every_run_once_in_order(client: TestClient,
                                            seeded: dict[str, Any]) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        body = client.get("/v1/runs", params=params, headers=seeded["bank"]).json()
        assert len(body["items"]) <= 2
        seen += [item["run_id"] for item in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == _ids(seeded, BANK42) and pages == 5       # 9 runs, 2 a page
    # a filter holds across pages
    page = client.get("/v1/runs", params={"status": "failed", "limit": 3},
                      headers=seeded["bank"]).json()
    rest = client.get("/v1/runs", params={"status": "failed", "cursor": page["next_cursor"]},
                      headers=seeded["bank"]).json()
    assert [r["run_id"] for r in page["items"] + rest["items"]] == \
        _ids(seeded, ["a_f1", "b_f1", "a_f2", "a_f3"])
    assert rest["next_cursor"] is None


def test_another_tenants_runs_are_never_listed_nor_retried(
        client: TestClient, conn: psycopg.Connection[Any], seeded: dict[str, Any]) -> None:
    assert seeded["ids"]["d_f1"] not in _listed(client, seeded["bank"])
    assert _listed(client, seeded["bank"], job_id=seeded["jobs"]["D"]) == []
    assert _listed(client, seeded["acme"]) == [seeded["ids"]["d_f1"]]
    before = snapshot(conn)
    response = client.post(f"/v1/runs/{seeded['ids']['d_f1']}/retry", headers=seeded["bank"])
    assert response.status_code == 404 and response.headers["content-type"] == PROBLEM
    assert snapshot(conn) == before
    assert client.post("/v1/runs/1:1/retry", headers=seeded["bank"]).status_code == 404


@pytest.mark.parametrize("params, field", [
    ({"status": "broken"}, "status"),
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
    ({"job_id": str(2**63)}, "job_id"),
    ({"job_id": "9" * 5000}, "job_id"),
    ({"limit": "0"}, "limit"),
    ({"limit": "1001"}, "limit"),
    ({"limit": "9" * 40}, "limit"),
    ({"cursor": "not-a-cursor"}, "cursor"),
    ({"cursor": encode_run_cursor(datetime.now(UTC), "x")[:-3] + "!!!"}, "cursor"),
    ({"since": "yesterday"}, "since"),
    ({"error": ""}, "error"),
    ({"error": "a\x00b"}, "error"),
])
def test_bad_filters_are_422_naming_the_field(client: TestClient, conn: psycopg.Connection[Any],
                                             seeded: dict[str, Any], params: dict[str, str],
                                             field: str) -> None:
    before = snapshot(conn)
    response = client.get("/v1/runs", params=params, headers=seeded["bank"])
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert field in body["detail"] or field in str(body.get("errors")), body
    assert snapshot(conn) == before


def test_a_retried_failed_run_is_claimed_again_with_its_run_id(
        client: TestClient, conn: psycopg.Connection[Any], seeded: dict[str, Any]) -> None:
    run_id = seeded["ids"]["a_f1"]
    response = client.post(f"/v1/runs/{run_id}/retry", headers=seeded["bank"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["previous_status"] == "failed" and body["run"]["status"] == "queued"
    assert body["run"]["attempt"] == 0 and body["run"]["last_error"] is None
    claimed = claim_runs(conn, owner="w", shares={"normal": 10})
    assert [(r.run_id, r.attempt) for r in claimed] == [(run_id, 1)]
    # a dead one too (the replay's rule), and an empty JSON body is the default
    dead = seeded["ids"]["b_d1"]
    assert client.post(f"/v1/runs/{dead}/retry", json={},
                       headers=seeded["bank"]).json()["previous_status"] == "dead"


@pytest.mark.parametrize("label, status", [("a_s1", "succeeded"), ("a_q1", "queued"),
                                           ("a_k1", "skipped")])
def test_retry_of_a_run_neither_failed_nor_dead_is_409(
        client: TestClient, conn: psycopg.Connection[Any], seeded: dict[str, Any],
        label: str, status: str) -> None:
    before = snapshot(conn)
    response = client.post(f"/v1/runs/{seeded['ids'][label]}/retry", headers=seeded["bank"])
    assert response.status_code == 409 and response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["type"].endswith("/run-not-retryable") and body["run_status"] == status
    assert snapshot(conn) == before


def test_retry_past_the_misfire_deadline_needs_ignore_deadline(
        client: TestClient, conn: psycopg.Connection[Any], seeded: dict[str, Any]) -> None:
    run_id = seeded["ids"]["a_f2"]
    conn.execute("UPDATE runs SET deadline_at = now() - interval '1 minute' WHERE run_id = %s",
                 (run_id,))
    before = snapshot(conn)
    refused = client.post(f"/v1/runs/{run_id}/retry", headers=seeded["bank"])
    assert refused.status_code == 409 and refused.json()["type"].endswith("/run-past-deadline")
    assert snapshot(conn) == before
    bad = client.post(f"/v1/runs/{run_id}/retry", json={"ignore_deadline": "maybe", "x": 1},
                      headers=seeded["bank"])
    assert bad.status_code == 422 and snapshot(conn) == before
    sent = client.post(f"/v1/runs/{run_id}/retry", json={"ignore_deadline": True},
                       headers=seeded["bank"])
    assert sent.status_code == 200
    assert conn.execute("SELECT status, deadline_at FROM runs WHERE run_id = %s",
                        (run_id,)).fetchone() == ("queued", None)


def test_stats_count_runs_ended_in_the_last_hour_by_outcome(
        client: TestClient, seeded: dict[str, Any]) -> None:
    stats = client.get("/v1/stats", headers=seeded["bank"]).json()
    assert stats["finished_last_hour"] == {"succeeded": 2, "failed": 3, "dead": 1,
                                           "skipped": 1}
    assert client.get("/v1/stats", headers=seeded["acme"]).json()["finished_last_hour"] == {
        "succeeded": 0, "failed": 1, "dead": 0, "skipped": 0}


def test_retries_are_audited(client: TestClient, seeded: dict[str, Any]) -> None:
    for label in ("a_f1", "b_d1"):
        assert client.post(f"/v1/runs/{seeded['ids'][label]}/retry",
                           headers=seeded["bank"]).status_code == 200
    items = client.get("/v1/audit", headers=seeded["bank"]).json()["items"]
    done = {(e["action"], e["subject"]) for e in items}
    assert ("run.retry", seeded["ids"]["a_f1"]) in done
    assert ("run.replay", seeded["ids"]["b_d1"]) in done
