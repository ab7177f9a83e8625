"""GET /v1/forecast: the caller's tenant's runs against its rate limits; another tenant's
jobs are never counted, bad input is a 422 (the Python client's method: test_client.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.job import JobSpec
from crondepot.job.store import create_jobs
from tests.support.api import snapshot


def one_shots(conn: psycopg.Connection[Any], tenant: str, count: int) -> datetime:
    """``count`` one-shot jobs of ``tenant`` two hours ahead on sms-gateway (450/s, burst
    50); their instant. A one-shot job fires once, whatever second the test runs in."""
    when = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    row = conn.execute("SELECT id FROM tenants WHERE name = %s", (tenant,)).fetchone()
    assert row is not None
    doc = {"at": when.isoformat(), "tz": "UTC", "rate_limit": "sms-gateway",
           "target": {"type": "python", "handler": "test.noop"}}
    create_jobs(conn, row[0], [JobSpec.from_document(doc)] * count)
    return when


def test_the_forecast_counts_the_callers_jobs_only(
        client: TestClient, conn: psycopg.Connection[Any], h: dict[str, str],
        other: dict[str, str]) -> None:
    when = one_shots(conn, "bank42", 950)
    one_shots(conn, "otherbank", 40)
    mine = client.get("/v1/forecast", params={"hours": 3}, headers=h)
    assert mine.status_code == 200, mine.text
    body = mine.json()
    (sms,) = body["limits"]
    assert (body["jobs"], body["groups"], sms["runs"], sms["status"]) == (
        950, 1, 950, "drained")
    # 50 at once, 900 more at 450/s: two seconds
    assert sms["waves"][0]["drained_at"] == (when + timedelta(seconds=2)).isoformat()
    theirs = client.get("/v1/forecast", params={"hours": 3}, headers=other).json()
    assert (theirs["jobs"], theirs["limits"][0]["runs"]) == (40, 40)
    # the default horizon, 24 hours, reaches them too; one hour does not
    assert client.get("/v1/forecast", headers=h).json()["runs"] == 950
    assert client.get("/v1/forecast", params={"hours": 1}, headers=h).json()["runs"] == 0


@pytest.mark.parametrize("hours", ["0", "-3", "169", "10000", "a day"])
def test_a_bad_horizon_is_a_422_naming_hours(client: TestClient, conn: psycopg.Connection[Any],
                                             h: dict[str, str], hours: str) -> None:
    one_shots(conn, "bank42", 3)
    before = snapshot(conn)
    refused = client.get("/v1/forecast", params={"hours": hours}, headers=h)
    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["errors"][0]["field"] == "hours"
    assert snapshot(conn) == before


def test_without_a_token_it_is_refused(client: TestClient) -> None:
    assert client.get("/v1/forecast").status_code == 401
