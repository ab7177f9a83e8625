"""No input gives a 500: integers bounded before SQL, digits read as ASCII only,
decoded cursors checked for text PostgreSQL cannot store, windows that end before they start
refused. Each case answers a 422 problem naming the parameter and changes nothing."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import snapshot

PROBLEM = "application/problem+json"
TOO_BIG = "99999999999999999999"          # over bigint (2**63 - 1 = 9223372036854775807)


def state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    """Jobs, runs and the audit log: equal states mean the request changed nothing."""
    audit = conn.execute("SELECT count(*), coalesce(max(id), 0) FROM audit_log").fetchone()
    assert audit is not None
    return (*snapshot(conn), *audit)


def refused(response: Any, field: str, status: int = 422) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status
    assert field in [e["field"] for e in body.get("errors", [])], body


def raw_request(client: TestClient, method: str, path: str,
                headers: dict[str, str | bytes], body: bytes = b"") -> httpx.Response:
    """A request whose header bytes reach the app as given (TestClient re-encodes header
    values as UTF-8, so it cannot send the single byte 0xB2), on the client's event loop."""
    raw = [(name.encode(), value if isinstance(value, bytes) else value.encode())
           for name, value in headers.items()]

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app=client.app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport,
                                     base_url="http://testserver") as async_client:
            request = async_client.build_request(method, path, content=body)
            request.headers = httpx.Headers([*request.headers.raw, *raw])
            response = await async_client.send(request)
            await response.aread()
            return response

    assert client.portal is not None
    return client.portal.call(send)


def run_cursor(nominal: str, run_id: str) -> str:
    """A runs cursor as the API encodes one, holding whatever JSON text it is given."""
    raw = f'["{nominal}", "{run_id}"]'.encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(("path", "params", "field"), [
    ("/v1/jobs", {"cursor": TOO_BIG}, "cursor"),
    ("/v1/jobs", {"cursor": "²"}, "cursor"),
    ("/v1/jobs", {"cursor": "１２"}, "cursor"),
    ("/v1/audit", {"before_id": TOO_BIG}, "before_id"),
    ("/v1/dead-letter", {"job_id": TOO_BIG}, "job_id"),
], ids=["jobs-cursor-over-bigint", "jobs-cursor-superscript-two", "jobs-cursor-fullwidth",
        "audit-before-id-over-bigint", "dead-letter-job-id-over-bigint"])
def test_an_integer_query_parameter_out_of_range_or_not_ascii_is_a_422(
        client: TestClient, h: dict[str, str], path: str, params: dict[str, str],
        field: str) -> None:
    refused(client.get(path, params=params, headers=h), field)


def test_the_largest_bigint_cursor_is_still_a_page(client: TestClient, h: dict[str, str],
                                                  job: dict[str, Any]) -> None:
    response = client.get("/v1/jobs", params={"cursor": str(2**63 - 1)}, headers=h)
    assert response.status_code == 200, response.text
    assert response.json() == {"items": [], "next_cursor": None}


@pytest.mark.parametrize("body", [
    {"job_id": 1180591620717411303424},
    {"job_id": 2**63},
    {"run_ids": ["r"], "job_id": 2**64},
], ids=["job-id-2-to-the-70", "job-id-2-to-the-63", "with-run-ids"])
def test_a_replay_of_a_job_id_over_bigint_is_a_422_and_replays_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        job: dict[str, Any], body: dict[str, Any]) -> None:
    before = state(conn)
    refused(client.post("/v1/dead-letter/replay", json=body, headers=h), "job_id")
    assert state(conn) == before


def test_an_if_match_of_non_ascii_digits_is_a_422_and_changes_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        job: dict[str, Any]) -> None:
    before = state(conn)
    # "²" as the one latin-1 byte a server reads back as U+00B2 ("²".isdigit() is True)
    response = raw_request(client, "PATCH", f"/v1/jobs/{job['id']}", {
        **h, "Content-Type": "application/merge-patch+json", "If-Match": b"\xb2"},
        b'{"cron": "0 10 5 * *"}')
    refused(response, "If-Match")
    assert state(conn) == before


@pytest.mark.parametrize("run_id", ["a\\u0000b", "a\\ud800b", "\\udfff"],
                         ids=["nul", "lone-high-surrogate", "lone-low-surrogate"])
def test_a_runs_cursor_that_decodes_to_unstorable_text_is_a_422(
        client: TestClient, h: dict[str, str], job: dict[str, Any], run_id: str) -> None:
    cursor = run_cursor("2025-01-05T03:30:00+00:00", run_id)
    refused(client.get(f"/v1/jobs/{job['id']}/runs", params={"cursor": cursor}, headers=h),
            "cursor")


def test_a_runs_cursor_of_the_api_still_pages(client: TestClient, h: dict[str, str],
                                              job: dict[str, Any]) -> None:
    cursor = run_cursor("2025-01-05T03:30:00+00:00", "r-1")
    response = client.get(f"/v1/jobs/{job['id']}/runs", params={"cursor": cursor}, headers=h)
    assert response.status_code == 200, response.text


WINDOW = {"since": "2025-03-02T00:00:00Z", "until": "2025-03-01T00:00:00Z"}


def test_a_dead_letter_listing_whose_since_is_after_until_is_a_422(
        client: TestClient, h: dict[str, str]) -> None:
    refused(client.get("/v1/dead-letter", params=WINDOW, headers=h), "since")


def test_a_replay_whose_since_is_after_until_is_a_422_and_replays_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        job: dict[str, Any]) -> None:
    before = state(conn)
    refused(client.post("/v1/dead-letter/replay", json=WINDOW, headers=h), "since")
    assert state(conn) == before


def test_a_verify_whose_since_is_after_until_is_a_422(client: TestClient,
                                                      h: dict[str, str]) -> None:
    refused(client.get("/v1/verify", params=WINDOW, headers=h), "since")


def test_a_window_of_one_instant_is_allowed(client: TestClient, h: dict[str, str]) -> None:
    same = {"since": WINDOW["until"], "until": WINDOW["until"]}
    assert client.get("/v1/dead-letter", params=same, headers=h).status_code == 200


def test_text_query_parameters_holding_a_nul_are_a_422(client: TestClient,
                                                       h: dict[str, str]) -> None:
    for path, name in (("/v1/jobs", "key_prefix"), ("/v1/dead-letter", "error"),
                       ("/v1/audit", "subject"), ("/v1/audit", "action")):
        refused(client.get(path, params={name: "a\0b"}, headers=h), name)


def test_a_verify_until_the_first_day_there_is_is_a_422(client: TestClient,
                                                        h: dict[str, str]) -> None:
    # the default window is the 24 hours before until: before year 1, an OverflowError
    refused(client.get("/v1/verify", params={"until": "0001-01-01T00:00:00Z"}, headers=h),
            "until")
