"""The console's label filter, bulk form (count, then confirm) and holds."""

from __future__ import annotations

from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.job.store import get_job
from crondepot.limits import holds
from tests.support.console import World, add_job, login


def _labelled(conn: psycopg.Connection[Any], world: World) -> list[int]:
    return [add_job(conn, world.tenant_id, key=f"emi:{i}", cron="0 9 * * *",
                    labels={"bank": "42"}) for i in range(3)]


def test_jobs_page_filters_by_labels(client: TestClient, world: World,
                                     conn: psycopg.Connection[Any]) -> None:
    _labelled(conn, world)
    login(client, world.admin)
    html = client.get("/console/jobs?label=bank%3D42").text
    assert html.count('data-job="') == 3 and "emi:2" in html
    bad = client.get("/console/jobs?label=bank")
    assert bad.status_code == 422 and "label" in bad.text


def test_bulk_pause_shows_the_count_and_changes_only_after_the_confirm(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    made = _labelled(conn, world)
    csrf = login(client, world.admin)
    page = client.get("/console/jobs/bulk?action=pause&label=bank%3D42&key_prefix=emi%3A")
    assert page.status_code == 200
    assert "Pause 3 job(s)?" in page.text and "emi:0, emi:1, emi:2" in page.text
    assert not any(get_job(conn, world.tenant_id, j).paused for j in made)
    form = {"csrf": csrf, "action": "pause", "label": "bank=42", "key_prefix": "emi:",
            "host": "", "rate_limit": "", "priority": ""}
    unconfirmed = client.post("/console/jobs/bulk", data=form)
    assert unconfirmed.status_code == 303 and "/console/jobs/bulk?" in \
        unconfirmed.headers["location"]
    assert not any(get_job(conn, world.tenant_id, j).paused for j in made)
    done = client.post("/console/jobs/bulk", data={**form, "confirm": "yes"})
    assert done.status_code == 303
    assert all(get_job(conn, world.tenant_id, j).paused for j in made)
    assert get_job(conn, world.tenant_id, world.daily).paused is False
    assert "pause: 3 job(s) changed." in client.get(done.headers["location"]).text


def test_bulk_form_refuses_an_empty_filter_a_reader_and_a_missing_csrf(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    made = _labelled(conn, world)
    login(client, world.admin)
    empty = client.get("/console/jobs/bulk?action=pause")
    assert empty.status_code == 422 and "at least one criterion" in empty.text
    form = {"action": "pause", "label": "bank=42", "confirm": "yes"}
    assert client.post("/console/jobs/bulk", data=form).status_code == 403
    reader = TestClient(client.app, follow_redirects=False)
    csrf = login(reader, world.reader)
    refused = reader.post("/console/jobs/bulk", data={**form, "csrf": csrf})
    assert refused.status_code == 403
    assert not any(get_job(conn, world.tenant_id, j).paused for j in made)


def test_overview_shows_holds(client: TestClient, world: World,
                              conn: psycopg.Connection[Any]) -> None:
    holds.hold(conn, world.tenant_id, "host", "sms.example.com")
    login(client, world.admin)
    html = client.get("/console").text
    assert 'id="holds"' in html and "sms.example.com" in html
