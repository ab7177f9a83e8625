"""The console's forecast page (api/console/forecast.py): the tenant's own runs against its
limits, a bad horizon refused with the reason, and a login needed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.limits.buckets import set_limit
from crondepot.tenancy.grants import grant
from tests.support.console import World, add_job, login


def test_the_page_shows_the_tenants_waves_only(client: TestClient, world: World,
                                               conn: psycopg.Connection[Any]) -> None:
    set_limit(conn, "sms", 10, 10)
    grant(conn, world.tenant_id, limits=["sms"])
    # one-shot jobs fire once, whatever second the test runs in
    when = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    for n in range(30):
        add_job(conn, world.tenant_id, key=f"bank42:once:{n}",
                at=when.isoformat(), rate_limit="sms")
    login(client, world.admin)
    page = client.get("/console/forecast", params={"hours": "3"})
    assert page.status_code == 200
    assert 'id="forecast-headline"' in page.text
    # 10 at once, 20 more at 10/s
    assert (f"{when:%Y-%m-%d %H:%M:%S}: 30 runs on `sms` at 10/s, drained by "
            f"{when + timedelta(seconds=2):%H:%M:%S}, 0 past deadline") in page.text
    assert "<td>sms</td>" in page.text and "<td>none</td>" in page.text
    assert client.get("/console/forecast").status_code == 200        # 24 hours by default


def test_a_bad_horizon_is_refused_with_the_reason(client: TestClient, world: World) -> None:
    login(client, world.admin)
    for hours in ("0", "10000", "a day"):
        page = client.get("/console/forecast", params={"hours": hours})
        assert page.status_code == 422
        assert "expected a whole number of hours from 1 to 168" in page.text


def test_the_page_needs_a_login(client: TestClient, world: World) -> None:
    response = client.get("/console/forecast")
    assert response.status_code == 303 and response.headers["location"] == "/console/login"
