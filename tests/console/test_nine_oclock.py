"""The 9:00 console (issue 33): the rate-limit panel, scheduler and maintenance status, the
live refresh, the job page's payload block and the operator's view across tenants, over
HTTP (TestClient) against a real backlog behind a rate limit."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.limits.holds import hold
from crondepot_testkit.processes import wait_until
from tests.support.console import World, add_job, csrf_of, login
from tests.support.nine import (
    BURST,
    LIMIT,
    bucket_row,
    last_nine,
    nine_oclock_wave,
    processes,
    queue_fire,
)

OPERATOR = "op_" + "s3cret-operator-token-of-the-test" * 2


def row_of(html: str, limit: str) -> str:
    start = html.index(f'data-limit="{limit}"')
    return html[start:html.index("</tr>", start)]


def test_limit_panel_shows_the_bucket_the_backlog_and_a_drain_estimate(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    nine_oclock_wave(conn, world.tenant_id, 300)
    before = bucket_row(conn)
    login(client, world.admin)
    page = client.get("/console/limits")
    assert page.status_code == 200
    row = row_of(page.text, LIMIT)
    assert "25/s" in row and f">{BURST}<" in row and "shared" in row
    assert re.search(r'limit-waiting">300<', row)
    assert ">~12 s<" in row                        # 300 waiting ÷ 25/s
    tokens = float(re.search(r'limit-tokens">([0-9.]+)<', row).group(1))  # type: ignore[union-attr]
    assert 0 < tokens <= BURST
    assert "estimate" in page.text
    assert bucket_row(conn) == before, "reading the panel took tokens"
    # the overview shows the same panel, and another tenant's limits never
    overview = client.get("/console").text
    assert re.search(r'limit-waiting">300<', row_of(overview, LIMIT))
    assert "otherbank" not in overview


def test_a_held_limit_says_held_and_gives_no_drain_estimate(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    nine_oclock_wave(conn, world.tenant_id, 40)
    assert hold(conn, world.tenant_id, "rate_limit", LIMIT)
    login(client, world.reader)
    row = row_of(client.get("/console/limits").text, LIMIT)
    assert ">held<" in row and "after resume" in row
    assert re.search(r'limit-waiting">40<', row)


def test_no_limit_used_says_so(client: TestClient, world: World) -> None:
    login(client, world.admin)
    assert 'id="limits-none"' in client.get("/console/limits").text


def test_status_panel_names_schedulers_leader_workers_and_the_ledger_check(
        client: TestClient, world: World, db_url: str) -> None:
    login(client, world.admin)
    bare = client.get("/console").text
    assert "none connected" in bare and "nothing rescues expired leases" in bare
    assert "none yet" in bare
    with processes(db_url):
        html = client.get("/console/limits").text
        schedulers = html[html.index('id="schedulers"'):html.index('id="leader"')]
        assert "scheduler-1" in schedulers and "scheduler-2" in schedulers
        leader = html[html.index('id="leader"'):html.index('id="workers-alive"')]
        assert "node-a" in leader and "ago" in leader
        assert "worker-1" in html[html.index('id="workers-alive"'):]
        ledger = html[html.index('id="ledger"'):]
        assert "clean: every fire since" in ledger and "checked" in ledger
        assert "fires since" not in ledger.replace("every fire since", "")  # no counts
    # They are gone once PostgreSQL has ended their sessions, which it does after the
    # clients have closed them (a busy machine shows a closed session for a moment).
    wait_until(lambda: "none connected" in client.get("/console").text, timeout=30,
               message="the console to see the schedulers gone")


def test_live_endpoint_renders_the_parts_and_refuses_without_a_session(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    assert client.get("/console/live").status_code == 401
    nine_oclock_wave(conn, world.tenant_id, 30)
    login(client, world.admin)
    page = client.get("/console").text
    assert 'data-live-src="/console/live"' in page and 'data-live="limits"' in page
    assert '<noscript><meta http-equiv="refresh" content="30"></noscript>' in page
    body = client.get("/console/live?parts=limits,tiles").json()
    assert set(body["parts"]) == {"limits", "tiles"}
    assert re.search(r'limit-waiting">30<', body["parts"]["limits"])
    assert 'id="tile-ready"' in body["parts"]["tiles"]
    everything = client.get("/console/live").json()["parts"]
    assert set(everything) == {"tiles", "queues", "limits", "system"}
    assert 'id="queue"' in everything["queues"] and "worker-1" in everything["queues"]
    assert "otherbank" not in str(everything)


def test_job_page_shows_payload_labels_spread_and_rate_limit(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    nine_oclock_wave(conn, world.tenant_id, 1)
    job = add_job(conn, world.tenant_id, key="bank42:loan", cron="0 9 * * *",
                  rate_limit=LIMIT, labels={"product": "loan", "bank": "42"},
                  spread={"seconds": 600},
                  payload={"template": "<b>due</b>", "amount": 125.5, "to": "+49 30 1234"})
    login(client, world.admin)
    html = client.get(f"/console/jobs/{job}").text
    start = html.index('id="job-payload"')
    payload = html[start:html.index("</tr>", start)]
    assert "&#34;template&#34;: &#34;&lt;b&gt;due&lt;/b&gt;&#34;" in payload
    assert "<b>due</b>" not in payload
    assert '\n  &#34;amount&#34;: 125.5,' in payload            # indented, sorted keys
    labels = html[html.index('id="job-labels"'):]
    assert "bank=42" in labels and "product=loan" in labels
    assert "under 600 s" in html[html.index('id="job-spread"'):]
    assert f">{LIMIT}</a>" in html[html.index('id="job-rate-limit"'):]
    plain = client.get(f"/console/jobs/{world.berlin}").text
    assert "none: due at the fire" in plain


# ----- the operator's view -------------------------------------------------------------------


def operator_login(client: TestClient, token: str = OPERATOR) -> Any:
    page = client.get("/console/login")
    return client.post("/console/login", data={"csrf": csrf_of(page.text), "token": token})


def test_operator_sees_every_tenant_side_by_side_read_only(
        client: TestClient, world: World, conn: psycopg.Connection[Any], db_url: str) -> None:
    client.app.state.console_operator_token = OPERATOR  # type: ignore[attr-defined]
    nine_oclock_wave(conn, world.tenant_id, 50)
    done = operator_login(client)
    assert done.status_code == 303 and done.headers["location"] == "/console/operator"
    cookie = done.headers["set-cookie"]
    assert "crondepot_console_operator=" in cookie and "HttpOnly" in cookie
    assert "Path=/console/operator" in cookie and "samesite=strict" in cookie.lower()
    assert OPERATOR not in cookie
    with processes(db_url):
        html = client.get("/console/operator").text
    tenants = html[html.index('id="tenants"'):]
    assert 'data-tenant="bank42"' in tenants and 'data-tenant="otherbank"' in tenants
    assert re.search(r'data-tenant="bank42"><td><strong>bank42</strong></td>'
                     r'<td class="num">51<', tenants)   # 50 of the wave and the world's one
    assert re.search(r'limit-waiting">50<', row_of(html, LIMIT))
    assert re.search(r'data-tenant="otherbank">.*?tenant-held">0<', tenants)
    assert "read-only" in html and "<form" in html and html.count("<form") == 1   # logout
    assert "0 unaccounted, 0 duplicated" in html and "node-a" in html   # the full check
    live = client.get("/console/operator/live").json()["parts"]
    assert set(live) == {"tenants", "limits", "system"} and "otherbank" in live["tenants"]
    # the operator cookie opens no tenant's pages
    assert client.get("/console").status_code == 303
    out = client.post("/console/operator/logout", data={"csrf": "wrong"})
    assert out.status_code == 403
    out = client.post("/console/operator/logout", data={"csrf": csrf_of(html)})
    assert out.status_code == 303
    assert client.get("/console/operator").status_code == 404


def test_a_tenant_never_sees_the_operator_view(client: TestClient, world: World) -> None:
    client.app.state.console_operator_token = OPERATOR  # type: ignore[attr-defined]
    for path in ("/console/operator", "/console/operator/live"):
        assert client.get(path).status_code == 404, path
    login(client, world.admin)
    for path in ("/console/operator", "/console/operator/live"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "otherbank" not in response.text and "bank42" not in response.text
    assert client.post("/console/operator/logout", data={"csrf": "x"}).status_code == 404
    # a forged or tampered cookie is no operator either
    for forged in ("9999999999.nonce.deadbeef", "", "a.b", "1.2.3.4"):
        client.cookies.set("crondepot_console_operator", forged, path="/console/operator")
        assert client.get("/console/operator").status_code == 404, forged


def test_an_operator_session_ends_when_it_expires_or_the_secret_changes(
        client: TestClient, world: World) -> None:
    from crondepot.api.console import operator

    client.app.state.console_operator_token = OPERATOR  # type: ignore[attr-defined]
    assert operator_login(client).status_code == 303
    assert client.get("/console/operator").status_code == 200
    client.app.state.console_operator_token = OPERATOR + "-rotated"  # type: ignore[attr-defined]
    assert client.get("/console/operator").status_code == 404
    # a cookie signed with the right key but expired
    client.app.state.console_operator_token = OPERATOR  # type: ignore[attr-defined]
    body = "1000000000.nonce"
    client.cookies.clear()
    client.cookies.set(operator.COOKIE, f"{body}.{operator._sign(OPERATOR, body)}",
                       path="/console/operator")
    assert client.get("/console/operator").status_code == 404
    body = "9999999999.nonce"          # the same cookie unexpired is one: the expiry refused it
    client.cookies.clear()
    client.cookies.set(operator.COOKIE, f"{body}.{operator._sign(OPERATOR, body)}",
                       path="/console/operator")
    assert client.get("/console/operator").status_code == 200


def test_without_an_operator_token_the_view_does_not_exist(
        client: TestClient, world: World) -> None:
    for token in (None, "short"):          # unset, or too short to be a secret: off
        client.app.state.console_operator_token = token  # type: ignore[attr-defined]
        refused = operator_login(client, token or OPERATOR)
        assert refused.status_code == 401 and "unknown or revoked" in refused.text
        assert client.get("/console/operator").status_code == 404


def test_a_limit_with_no_bucket_says_its_runs_fail_and_a_granted_one_shows_idle(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    nine_oclock_wave(conn, world.tenant_id, 0)           # the bucket, granted, no runs
    typo = add_job(conn, world.tenant_id, key="bank42:typo", cron="0 9 * * *",
                   rate_limit="sms-gatewya")
    queue_fire(conn, [typo], last_nine())
    login(client, world.admin)
    html = client.get("/console/limits").text
    assert "no such bucket" in row_of(html, "sms-gatewya")
    assert re.search(r'limit-waiting">1<', row_of(html, "sms-gatewya"))
    idle = row_of(html, LIMIT)
    assert re.search(r'limit-waiting">0<', idle) and ">~0.00 s<" in idle
