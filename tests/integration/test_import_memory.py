"""An NDJSON import is split one line at a time: blank lines cost no memory per line."""

from __future__ import annotations

import tracemalloc
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings, create_app
from crondepot.tenancy.tenants import create_tenant

MiB = 1024 * 1024


def test_megabytes_of_bare_newlines_are_not_held_one_object_per_line(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    token = create_tenant(conn, "bank42").token
    body = b"\n" * (8 * MiB)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    with TestClient(create_app(db_url, ApiSettings(pool_max_size=2))) as client:
        tracemalloc.start()
        try:
            response = client.post("/v1/import", content=body, headers=headers)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert response.status_code == 422, response.text      # no line: nothing to store
    assert (response.json()["lines"], response.json()["failed"]) == (0, 0)
    # the body is held once on each side of the test client; splitting it with
    # bytes.splitlines() held 8 Mi pointers (64 MiB) more
    assert peak < 32 * MiB, f"the import allocated {peak / MiB:.0f} MiB at its peak"


def test_line_numbers_count_blank_lines_and_every_kind_of_break(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    token = create_tenant(conn, "bank42").token
    body = b"\n" * 100_000 + b"not json\r\n\r\n \t\n[1]\r{}"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    with TestClient(create_app(db_url, ApiSettings(pool_max_size=2))) as client:
        response = client.post("/v1/import", content=body, headers=headers)
    assert response.status_code == 422, response.text
    result = response.json()
    assert (result["lines"], result["failed"]) == (3, 3)
    assert [e["line"] for e in result["errors"]] == [100_001, 100_004, 100_005]


def test_a_line_longer_than_a_job_document_is_refused_before_it_is_copied_or_parsed(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    token = create_tenant(conn, "bank42").token
    settings = ApiSettings(pool_max_size=2)
    good = ('{"key": "k%d", "cron": "0 9 * * *", "tz": "UTC", '
            '"target": {"type": "http", "url": "https://hooks.example.com/x"}}')
    # one JSON document of 8 MiB: parsed, it was a dict of millions of members
    huge = '{"key": "huge", "payload": {' + ",".join(
        f'"{n}": 0' for n in range(900_000)) + "}}"
    assert len(huge) > 8 * MiB
    body = "\n".join([good % 1, huge, good % 3]).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    with TestClient(create_app(db_url, settings)) as client:
        tracemalloc.start()
        try:
            response = client.post("/v1/import", content=body, headers=headers)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["lines"], result["created"], result["failed"]) == (3, 2, 1)
    assert result["errors"] == [{
        "line": 2, "field": "line",
        "message": f"the line is {len(huge)} bytes; a job document is at most "
                   f"{settings.json_body_bytes} bytes"}]
    keys = [k for (k,) in conn.execute("SELECT key FROM jobs ORDER BY key")]
    assert keys == ["k1", "k3"]
    # the body is held on each side of the test client, the line never copied nor parsed
    assert peak < 4 * len(body), f"the import allocated {peak / MiB:.0f} MiB at its peak"
