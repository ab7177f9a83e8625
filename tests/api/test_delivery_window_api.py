"""A job's delivery window over HTTP: created, read back, patched, the tenant's default
applied to a job without its own (and not to one that opts out), and every bad window a
422 naming the member that changes nothing."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.scheduler.tick import tick
from crondepot.tenancy.tenants import set_delivery_window
from crondepot.timetable.delivery import parse_window
from tests.support.api import snapshot

TZ = "Asia/Kolkata"
SMS_WINDOW = {"from": "09:00", "to": "21:00", "days": "mon-sat", "outside": "defer"}
# A loan-instalment reminder at 21:30, after the gateway's closing time.
REMINDER = {"key": "bank42:48213:emi-sms", "cron": "30 21 * * *", "tz": TZ,
            "target": {"type": "python", "handler": "sms.send"},
            "payload": {"loan": 48213}, "delivery_window": SMS_WINDOW}


def _create(client: TestClient, h: dict[str, str], doc: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=doc, headers=h)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _patch(client: TestClient, h: dict[str, str], job: dict[str, Any],
           patch: dict[str, Any]) -> Any:
    return client.patch(f"/v1/jobs/{job['id']}", json=patch,
                        headers={**h, "If-Match": f'"{job["version"]}"'})


def test_a_window_is_stored_read_back_and_patched(client: TestClient, h: dict[str, str],
                                                  conn: psycopg.Connection[Any]) -> None:
    job = _create(client, h, {**REMINDER, "delivery_window": {
        "from": "09:00", "to": "21:00", "days": "Mon-Sat"}})
    assert job["delivery_window"] == SMS_WINDOW           # normalised, defaults filled in
    read = client.get(f"/v1/jobs/{job['id']}", headers=h).json()
    assert read["delivery_window"] == SMS_WINDOW
    (stored,) = conn.execute("SELECT delivery_window FROM jobs WHERE id = %s",
                             (job["id"],)).fetchone()  # type: ignore[misc]
    assert stored == SMS_WINDOW
    night = {"from": "22:00", "to": "06:00", "outside": "skip"}
    job = _patch(client, h, job, {"delivery_window": night}).json()
    assert job["delivery_window"] == night
    job = _patch(client, h, job, {"delivery_window": "none"}).json()
    assert job["delivery_window"] == "none"
    job = _patch(client, h, job, {"delivery_window": None}).json()
    assert job["delivery_window"] is None                 # the tenant's default
    (stored,) = conn.execute("SELECT delivery_window FROM jobs WHERE id = %s",
                             (job["id"],)).fetchone()  # type: ignore[misc]
    assert stored is None                                 # SQL null, not JSON null


def _fire_due_at(conn: psycopg.Connection[Any], job_id: int) -> tuple[datetime, datetime]:
    """Tick once just after the job's next fire; (its nominal time, the due time written)."""
    (nominal, due) = conn.execute("SELECT next_nominal_at, next_run_at FROM jobs WHERE id = %s",
                                  (job_id,)).fetchone()  # type: ignore[misc]
    tick(conn, batch=100, now=due + timedelta(seconds=1))
    (written,) = conn.execute("SELECT due_at FROM runs WHERE job_id = %s",
                              (job_id,)).fetchone()  # type: ignore[misc]
    return nominal, written


def test_the_tenants_default_applies_to_a_job_without_its_own(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    row = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()
    assert row is not None
    tenant_id = row[0]
    set_delivery_window(conn, tenant_id, parse_window({"from": "09:00", "to": "21:00"}))
    plain = _create(client, h, {**REMINDER, "key": "plain", "delivery_window": None})
    opted_out = _create(client, h, {**REMINDER, "key": "opted-out", "delivery_window": "none"})
    own = _create(client, h, {**REMINDER, "key": "own",
                              "delivery_window": {"from": "21:00", "to": "23:00"}})
    nominal, due = _fire_due_at(conn, plain["id"])
    assert due == parse_window({"from": "09:00", "to": "21:00"}).opening(nominal, TZ)
    assert due - nominal == timedelta(hours=11, minutes=30)     # 21:30 -> 09:00
    nominal, due = _fire_due_at(conn, opted_out["id"])
    assert due == nominal
    nominal, due = _fire_due_at(conn, own["id"])
    assert due == nominal                                       # inside its own window


@pytest.mark.parametrize(("window", "field", "words"), [
    ({"from": "25:00", "to": "21:00"}, "delivery_window.from", "HH:MM"),
    ({"from": "09:00", "to": "09:00"}, "delivery_window.to", "equals"),
    ({"from": "09:00", "to": "21:00", "days": "funday"}, "delivery_window.days", "funday"),
    ({"from": "09:00", "to": "21:00", "outside": "later"}, "delivery_window.outside",
     "one of defer, skip"),
    ({"from": "09:00"}, "delivery_window.to", "HH:MM"),
    ("always", "delivery_window", "\"none\""),
])
def test_a_bad_window_is_a_422_that_changes_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        window: Any, field: str, words: str) -> None:
    job = _create(client, h, REMINDER)
    before = snapshot(conn)
    created = client.post("/v1/jobs", json={**REMINDER, "key": "other",
                                            "delivery_window": window}, headers=h)
    patched = _patch(client, h, job, {"delivery_window": window})
    for response in (created, patched):
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["errors"][0]["field"] == field, problem
        assert words in problem["detail"], problem
    assert snapshot(conn) == before
