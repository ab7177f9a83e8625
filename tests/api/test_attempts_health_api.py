"""GET /v1/runs/{run_id} with its attempts, GET /v1/jobs/{id} with its health, and
GET /v1/jobs?unhealthy=true, on a real database: shapes, tenant isolation, bad input."""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.queue import claim_runs, record_retry, record_success
from crondepot.queue.outcome import record_final_failure
from tests.support.api import EMI

PROBLEM = "application/problem+json"


def _job_with_a_run(client: TestClient, conn: psycopg.Connection[Any],
                    h: dict[str, str], key: str = "k1") -> tuple[int, str]:
    job = client.post("/v1/jobs", json=EMI | {"key": key}, headers=h).json()["id"]
    run_id = client.post(f"/v1/jobs/{job}/trigger", headers=h).json()["run_id"]
    return job, run_id


def _claim(conn: psycopg.Connection[Any], owner: str) -> Any:
    conn.execute("UPDATE runs SET available_at = now(), due_at = now() WHERE status = 'queued'")
    (run,) = claim_runs(conn, owner=owner, shares={"normal": 1})
    return run


def test_a_run_shows_its_attempts(client: TestClient, conn: psycopg.Connection[Any],
                                  h: dict[str, str], other: dict[str, str]) -> None:
    _job, run_id = _job_with_a_run(client, conn, h)
    body = client.get(f"/v1/runs/{run_id}", headers=h).json()
    assert body["attempts"] == [] and body["worker"] is None and body["status"] == "queued"
    first = _claim(conn, "w1")
    record_retry(conn, first.run_id, first.lease_token, delay=0, error="HTTP 503",
                 error_class="TemporaryError")
    second = _claim(conn, "w2")
    record_success(conn, second.run_id, second.lease_token, second.attempt)
    response = client.get(f"/v1/runs/{run_id}", headers=h)
    assert response.status_code == 200
    body = response.json()
    assert body["worker"] == "w2" and body["status"] == "succeeded"
    assert [set(a) for a in body["attempts"]] == [
        {"attempt", "started_at", "ended_at", "outcome", "error", "error_class", "worker"}] * 2
    assert [(a["attempt"], a["outcome"], a["worker"], a["error"])
            for a in body["attempts"]] == [(1, "retried", "w1", "HTTP 503"),
                                            (2, "succeeded", "w2", None)]
    assert body["attempts"][0]["ended_at"].endswith(("Z", "+00:00"))
    lost = client.get(f"/v1/runs/{run_id}", headers=other)
    assert lost.status_code == 404 and lost.headers["content-type"] == PROBLEM


