"""Job documents the API stored before and a worker, a parser or the timetable would later
refuse: each is a 422 naming the field, and nothing is written."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import snapshot

GOOD: dict[str, Any] = {"key": "fresh", "cron": "0 9 * * *", "tz": "UTC",
                        "target": {"type": "python", "handler": "sms.send"}}


def _http(url: str) -> dict[str, Any]:
    return {**GOOD, "target": {"type": "http", "url": url}}


@pytest.mark.parametrize(("body", "field"), [
    ({**GOOD, "target": {"type": "python", "handler": "crondepot.log\n"}}, "target.handler"),
    ({**GOOD, "rate_limit": "abc\n"}, "rate_limit"),
    ({**GOOD, "misfire": {"policy": "skip_after_local_time", "until": "23:59\n"}},
     "misfire.until"),
    (_http("http://ex ample.com/"), "target.url"),
    (_http("http://a.b/\r\nX-Injected: 1"), "target.url"),
    (_http("http://127.0.0.1:99999/"), "target.url"),
    (_http("http://169.254.169.254/latest/meta-data/"), "target.url"),
    (_http("http://[::1x]/"), "target.url"),
    (_http("http://0x7f000001/"), "target.url"),
    (_http("http://[::1%zone]\u3002]"), "target.url"),
    (_http("http://0xa9.0xfe.0xa9.0xfe/"), "target.url"),
    (_http("http://127.0.0.0x1/"), "target.url"),
    ({**GOOD, "cron": "*/999999999999999999999 * * * *"}, "cron"),
])
def test_a_document_refused_later_is_refused_at_create(
        body: dict[str, Any], field: str, client: TestClient, h: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    response = client.post("/v1/jobs", json=body, headers=h)
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert snapshot(conn) == before


def test_dedupes_1_is_refused_after_a_job_with_dedupes_true(client: TestClient,
                                                            h: dict[str, str]) -> None:
    target = {"type": "http", "url": "https://hooks.example.com/x", "dedupes": True}
    assert client.post("/v1/jobs", json={**GOOD, "target": target}, headers=h).status_code == 201
    response = client.post("/v1/jobs", json={**GOOD, "key": "other", "target": {
        **target, "dedupes": 1}}, headers=h)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "target.dedupes"
