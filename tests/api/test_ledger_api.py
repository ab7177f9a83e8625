"""The ledger rule through the API: an import never loses its good lines, a payload PostgreSQL
measures as too large is a 422 (not a 500), replay says what it held back, and
GET /v1/verify checks the caller's own jobs."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot

# 427 bytes as compact JSON; 18,187 as PostgreSQL stores it (each 1e300 written out in full):
# before the fix it passed the size check and failed the table's CHECK, a 500.
HUGE_NUMBERS = {"a": [1e300] * 60}
NDJSON = {"Content-Type": "application/x-ndjson"}


def _lines(count: int, bad: dict[int, dict[str, Any]]) -> bytes:
    docs = [bad.get(n, {**EMI, "key": f"line-{n}"}) for n in range(1, count + 1)]
    return "".join(json.dumps(d) + "\n" for d in docs).encode()


def test_one_line_postgresql_would_refuse_does_not_drop_the_batch(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    body = _lines(10, {4: {**EMI, "key": "line-4", "payload": HUGE_NUMBERS}})
    response = client.post("/v1/import", content=body, headers={**h, **NDJSON})
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["created"], result["failed"]) == (9, 1)
    (error,) = result["errors"]
    assert (error["line"], error["field"]) == (4, "payload")
    assert "18187 bytes" in error["message"]
    keys = {k for (k,) in conn.execute("SELECT key FROM jobs")}
    assert keys == {f"line-{n}" for n in range(1, 11)} - {"line-4"}


def test_a_line_the_database_refuses_is_reported_and_the_rest_stored(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    # A constraint the validator does not know (an operator's own, say): the batch is stored
    # again line by line, and only the refused line is lost, with its line number.
    conn.execute("ALTER TABLE jobs ADD CONSTRAINT jobs_key_check1 "
                 "CHECK (key NOT LIKE 'bad-%')")
    body = _lines(6, {2: {**EMI, "key": "bad-2"}, 5: {**EMI, "key": "bad-5"}})
    result = client.post("/v1/import", content=body, headers={**h, **NDJSON}).json()
    assert (result["created"], result["failed"]) == (4, 2)
    assert [(e["line"], e["field"]) for e in result["errors"]] == [(2, "key"), (5, "key")]
    assert "database refused" in result["errors"][0]["message"]
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (4,)
    # A single create meeting the same constraint is a 422 naming the field, not a 500.
    before = snapshot(conn)
    response = client.post("/v1/jobs", json={**EMI, "key": "bad-x"}, headers=h)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "key"
    assert snapshot(conn) == before


def test_create_and_patch_with_a_payload_too_large_as_stored_answer_422(
        client: TestClient, h: dict[str, str], job: dict[str, Any],
        conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    created = client.post("/v1/jobs", json={**EMI, "key": "huge", "payload": HUGE_NUMBERS},
                          headers=h)
    assert created.status_code == 422, created.text
    assert created.headers["content-type"] == "application/problem+json"
    assert created.json()["errors"][0]["field"] == "payload"
    patched = client.patch(f"/v1/jobs/{job['id']}", json={"payload": HUGE_NUMBERS},
                           headers={**h, "If-Match": str(job["version"])})
    assert patched.status_code == 422, patched.text
    assert patched.json()["errors"][0]["field"] == "payload"
    assert snapshot(conn) == before


def test_verify_checks_the_callers_jobs_only(client: TestClient, h: dict[str, str],
                                             other: dict[str, str], job: dict[str, Any],
                                             conn: psycopg.Connection[Any]) -> None:
    clean = client.get("/v1/verify", headers=h)
    assert clean.status_code == 200, clean.text
    assert clean.json()["clean"] is True and clean.json()["unaccounted"] == []
    # Another tenant's job that lost a fire (moved past it with no row) shows only to it.
    conn.execute("UPDATE jobs SET created_at = now() - interval '40 days', "
                 "next_nominal_at = now() + interval '1 day', "
                 "next_run_at = now() + interval '1 day' WHERE id = %s", (job["id"],))
    mine = client.get("/v1/verify", params={"since": "2020-01-01T00:00:00Z"}, headers=h)
    assert mine.status_code == 422                  # more than 31 days
    assert mine.json()["errors"][0]["field"] == "since"
    # EMI fires at 09:00 IST on the 5th: a month back holds exactly one fire of it.
    (since,) = conn.execute("SELECT now() - interval '31 days' + interval '1 minute'"
                            ).fetchone()  # type: ignore[misc]
    month = {"since": since.isoformat()}
    report = client.get("/v1/verify", params=month, headers=h).json()
    assert (report["fires"], report["unaccounted_count"], report["clean"]) == (1, 1, False)
    (lost,) = report["unaccounted"]
    assert lost["job_id"] == job["id"] and lost["run_id"].startswith(f"{job['id']}:")
    theirs = client.get("/v1/verify", params=month, headers=other).json()
    assert theirs["fires"] == 0 and theirs["clean"]
    naive = client.get("/v1/verify", params={"until": "2026-01-01T00:00:00"}, headers=h)
    assert naive.status_code == 422 and naive.json()["errors"][0]["field"] == "until"


def test_replay_reports_the_runs_it_held_back(client: TestClient, h: dict[str, str],
                                              job: dict[str, Any],
                                              conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "available_at, status, finished_at, deadline_at, last_error, error_class) "
        "SELECT %s || ':' || n, %s, tenant_id, 'normal', now(), now(), now(), 'dead', now(), "
        "CASE WHEN n = 1 THEN now() - interval '1 h' END, 'timeout', 'OutcomeUnknown' "
        "FROM jobs, generate_series(1, 2) AS n WHERE id = %s",
        (str(job["id"]), job["id"], job["id"]))
    held = client.post("/v1/dead-letter/replay", json={"job_id": job["id"]}, headers=h).json()
    assert (held["count"], held["past_deadline"]) == (1, 1)
    assert held["past_deadline_run_ids"] == [f"{job['id']}:1"]
    sent = client.post("/v1/dead-letter/replay",
                       json={"job_id": job["id"], "ignore_deadline": True}, headers=h).json()
    assert (sent["count"], sent["past_deadline"]) == (1, 0)
    assert conn.execute("SELECT count(*) FROM runs WHERE status = 'queued'").fetchone() == (2,)
