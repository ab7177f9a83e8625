"""Exclusion calendars over HTTP: a tenant's calendars are written (JSON or an iCalendar
file), read, listed and deleted; a job names one in its ``calendar`` field. Bad input is a
422 problem naming the field and changes nothing; another tenant's calendar is 404; a
calendar live jobs use cannot be deleted (409)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import EMI, snapshot

ICS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bank42//holidays//EN\r\n"
       "BEGIN:VEVENT\r\nUID:xmas@bank42\r\nSUMMARY:Christmas\r\n"
       "DTSTART;VALUE=DATE:20261225\r\nRRULE:FREQ=YEARLY;COUNT=2\r\nEND:VEVENT\r\n"
       "BEGIN:VEVENT\r\nUID:diwali@bank42\r\nSUMMARY:Diwali\r\n"
       "DTSTART;VALUE=DATE:20261108\r\nDTEND;VALUE=DATE:20261110\r\nEND:VEVENT\r\n"
       "END:VCALENDAR\r\n")
CALENDAR = {"exclude": "in-bank-holidays", "on_excluded": "previous_business_day"}


def _put(client: TestClient, h: dict[str, str], dates: list[str],
         name: str = "in-bank-holidays") -> Any:
    return client.put(f"/v1/calendars/{name}", json={"dates": dates}, headers=h)


def test_a_calendar_is_created_read_listed_and_replaced(
        client: TestClient, h: dict[str, str]) -> None:
    created = _put(client, h, ["2027-01-26", "2026-12-25", "2026-12-25"])
    assert created.status_code == 201, created.text
    assert created.headers["Location"] == "/v1/calendars/in-bank-holidays"
    body = created.json()
    assert body["dates"] == ["2026-12-25", "2027-01-26"] and body["version"] == 1
    assert client.get("/v1/calendars/in-bank-holidays", headers=h).json() == body
    replaced = _put(client, h, ["2026-12-25"])
    assert replaced.status_code == 200
    assert replaced.json()["dates"] == ["2026-12-25"] and replaced.json()["version"] == 2
    listed = client.get("/v1/calendars", headers=h).json()["items"]
    assert [c["name"] for c in listed] == ["in-bank-holidays"]


def test_an_icalendar_file_gives_the_dates_of_its_all_day_events(
        client: TestClient, h: dict[str, str]) -> None:
    response = client.put("/v1/calendars/in-bank-holidays", content=ICS,
                          headers={**h, "Content-Type": "text/calendar"})
    assert response.status_code == 201, response.text
    # a yearly event twice (COUNT=2), a two-day event day by day (DTEND exclusive)
    assert response.json()["dates"] == ["2026-11-08", "2026-11-09", "2026-12-25",
                                        "2027-12-25"]


@pytest.mark.parametrize(("body", "field"), [
    ({"dates": ["2026-02-30"]}, "dates[0]"),
    ({"dates": ["2026-12-25", "25/12/2026"]}, "dates[1]"),
    ({"dates": [20261225]}, "dates[0]"),
    ({"dates": "2026-12-25"}, "dates"),
    ({"days": ["2026-12-25"]}, "days"),
    (["2026-12-25"], "body"),
])
def test_bad_dates_are_refused_naming_the_field(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        body: Any, field: str) -> None:
    before = snapshot(conn)
    response = client.put("/v1/calendars/in-bank-holidays", json=body, headers=h)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.json()["errors"][0]["field"] == field
    assert snapshot(conn) == before
    assert conn.execute("SELECT count(*) FROM calendars").fetchone() == (0,)


def test_a_bad_name_and_a_timed_icalendar_event_are_refused(
        client: TestClient, h: dict[str, str]) -> None:
    bad_name = _put(client, h, ["2026-12-25"], name="Bank_Holidays")
    assert bad_name.status_code == 422
    timed = ICS.replace("DTSTART;VALUE=DATE:20261225", "DTSTART:20261225T090000Z")
    response = client.put("/v1/calendars/x", content=timed,
                          headers={**h, "Content-Type": "text/calendar"})
    assert response.status_code == 422
    assert "all-day" in response.json()["detail"]
    other_media = client.put("/v1/calendars/x", content="2026-12-25",
                             headers={**h, "Content-Type": "text/plain"})
    assert other_media.status_code == 415


def test_a_job_names_an_existing_calendar_and_shows_it(
        client: TestClient, h: dict[str, str]) -> None:
    assert _put(client, h, ["2027-01-05"]).status_code == 201
    response = client.post("/v1/jobs", json={**EMI, "calendar": CALENDAR}, headers=h)
    assert response.status_code == 201, response.text
    assert response.json()["calendar"] == {**CALENDAR, "business_days": "mon-fri"}


@pytest.mark.parametrize(("calendar", "field"), [
    ({"exclude": "no-such-calendar"}, "calendar.exclude"),
    ({"exclude": "in-bank-holidays", "business_days": "mon-fry"}, "calendar.business_days"),
    ({"exclude": "in-bank-holidays", "on_excluded": "tomorrow"}, "calendar.on_excluded"),
    ({"exclude": "In Bank Holidays"}, "calendar.exclude"),
    ({"on_excluded": "skip"}, "calendar.exclude"),
])
def test_a_job_with_a_bad_calendar_is_refused_naming_the_field(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        calendar: dict[str, Any], field: str) -> None:
    assert _put(client, h, ["2027-01-05"]).status_code == 201
    before = snapshot(conn)
    response = client.post("/v1/jobs", json={**EMI, "calendar": calendar}, headers=h)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == field
    assert snapshot(conn) == before


def test_another_tenants_calendar_is_not_found_nor_usable(
        client: TestClient, h: dict[str, str], other: dict[str, str]) -> None:
    assert _put(client, h, ["2026-12-25"]).status_code == 201
    assert client.get("/v1/calendars/in-bank-holidays", headers=other).status_code == 404
    assert client.get("/v1/calendars", headers=other).json()["items"] == []
    assert client.delete("/v1/calendars/in-bank-holidays", headers=other).status_code == 404
    job = client.post("/v1/jobs", json={**EMI, "calendar": CALENDAR}, headers=other)
    assert job.status_code == 422
    assert job.json()["errors"][0]["field"] == "calendar.exclude"
    # the other tenant's own calendar of the same name is its own
    assert _put(client, other, ["2027-08-15"]).status_code == 201
    assert client.get("/v1/calendars/in-bank-holidays", headers=h).json()["dates"] == [
        "2026-12-25"]


def test_a_calendar_in_use_cannot_be_deleted_until_its_jobs_are_cancelled(
        client: TestClient, h: dict[str, str]) -> None:
    assert _put(client, h, ["2026-12-25"]).status_code == 201
    job = client.post("/v1/jobs", json={**EMI, "calendar": CALENDAR}, headers=h).json()
    refused = client.delete("/v1/calendars/in-bank-holidays", headers=h)
    assert refused.status_code == 409, refused.text
    assert refused.json()["job_ids"] == [job["id"]]
    assert str(job["id"]) in refused.json()["detail"]
    assert client.delete(f"/v1/jobs/{job['id']}", headers=h).status_code in (200, 204)
    assert client.delete("/v1/calendars/in-bank-holidays", headers=h).status_code == 204
    assert client.get("/v1/calendars/in-bank-holidays", headers=h).status_code == 404


def test_calendar_changes_are_audited(client: TestClient, h: dict[str, str],
                                      conn: psycopg.Connection[Any]) -> None:
    _put(client, h, ["2026-12-25"])
    _put(client, h, ["2026-12-25", "2027-01-26"])
    client.delete("/v1/calendars/in-bank-holidays", headers=h)
    actions = [row[0] for row in conn.execute(
        "SELECT action FROM audit_log WHERE subject = 'calendar in-bank-holidays' ORDER BY id")]
    assert actions == ["calendar.set", "calendar.set", "calendar.delete"]


def test_a_calendar_change_makes_its_jobs_due_for_a_new_plan(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    assert _put(client, h, ["2026-12-25"]).status_code == 201
    job = client.post("/v1/jobs", json={**EMI, "calendar": {"exclude": "in-bank-holidays"}},
                      headers=h).json()
    before = conn.execute("SELECT next_run_at, now() FROM jobs WHERE id = %s",
                          (job["id"],)).fetchone()
    assert before is not None and before[0] > before[1]
    _put(client, h, ["2026-12-25", "2027-01-05"])
    after = conn.execute("SELECT next_run_at, next_nominal_at, clock_timestamp() FROM jobs "
                         "WHERE id = %s", (job["id"],)).fetchone()
    assert after is not None and after[0] <= after[2]      # due: the next tick plans it
    assert after[1].isoformat() == job["next_nominal_at"].replace("Z", "+00:00")


def test_a_patch_or_an_import_naming_an_unknown_calendar_is_refused(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    assert _put(client, h, ["2027-01-05"]).status_code == 201
    job = client.post("/v1/jobs", json=EMI, headers=h).json()
    etag = {**h, "If-Match": f'"{job["version"]}"',
            "Content-Type": "application/merge-patch+json"}
    before = snapshot(conn)
    refused = client.patch(f"/v1/jobs/{job['id']}", json={"calendar": {"exclude": "nope"}},
                           headers=etag)
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "calendar.exclude"
    assert snapshot(conn) == before
    moved = client.patch(f"/v1/jobs/{job['id']}", json={"calendar": CALENDAR}, headers=etag)
    assert moved.status_code == 200, moved.text
    assert moved.json()["calendar"]["exclude"] == "in-bank-holidays"
    again = {**etag, "If-Match": f'"{moved.json()["version"]}"'}
    cleared = client.patch(f"/v1/jobs/{job['id']}", json={"calendar": None}, headers=again)
    assert cleared.status_code == 200 and cleared.json()["calendar"] is None
    lines = [{**EMI, "key": "a", "calendar": {"exclude": "nope"}},
             {**EMI, "key": "b", "calendar": CALENDAR}]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    imported = client.post("/v1/import", content=body,
                           headers={**h, "Content-Type": "application/x-ndjson"})
    assert imported.status_code == 200, imported.text
    result = imported.json()
    assert result["created"] == 1 and result["failed"] == 1
    assert result["errors"][0]["line"] == 1
    assert result["errors"][0]["field"] == "calendar.exclude"