def test_openapi_documents_attempts_and_health(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert "attempts" in schemas["RunDetail"]["properties"]
    assert set(schemas["JobHealth"]["required"]) >= {"unhealthy", "consecutive_failures",
                                                     "alert_after_failures"}
    get_run = spec["paths"]["/v1/runs/{run_id}"]["get"]
    assert get_run["responses"]["200"]["content"]["application/json"]["schema"][
        "$ref"].endswith("/RunDetail")
    names = [p["name"] for p in spec["paths"]["/v1/jobs"]["get"]["parameters"]]
    assert "unhealthy" in names


def test_a_job_shows_its_health_and_unhealthy_jobs_are_listed(
        client: TestClient, conn: psycopg.Connection[Any], h: dict[str, str],
        other: dict[str, str]) -> None:
    job, _run = _job_with_a_run(client, conn, h)
    healthy, _ = _job_with_a_run(client, conn, h, key="k2")
    conn.execute("DELETE FROM runs WHERE job_id = %s", (healthy,))
    ok = _claim(conn, "w1")
    record_success(conn, ok.run_id, ok.lease_token, ok.attempt)
    health = client.get(f"/v1/jobs/{job}", headers=h).json()["health"]
    assert health == {"unhealthy": False, "consecutive_failures": 0,
                      "alert_after_failures": 3, "threshold_from": "tenant",
                      "last_success_at": health["last_success_at"],
                      "last_success_run_id": ok.run_id}
    assert health["last_success_at"] is not None
    for second in range(3):
        conn.execute("""
            INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,
                              available_at)
            SELECT id || ':' || (1791171000 + %(s)s), id, tenant_id, 'normal', now(), now(),
                   now() FROM jobs WHERE id = %(job)s""", {"job": job, "s": second})
        run = _claim(conn, "w1")
        record_final_failure(conn, run.run_id, run.lease_token, status="failed",
                             error="HTTP 400", error_class="PermanentError")
    health = client.get(f"/v1/jobs/{job}", headers=h).json()["health"]
    assert (health["unhealthy"], health["consecutive_failures"]) == (True, 3)
    assert health["last_success_run_id"] == ok.run_id
    listed = client.get("/v1/jobs", params={"unhealthy": "true"}, headers=h).json()
    assert [j["id"] for j in listed["items"]] == [job] and listed["next_cursor"] is None
    every = client.get("/v1/jobs", params={"unhealthy": "false"}, headers=h).json()
    assert {j["id"] for j in every["items"]} == {job, healthy}
    assert client.get("/v1/jobs", params={"unhealthy": "true"}, headers=other
                      ).json()["items"] == []
    assert client.get(f"/v1/jobs/{job}", headers=other).status_code == 404


def test_a_bad_unhealthy_value_is_a_422_naming_it(client: TestClient,
                                                  h: dict[str, str]) -> None:
    response = client.get("/v1/jobs", params={"unhealthy": "sometimes"}, headers=h)
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM
    assert "unhealthy" in response.text


def test_alert_after_failures_is_a_job_field(client: TestClient, conn: psycopg.Connection[Any],
                                             h: dict[str, str]) -> None:
    created = client.post("/v1/jobs", json=EMI | {"key": "a1", "alert_after_failures": 1},
                          headers=h)
    assert created.status_code == 201 and created.json()["alert_after_failures"] == 1
    job = created.json()["id"]
    plain = client.post("/v1/jobs", json=EMI | {"key": "a2"}, headers=h).json()
    assert plain["alert_after_failures"] is None
    read = client.get(f"/v1/jobs/{job}", headers=h).json()
    assert read["health"]["alert_after_failures"] == 1
    assert read["health"]["threshold_from"] == "job"
    patched = client.patch(f"/v1/jobs/{job}", json={"alert_after_failures": 7},
                           headers=h | {"If-Match": f'"{read["version"]}"',
                                        "Content-Type": "application/merge-patch+json"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["alert_after_failures"] == 7
    assert conn.execute("SELECT alert_after_failures FROM jobs WHERE id = %s",
                        (job,)).fetchone() == (7,)
    schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert "alert_after_failures" in schema["JobDocument"]["properties"]


def test_a_bad_alert_after_failures_is_a_422_naming_it(client: TestClient,
                                                       conn: psycopg.Connection[Any],
                                                       h: dict[str, str]) -> None:
    before = conn.execute("SELECT count(*) FROM jobs").fetchone()
    for bad in (0, 10_001, "3", True, 2.5):
        response = client.post("/v1/jobs", json=EMI | {"alert_after_failures": bad},
                               headers=h)
        assert response.status_code == 422, (bad, response.text)
        assert response.headers["content-type"] == PROBLEM
        assert "alert_after_failures" in response.text
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == before


def test_both_insert_paths_store_alert_after_failures(conn: psycopg.Connection[Any],
                                                      tenant_id: int) -> None:
    from crondepot.job.spec import JobSpec
    from crondepot.job.store import COPY_AT_LEAST, create_jobs

    def specs(prefix: str, count: int) -> list[JobSpec]:
        return [JobSpec.from_document({"key": f"{prefix}:{n}", "cron": "0 9 * * *",
                                       "tz": "UTC", "alert_after_failures": n % 3 or None,
                                       "target": {"type": "python", "handler": "a.b"}})
                for n in range(count)]
    create_jobs(conn, tenant_id, specs("one", 3))
    create_jobs(conn, tenant_id, specs("copy", COPY_AT_LEAST))
    rows = dict(conn.execute("SELECT key, alert_after_failures FROM jobs "
                             "WHERE key IN ('one:1', 'one:2', 'one:3', 'copy:1', 'copy:2', "
                             "'copy:3', 'one:0', 'copy:0')").fetchall())
    assert rows == {"one:0": None, "one:1": 1, "one:2": 2,
                    "copy:0": None, "copy:1": 1, "copy:2": 2, "copy:3": None}
