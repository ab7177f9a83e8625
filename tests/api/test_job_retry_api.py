"""A job's retry curve over HTTP: created, read back, patched under either name, and every
refusal a 422 naming the field that changes nothing."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot

REMINDER = {**{k: v for k, v in EMI.items() if k != "max_attempts"},
            "key": "bank42:48213:card-due",
            "retry": {"max_attempts": 4, "base_s": 60, "cap_s": 1800}}


def _create(client: TestClient, h: dict[str, str], doc: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=doc, headers=h)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _patch(client: TestClient, h: dict[str, str], job: dict[str, Any],
           patch: dict[str, Any]) -> Any:
    return client.patch(f"/v1/jobs/{job['id']}", json=patch,
                        headers={**h, "If-Match": f'"{job["version"]}"'})


def _curve(conn: psycopg.Connection[Any], job_id: int) -> tuple[Any, ...]:
    row = conn.execute("SELECT max_attempts, retry_base_s, retry_cap_s FROM jobs "
                       "WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return tuple(row)


def test_a_created_curve_is_stored_and_read_back(client: TestClient, h: dict[str, str],
                                                 conn: psycopg.Connection[Any]) -> None:
    job = _create(client, h, REMINDER)
    assert job["retry"] == {"max_attempts": 4, "base_s": 60, "cap_s": 1800}
    assert "max_attempts" not in job                  # one number, under one name
    assert _curve(conn, job["id"]) == (4, 60.0, 1800.0)
    read = client.get(f"/v1/jobs/{job['id']}", headers=h).json()
    assert read["retry"] == job["retry"]
    again = client.post("/v1/jobs", json=REMINDER, headers=h)      # idempotent: same job
    assert again.status_code == 200 and again.json()["id"] == job["id"]


def test_without_a_curve_a_job_has_today_s_and_the_old_name_still_works(
        client: TestClient, h: dict[str, str]) -> None:
    job = _create(client, h, {**EMI, "key": "old-style", "max_attempts": 3})
    assert job["retry"] == {"max_attempts": 3, "base_s": 30, "cap_s": 600}
    plain = {k: v for k, v in EMI.items() if k != "max_attempts"}
    assert _create(client, h, {**plain, "key": "plain"})["retry"] == {
        "max_attempts": 6, "base_s": 30, "cap_s": 600}


def test_a_patch_naming_either_name_replaces_the_stored_number(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    job = _create(client, h, REMINDER)
    done = _patch(client, h, job, {"max_attempts": 2})
    assert done.status_code == 200, done.text
    job = done.json()
    assert job["retry"] == {"max_attempts": 2, "base_s": 60, "cap_s": 1800}
    job = _patch(client, h, job, {"retry": {"base_s": 0.5, "cap_s": 2.5}}).json()
    assert job["retry"] == {"max_attempts": 6, "base_s": 0.5, "cap_s": 2.5}   # whole
    job = _patch(client, h, job, {"retry": None}).json()
    assert job["retry"] == {"max_attempts": 6, "base_s": 30, "cap_s": 600}
    assert _curve(conn, job["id"]) == (6, 30.0, 600.0)


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"retry": {"base_s": 60, "cap_s": 1}}, "retry.cap_s",
     "expected retry.cap_s to be a number ≥ retry.base_s (60), got 1"),
    ({"retry": {"max_attempts": 3}, "max_attempts": 3}, "max_attempts", "not both"),
    ({"retry": None, "max_attempts": 3}, "max_attempts", "not both"),
    ({"retry": {"base_s": 0}}, "retry.base_s", "above 0"),
    ({"retry": {"cap_s": 10**6}}, "retry.cap_s", "at most 86400"),
    ({"retry": {"max_attempts": 101}}, "retry.max_attempts", "from 1 to 100, got 101"),
    ({"retry": {"jitter": "full"}}, "retry.jitter", "unknown field"),
])
def test_a_bad_curve_is_a_422_that_changes_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        body: dict[str, Any], field: str, words: str) -> None:
    job = _create(client, h, REMINDER)
    before = snapshot(conn)
    created = client.post("/v1/jobs", json={**REMINDER, "key": "other", **body}, headers=h)
    patched = _patch(client, h, job, body)
    for response in (created, patched):
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["errors"][0]["field"] == field, problem
        assert words in problem["detail"], problem
    assert snapshot(conn) == before
