"""The console's runs page (runs across jobs, filtered) and the overview's counts that
link to it, server-rendered through the test client."""

from __future__ import annotations

import html as htmlmod
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.console import World, add_run, login, run_status


def _run_ids(page: str) -> list[str]:
    start = page.index('id="runs"')
    body = page[start:page.index("</table>", start)]
    return re.findall(r'href="/console/runs/([^"]+)"', body)


def _ago(minutes: int) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%S")


def test_runs_page_filters_by_state_time_job_and_error(client: TestClient,
                                                      world: World) -> None:
    login(client, world.admin)
    every = client.get("/console/runs")
    assert every.status_code == 200
    ids = _run_ids(every.text)
    assert len(ids) == 8 and world.their_dead not in ids      # bank42's runs only
    assert ids[1:3] == world.dead             # after the queued run (due now), newest first
    assert "&lt;script&gt;" in every.text and "<script>alert" not in every.text
    assert _run_ids(client.get("/console/runs?status=dead").text) == world.dead
    assert _run_ids(client.get(f"/console/runs?status=dead&since={_ago(7)}").text) == \
        world.dead[:1]
    assert len(_run_ids(client.get(f"/console/runs?until={_ago(12)}&since={_ago(60)}"
                                   "&status=succeeded").text)) == 4
    failed = _run_ids(client.get("/console/runs?error=HTTP%20400").text)
    assert len(failed) == 1
    assert _run_ids(client.get(f"/console/runs?job_id={world.daily}&status=failed").text) \
        == failed
    assert _run_ids(client.get(f"/console/runs?job_id={world.theirs}").text) == []


def test_runs_page_pages_with_its_cursor(client: TestClient, world: World,
                                         conn: psycopg.Connection[Any]) -> None:
    login(client, world.admin)
    for minutes in range(60, 120):
        add_run(conn, world.daily, minutes, "succeeded")
    first = client.get("/console/runs?status=succeeded")
    ids = _run_ids(first.text)
    assert len(ids) == 50
    match = re.search(r'href="(/console/runs\?[^"]*cursor=[^"]+)" id="next-page"', first.text)
    assert match is not None
    rest = _run_ids(client.get(htmlmod.unescape(match[1])).text)
    assert len(rest) == 14 and not set(ids) & set(rest)


def test_overview_counts_link_to_the_runs_they_count(client: TestClient,
                                                     world: World) -> None:
    login(client, world.admin)
    overview = client.get("/console").text
    links = dict(re.findall(r'<a href="([^"]+)" data-state="([a-z]+)">', overview))
    by_state = {state: htmlmod.unescape(href) for href, state in links.items()}
    assert set(by_state) >= {"succeeded", "failed", "dead", "skipped", "queued"}
    assert "since=" in by_state["failed"] and "since=" not in by_state["queued"]
    for state in ("succeeded", "failed", "dead"):
        listed = _run_ids(client.get(by_state[state]).text)
        count = re.search(rf'data-state="{state}">(\d+)<', overview)
        assert count is not None and int(count[1]) == len(listed), state
    assert len(_run_ids(client.get(by_state["dead"]).text)) == 2


@pytest.mark.parametrize("query", ["status=broken", "since=yesterday",
                                   "since=2026-01-02T00:00&until=2026-01-01T00:00",
                                   "job_id=99999999999999999999", "cursor=zzz"])
def test_runs_page_bad_filters_are_422(client: TestClient, world: World, query: str) -> None:
    login(client, world.admin)
    assert client.get(f"/console/runs?{query}").status_code == 422


def test_a_failed_run_is_retried_from_its_page(client: TestClient, world: World,
                                               conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    (failed,) = _run_ids(client.get("/console/runs?status=failed").text)
    page = client.get(f"/console/runs/{failed}")
    assert 'id="retry-one"' in page.text and "data-confirm" in page.text
    assert client.post(f"/console/runs/{failed}/retry", data={}).status_code == 403  # no CSRF
    done = client.post(f"/console/runs/{failed}/retry", data={"csrf": csrf})
    assert done.status_code == 303 and "notice=retried" in done.headers["location"]
    assert run_status(conn, failed) == "queued"
    again = client.post(f"/console/runs/{failed}/retry", data={"csrf": csrf})
    assert again.status_code == 409                            # queued now: not retryable
    theirs = client.post(f"/console/runs/{world.their_dead}/retry", data={"csrf": csrf})
    assert theirs.status_code == 404 and run_status(conn, world.their_dead) == "dead"


def test_a_read_only_token_cannot_retry(client: TestClient, world: World,
                                        conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.reader)
    (failed,) = _run_ids(client.get("/console/runs?status=failed").text)
    assert client.post(f"/console/runs/{failed}/retry", data={"csrf": csrf}).status_code == 403
    assert run_status(conn, failed) == "failed"
