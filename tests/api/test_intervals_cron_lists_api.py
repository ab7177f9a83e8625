"""Intervals and lists of crons over HTTP: created, read back as given (a list echoed as a
list, every with its anchor), idempotent on key, patched; bad input is a 422 problem naming
the field, and changes nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api.models import BRANCH_HOURS_REMINDER, PAYMENT_RECHECK_EVERY_4H
from tests.support.api import snapshot

BASE = {"tz": "UTC", "target": {"type": "python", "handler": "sms.send"}}


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_an_interval_is_created_anchored_at_its_creation_and_read_back(
        client: TestClient, h: dict[str, str]) -> None:
    doc = {**BASE, "key": "recheck", "every": "90s"}
    response = client.post("/v1/jobs", json=doc, headers=h)
    assert response.status_code == 201, response.text
    job = response.json()
    assert job["every"] == "90s" and "cron" not in job and "at" not in job
    anchor = _instant(job["anchor"])
    assert anchor.microsecond == 0
    assert abs((anchor - _instant(job["created_at"])).total_seconds()) < 1
    assert (_instant(job["next_nominal_at"]) - anchor).total_seconds() % 90 == 0
    # the same document again (no anchor given) is the same job
    again = client.post("/v1/jobs", json=doc, headers=h)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == job["id"] and again.json()["anchor"] == job["anchor"]
    read = client.get(f"/v1/jobs/{job['id']}", headers=h).json()
    assert read["every"] == "90s" and read["anchor"] == job["anchor"]


def test_the_documented_examples_are_created_as_given(
        client: TestClient, h: dict[str, str]) -> None:
    recheck = client.post("/v1/jobs", json=PAYMENT_RECHECK_EVERY_4H, headers=h)
    assert recheck.status_code == 201, recheck.text
    job = recheck.json()
    assert job["every"] == "4h" and job["anchor"] == "2027-03-05T04:30:00+00:00"
    # the anchor is in the future: the fires before it count back from it in 4 h steps
    gap = _instant(job["anchor"]) - _instant(job["next_nominal_at"])
    assert gap.total_seconds() % (4 * 3600) == 0
    several = client.post("/v1/jobs", json=BRANCH_HOURS_REMINDER, headers=h)
    assert several.status_code == 201, several.text
    listed = several.json()
    assert listed["cron"] == ["0 9 * * 1-5", "0 10 * * 6"]
    local = _instant(listed["next_nominal_at"]).astimezone(ZoneInfo("Asia/Kolkata"))
    assert (local.hour, local.minute) in ((9, 0), (10, 0))
    assert (local.weekday() < 5) == (local.hour == 9)


def test_a_patch_moves_a_job_from_a_cron_list_to_an_interval_and_back(
        client: TestClient, h: dict[str, str]) -> None:
    job = client.post("/v1/jobs", json={**BASE, "key": "p", "cron": ["0 9 * * *", "0 18 * * *"]},
                      headers=h).json()
    patched = client.patch(f"/v1/jobs/{job['id']}", json={"cron": None, "every": "15m"},
                           headers={**h, "If-Match": f'"{job["version"]}"'})
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert body["every"] == "15m" and "cron" not in body and body["anchor"] is not None
    back = client.patch(f"/v1/jobs/{job['id']}", json={"every": None, "cron": ["0 7 * * *"]},
                        headers={**h, "If-Match": f'"{body["version"]}"'})
    assert back.status_code == 200, back.text
    assert back.json()["cron"] == ["0 7 * * *"] and "every" not in back.json()
    assert "anchor" not in back.json() or back.json()["anchor"] is None


@pytest.mark.parametrize(("changes", "field"), [
    ({"every": "0s"}, "every"),
    ({"every": "1.5m"}, "every"),
    ({"every": "90x"}, "every"),
    ({"every": "90s", "cron": "0 9 * * *"}, "every"),
    ({"every": "90s", "at": "2030-01-01T00:00:00Z"}, "at"),
    ({"every": "90s", "anchor": "2030-01-01T00:00:00"}, "anchor"),
    ({"cron": "0 9 * * *", "anchor": "2030-01-01T00:00:00Z"}, "anchor"),
    ({"cron": []}, "cron"),
    ({"cron": ["0 9 * * *"] * 21}, "cron"),
    ({"cron": ["0 9 * * *", "0 25 * * *"]}, "cron.1"),
    ({"cron": ["0 9 * * *", "0 9 * * *", "nope"]}, "cron.2"),
    ({"every": "1h", "end_at": "2020-01-01T00:00:00Z"}, "end_at"),     # no fire left
])
def test_bad_intervals_and_lists_are_422_problems_naming_the_field(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        changes: dict[str, Any], field: str) -> None:
    doc = {**BASE, "key": "bad", **changes}
    before = snapshot(conn)
    response = client.post("/v1/jobs", json=doc, headers=h)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert [e["field"] for e in problem["errors"]] == [field], problem
    assert snapshot(conn) == before


def test_the_openapi_document_says_cron_may_be_a_list_and_every_an_interval(
        client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert body["examples"]["payment_recheck_every_4h"]["value"]["every"] == "4h"
    assert body["examples"]["weekdays_and_saturdays"]["value"]["cron"] == [
        "0 9 * * 1-5", "0 10 * * 6"]
    document = spec["components"]["schemas"]["JobDocument"]
    assert document["oneOf"] == [{"required": ["cron"]}, {"required": ["every"]},
                                 {"required": ["at"]}]
    assert document["dependentRequired"] == {"anchor": ["every"]}
    cron = document["properties"]["cron"]["anyOf"]
    assert cron[1]["type"] == "array" and cron[1]["maxItems"] == 20
