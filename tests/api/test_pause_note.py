"""A pause says why: POST /v1/jobs/{id}/pause {"note"} keeps the note, when and who until
the resume (issue 31, item 9); a bad note is a 422 that pauses nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import snapshot

NOTE = "SMS gateway migration until Monday 09:00"


def test_a_pause_keeps_its_note_when_and_who_until_the_resume(
        client: TestClient, h: dict[str, str], job: dict[str, Any],
        conn: psycopg.Connection[Any]) -> None:
    url = f"/v1/jobs/{job['id']}"
    assert job["pause"] is None
    paused = client.post(f"{url}/pause", json={"note": NOTE}, headers=h).json()
    assert paused["paused"] is True
    assert paused["pause"]["note"] == NOTE
    assert paused["pause"]["paused_by"].startswith("token:")
    assert datetime.fromisoformat(paused["pause"]["paused_at"]) <= datetime.fromisoformat(
        paused["updated_at"])
    assert client.get(url, headers=h).json()["pause"] == paused["pause"]
    # Pausing a paused job changes nothing, its note included.
    again = client.post(f"{url}/pause", json={"note": "another"}, headers=h).json()
    assert again["pause"] == paused["pause"] and again["version"] == paused["version"]
    # The audit entry of the change holds the note (the row's after image).
    after = conn.execute("SELECT after ->> 'pause_note' FROM audit_log WHERE subject = %s "
                         "ORDER BY id DESC LIMIT 1", (str(job["id"]),)).fetchone()
    assert after == (NOTE,)
    resumed = client.post(f"{url}/resume", headers=h).json()
    assert resumed["paused"] is False and resumed["pause"] is None
    plain = client.post(f"{url}/pause", headers=h).json()      # no body: no note
    assert plain["pause"]["note"] is None and plain["pause"]["paused_at"] is not None


@pytest.mark.parametrize("body", [
    {"note": ""}, {"note": "   "}, {"note": "x" * 501}, {"note": "line\nbreak"},
    {"note": "nul\u0000"}, {"note": 5}, {"note": "ok", "colour": "blue"},
])
def test_a_bad_note_is_a_422_that_pauses_nothing(client: TestClient, h: dict[str, str],
                                                 job: dict[str, Any],
                                                 conn: psycopg.Connection[Any],
                                                 body: dict[str, Any]) -> None:
    before = snapshot(conn)
    response = client.post(f"/v1/jobs/{job['id']}/pause", json=body, headers=h)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert snapshot(conn) == before
