"""The console shows a job's schedule beyond cron: its bounds, its fire count, and an ended
job as ended (not cancelled), with no next fires."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.scheduler.tick import tick
from tests.support.console import World, add_job, login


def test_a_bounded_job_and_an_ended_at_job_on_their_pages(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    emi = add_job(conn, world.tenant_id, key="emi:48214", cron="0 9 L * *",
                  tz="Asia/Kolkata", max_runs=12, start_at="2027-04-01T00:00:00+05:30")
    at = (datetime.now(UTC) + timedelta(minutes=5)).replace(microsecond=0)
    bill = add_job(conn, world.tenant_id, key="bill:77120", at=at.isoformat())
    tick(conn, batch=1000, now=at + timedelta(seconds=1))
    login(client, world.admin)
    page = client.get(f"/console/jobs/{emi}").text
    assert "0 9 L * *, from 2027-03-31T18:30:00+00:00, at most 12 fires" in page
    assert "0 of 12" in page and "st-active" in page
    page = client.get(f"/console/jobs/{bill}").text
    assert f"at {at.isoformat()}" in page
    assert "st-ended" in page and "completed" in page and "st-cancelled" not in page
    assert "This job has ended" in page
    finished = client.get("/console/jobs", params={"active": "no"}).text
    assert "st-ended" in finished and f"at {at.isoformat()}" in finished


def test_an_interval_and_a_cron_list_on_their_pages(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    recheck = add_job(conn, world.tenant_id, key="recheck:99117", every="90s",
                      anchor="2026-01-01T00:00:00Z", tz="Europe/London")
    card = add_job(conn, world.tenant_id, key="card:5521", cron=["0 9 * * 1-5", "0 10 * * 6"],
                   tz="Asia/Kolkata")
    login(client, world.admin)
    page = client.get(f"/console/jobs/{recheck}").text
    assert "every 90s from 2026-01-01T00:00:00+00:00" in page and 'id="interval-note"' in page
    page = client.get(f"/console/jobs/{card}").text
    assert "0 9 * * 1-5 | 0 10 * * 6" in page and "2 cron expressions" in page
    assert "10:00" in page      # the next 10 fires reach a Saturday
