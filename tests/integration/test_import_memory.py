"""An NDJSON import is split one line at a time: blank lines cost no memory per line."""

from __future__ import annotations

import tracemalloc
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings, create_app
from crondepot.tenants import create_tenant

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
    assert response.status_code == 200, response.text
    assert response.json() == {"lines": 0, "created": 0, "existing": 0, "failed": 0,
                               "errors": []}
    # the body is held once on each side of the test client; splitting it with
    # bytes.splitlines() held 8 Mi pointers (64 MiB) more
    assert peak < 32 * MiB, f"the import allocated {peak / MiB:.0f} MiB at its peak"


def test_line_numbers_count_blank_lines_and_every_kind_of_break(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    token = create_tenant(conn, "bank42").token
    body = b"\n" * 100_000 + b"not json\r\n\r\n \t\n[1]\r{}"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
    with TestClient(create_app(db_url, ApiSettings(pool_max_size=2))) as client:
        result = client.post("/v1/import", content=body, headers=headers).json()
    assert (result["lines"], result["failed"]) == (3, 3)
    assert [e["line"] for e in result["errors"]] == [100_001, 100_004, 100_005]
