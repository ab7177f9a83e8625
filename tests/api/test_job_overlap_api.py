"""A job's overlap policy over HTTP: created, read back, patched (the job's queued runs
carry the new one), and a bad value a 422 naming the field that changes nothing."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api.models import NIGHTLY_RECONCILIATION
from tests.support.api import EMI, snapshot


def test_the_default_is_allow(client: TestClient, h: dict[str, str]) -> None:
    response = client.post("/v1/jobs", json={**EMI, "key": "bank42:overlap:default"},
                           headers=h)
    assert response.status_code == 201, response.text
    assert response.json()["overlap"] == "allow"


def test_created_read_back_and_patched(client: TestClient, h: dict[str, str],
                                       conn: psycopg.Connection[Any]) -> None:
    response = client.post("/v1/jobs", json=NIGHTLY_RECONCILIATION, headers=h)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["overlap"] == "skip"
    assert client.get(f"/v1/jobs/{job['id']}", headers=h).json()["overlap"] == "skip"
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at, overlap) SELECT id || ':1', id, tenant_id, priority, now(), "
                 "now(), now(), overlap FROM jobs WHERE id = %s", (job["id"],))
    patched = client.patch(f"/v1/jobs/{job['id']}", json={"overlap": "buffer_one"},
                           headers={**h, "If-Match": f'"{job["version"]}"'})
    assert patched.status_code == 200, patched.text
    assert patched.json()["overlap"] == "buffer_one"
    assert conn.execute("SELECT overlap FROM runs WHERE job_id = %s",
                        (job["id"],)).fetchall() == [("buffer_one",)]
    # null resets it to the default
    again = client.patch(f"/v1/jobs/{job['id']}", json={"overlap": None},
                         headers={**h, "If-Match": f'"{patched.json()["version"]}"'})
    assert again.status_code == 200, again.text
    assert again.json()["overlap"] == "allow"


@pytest.mark.parametrize("value", ["forbid", "SKIP", "", 1, True, ["skip"], {"policy": "skip"}])
def test_a_bad_value_is_a_422_naming_the_field(client: TestClient, h: dict[str, str],
                                               conn: psycopg.Connection[Any],
                                               value: Any) -> None:
    job = client.post("/v1/jobs", json={**EMI, "key": "bank42:overlap:bad"}, headers=h).json()
    before = snapshot(conn)
    created = client.post("/v1/jobs", json={**EMI, "key": "other", "overlap": value},
                          headers=h)
    patched = client.patch(f"/v1/jobs/{job['id']}", json={"overlap": value},
                           headers={**h, "If-Match": f'"{job["version"]}"'})
    for response in (created, patched):
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["errors"][0]["field"] == "overlap", problem
    assert snapshot(conn) == before
