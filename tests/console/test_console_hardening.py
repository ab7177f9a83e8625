"""No input gives the console a 500: integers bounded and read as ASCII digits,
query, path and form text PostgreSQL cannot store refused, form bodies bounded before they
are parsed (no login needed to send one), windows that end before they start refused. A
refused request changes nothing."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.support.api import snapshot
from tests.support.console import World, csrf_of, login, run_status

TOO_BIG = "99999999999999999999"          # over bigint (2**63 - 1)


def state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    rows = conn.execute("SELECT (SELECT count(*) FROM audit_log),"
                        " (SELECT count(*) FROM console_sessions)").fetchone()
    assert rows is not None
    return (*snapshot(conn), *rows)


def assert_page(response: Any, status: int) -> None:
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith("text/html")


def test_a_login_form_of_15000_fields_is_refused_before_it_is_parsed(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    nonce = csrf_of(client.get("/console/login").text)
    before = state(conn)
    body = f"csrf={nonce}&token={world.admin}&" + "&".join(["a"] * 15_000)
    response = client.post("/console/login", content=body,
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_page(response, 413)
    assert "fields" in response.text
    assert state(conn) == before              # no session was started


def test_a_form_over_its_byte_bound_is_refused(client: TestClient, world: World) -> None:
    csrf = login(client, world.admin)
    body = f"csrf={csrf}&back=" + "x" * (64 * 1024)
    response = client.post(f"/console/jobs/{world.daily}/pause", content=body,
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 413


@pytest.mark.parametrize("path", [
    f"/console/jobs/{TOO_BIG}", "/console/jobs/%C2%B2", "/console/jobs/%EF%BC%91",
], ids=["over-bigint", "superscript-two", "fullwidth-one"])
def test_a_job_path_that_is_not_a_bigint_in_ascii_is_not_found(
        client: TestClient, world: World, path: str) -> None:
    login(client, world.admin)
    assert_page(client.get(path), 404)


def test_a_job_action_on_a_non_ascii_job_id_is_not_found_and_changes_nothing(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    before = state(conn)
    assert_page(client.post("/console/jobs/%C2%B2/trigger", data={"csrf": csrf}), 404)
    assert state(conn) == before


@pytest.mark.parametrize("params", [
    {"after": TOO_BIG}, {"after": "²"}, {"after": "9" * 5000}, {"after": "0" * 5000},
], ids=["over-bigint", "superscript-two", "5000-digits", "5000-zeros"])
def test_a_jobs_page_cursor_that_is_not_a_bigint_shows_the_first_page(
        client: TestClient, world: World, params: dict[str, str]) -> None:
    login(client, world.admin)
    response = client.get("/console/jobs", params=params)
    assert_page(response, 200)
    assert "bank42:berlin" in response.text


@pytest.mark.parametrize("runs", ["²", TOO_BIG, "9" * 5000],
                         ids=["superscript-two", "over-bigint", "5000-digits"])
def test_a_job_page_runs_count_that_is_not_a_bigint_shows_the_default(
        client: TestClient, world: World, runs: str) -> None:
    login(client, world.admin)
    assert_page(client.get(f"/console/jobs/{world.daily}", params={"runs": runs}), 200)


@pytest.mark.parametrize("replayed", ["²", "9" * 5000], ids=["superscript-two", "5000-digits"])
def test_a_replayed_notice_that_is_not_a_bigint_is_not_shown(
        client: TestClient, world: World, replayed: str) -> None:
    login(client, world.admin)
    response = client.get("/console/dead-letter", params={"replayed": replayed})
    assert_page(response, 200)
    assert "queued again" not in response.text


@pytest.mark.parametrize("job_id", [TOO_BIG, "²"], ids=["over-bigint", "superscript-two"])
def test_a_dead_letter_job_filter_that_is_not_a_bigint_is_a_422(
        client: TestClient, world: World, job_id: str) -> None:
    login(client, world.admin)
    assert_page(client.get("/console/dead-letter", params={"job_id": job_id}), 422)
    assert_page(client.get("/console/dead-letter/replay", params={"job_id": job_id}), 422)


def test_a_replay_matching_a_job_over_bigint_is_a_422_and_replays_nothing(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    before = state(conn)
    response = client.post("/console/dead-letter/replay", data={
        "csrf": csrf, "mode": "matching", "confirm": "yes", "job_id": TOO_BIG})
    assert_page(response, 422)
    assert state(conn) == before
    assert run_status(conn, world.dead[0]) == "dead"


@pytest.mark.parametrize(("path", "params"), [
    ("/console/jobs", {"key_prefix": "a\0b"}),
    ("/console/dead-letter", {"error": "a\0b"}),
    ("/console/dead-letter/replay", {"error": "a\0b"}),
    ("/console/runs/a%00b", {}),
    ("/console/jobs", {"priority": "\0"}),
], ids=["jobs-key-prefix", "dead-letter-error", "replay-confirm-error", "run-id-path",
        "an-unused-parameter"])
def test_query_and_path_text_holding_a_nul_is_a_422(
        client: TestClient, world: World, path: str, params: dict[str, str]) -> None:
    login(client, world.admin)
    response = client.get(path, params=params)
    assert_page(response, 422)
    assert "NUL" in response.text


@pytest.mark.parametrize("form", [
    {"mode": "selected", "run_id": "a\0b"},
    {"mode": "matching", "confirm": "yes", "error": "a\0b"},
], ids=["selected-run-id", "matching-error"])
def test_form_text_holding_a_nul_is_a_422_and_replays_nothing(
        client: TestClient, world: World, conn: psycopg.Connection[Any],
        form: dict[str, str]) -> None:
    csrf = login(client, world.admin)
    before = state(conn)
    assert_page(client.post("/console/dead-letter/replay", data={"csrf": csrf, **form}), 422)
    assert state(conn) == before


WINDOW = {"since": "2025-03-02T00:00", "until": "2025-03-01T00:00"}


def test_a_dead_letter_window_whose_since_is_after_until_is_a_422(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    assert_page(client.get("/console/dead-letter", params=WINDOW), 422)
    before = state(conn)
    response = client.post("/console/dead-letter/replay", data={
        "csrf": csrf, "mode": "matching", "confirm": "yes", **WINDOW})
    assert_page(response, 422)
    assert "after until" in response.text
    assert state(conn) == before


def test_a_window_at_the_edge_of_the_calendar_is_a_422_not_a_500(
        client: TestClient, world: World) -> None:
    login(client, world.admin)
    # the last instant there is, 14 hours west of UTC, is past datetime.max in UTC
    edge = {"since": "9999-12-31T23:59:59.999999-14:00", "until": "0001-01-01T00:00"}
    assert_page(client.get("/console/dead-letter", params=edge), 422)
