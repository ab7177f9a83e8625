"""Schedules beyond cron over HTTP: an at job and a bounded EMI are created and read back
with their fire count and end; bad schedules are 422 problems naming the field, and change
nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api.models import BILL_DUE_ONCE, EMI_TWELVE_MONTH_ENDS
from tests.support.api import snapshot


def test_an_at_job_is_created_and_read_back_without_a_cron(
        client: TestClient, h: dict[str, str]) -> None:
    at = (datetime.now(UTC) + timedelta(days=3)).replace(microsecond=0)
    doc = {**BILL_DUE_ONCE, "at": at.isoformat()}
    response = client.post("/v1/jobs", json=doc, headers=h)
    assert response.status_code == 201, response.text
    job = response.json()
    assert "cron" not in job and job["at"] == at.isoformat()
    assert job["next_nominal_at"] == at.isoformat()
    assert (job["fire_count"], job["ended_at"], job["ended_reason"]) == (0, None, None)
    assert job["start_at"] is None and job["end_at"] is None and job["max_runs"] is None
    again = client.post("/v1/jobs", json=doc, headers=h)
    assert again.status_code == 200 and again.json()["id"] == job["id"]


def test_the_documented_emi_example_is_created_with_its_bounds(
        client: TestClient, h: dict[str, str]) -> None:
    response = client.post("/v1/jobs", json=EMI_TWELVE_MONTH_ENDS, headers=h)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["cron"] == "0 9 L * *" and job["max_runs"] == 12
    assert job["start_at"] == "2027-03-31T18:30:00+00:00"
    # the first fire is the first month-end at 09:00 IST in the window: 30 April 2027
    assert job["next_nominal_at"] == "2027-04-30T03:30:00+00:00"


@pytest.mark.parametrize(("changes", "field"), [
    ({"at": "2027-03-05T09:00:00+05:30"}, "at"),                       # and a cron too
    ({"cron": None}, "cron"),                                          # neither
    ({"cron": "0 9 * * *", "at": None, "end_at": "2027-03-05"}, "end_at"),
    ({"cron": "0 9 * * *", "at": None, "max_runs": 0}, "max_runs"),
    ({"cron": "0 9 L-40 * *", "at": None}, "cron"),
    ({"cron": "0 9 32W * *", "at": None}, "cron"),
    ({"cron": "0 9 * * 8L", "at": None}, "cron"),
    ({"cron": "0 9 * * 5W", "at": None}, "cron"),
    ({"cron": "0 9 * * 1#9", "at": None}, "cron"),
    ({"cron": None, "at": "2020-01-01T00:00:00Z"}, "at"),               # already passed
    ({"cron": "0 9 * * *", "at": None, "end_at": "2020-01-01T00:00:00Z"}, "end_at"),
])
def test_bad_schedules_are_422_problems_naming_the_field(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        changes: dict[str, Any], field: str) -> None:
    base = {"key": "k", "cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "sms.send"}}
    doc = {k: v for k, v in {**base, **changes}.items() if v is not None}
    before = snapshot(conn)
    response = client.post("/v1/jobs", json=doc, headers=h)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == [field], problem
    assert snapshot(conn) == before


def test_the_openapi_document_has_the_schedule_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert body["examples"]["bill_due_once"]["value"]["at"] == BILL_DUE_ONCE["at"]
    assert body["examples"]["emi_twelve_month_ends"]["value"]["max_runs"] == 12
    document = spec["components"]["schemas"]["JobDocument"]
    assert document["oneOf"] == [{"required": ["cron"]}, {"required": ["every"]},
                                 {"required": ["at"]}]
    assert document["properties"]["at"]["format"] == "date-time"


def test_quartz_day_items_are_stored_and_their_refusals_name_the_field(
        client: TestClient, h: dict[str, str]) -> None:
    base = {"tz": "Asia/Kolkata", "target": {"type": "python", "handler": "sms.send"},
            "start_at": "2027-03-31T18:30:00Z"}
    statement = client.post("/v1/jobs", json={**base, "key": "stmt", "cron": "0 9 LW * *"},
                            headers=h)
    assert statement.status_code == 201, statement.text
    # April 2027 ends on a Friday: the 30th, 09:00 IST
    assert statement.json()["next_nominal_at"] == "2027-04-30T03:30:00+00:00"
    instalment = client.post("/v1/jobs", json={**base, "key": "emi", "cron": "0 9 L-3 * *"},
                             headers=h)
    assert instalment.json()["next_nominal_at"] == "2027-04-27T03:30:00+00:00"
    refused = client.post("/v1/jobs", json={**base, "key": "bad", "cron": "0 9 32W * *"},
                          headers=h).json()
    assert refused["errors"][0]["field"] == "cron"
    assert "day-of-month field: 32W is out of range 1–31" in refused["errors"][0]["message"]
