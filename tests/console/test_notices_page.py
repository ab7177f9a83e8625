"""The console's notices page: the tenant's channels and its notices (sent, pending with
the next attempt, failed with the last error), filtered by status; another tenant's are
never shown."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.notices.channels import add_channel
from tests.support.console import World, login
from tests.support.notices import dead_runs, sender
from tests.support.target_server import Route, TargetServer


def _table(html: str, table_id: str) -> str:
    start = html.index(f'id="{table_id}"')
    return html[start:html.index("</table>", start)]


def test_the_page_shows_sent_pending_and_failed_notices_of_this_tenant_only(
        client: TestClient, world: World, conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOWLIST_ENV, "127.0.0.1/32")
    receiver = TargetServer()
    receiver.routes["/down"] = Route(status=503, body=b"upstream <b>down</b>")
    receiver.routes["/gone"] = Route(status=404)
    try:
        for path in ("/ok", "/down", "/gone"):
            add_channel(conn, world.tenant_id, "webhook", receiver.url(path))
        their_tenant = conn.execute("SELECT tenant_id FROM jobs WHERE id = %s",
                                    (world.theirs,)).fetchone()
        assert their_tenant is not None
        add_channel(conn, their_tenant[0], "email", "secret-ops@otherbank.example")
        dead_runs(conn, world.berlin, 1)
        dead_runs(conn, world.theirs, 1, first=1_800_000_000)
        sender().turn(conn)
    finally:
        receiver.close()
    login(client, world.admin)

    page = client.get("/console/notices")

    assert page.status_code == 200
    channels = _table(page.text, "channels")
    assert channels.count("<tr>") == 4 and "/down" in channels      # a header and 3
    assert "otherbank" not in page.text and "secret-ops" not in page.text
    notices = _table(page.text, "notices")
    assert 'class="notice-sent"' in notices and 'class="notice-pending"' in notices
    assert 'class="notice-failed"' in notices and "HTTP 404" in notices
    assert "&lt;b&gt;down&lt;/b&gt;" in notices                      # escaped
    assert "run_dead" in notices and "0 event(s) waiting" in page.text
    failed = _table(client.get("/console/notices?status=failed").text, "notices")
    assert "notice-failed" in failed and "notice-sent" not in failed
    assert client.get("/console/notices?status=lost").status_code == 422


def test_a_tenant_without_channels_is_told_so(client: TestClient, world: World) -> None:
    login(client, world.reader)
    page = client.get("/console/notices")
    assert page.status_code == 200 and "No channel" in page.text and "No notice" in page.text
