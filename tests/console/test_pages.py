"""The console over HTTP (TestClient): login, every page, isolation, roles and CSRF."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api.console import views
from crondepot.job.store import get_job
from tests.support.console import World, csrf_of, login, run_status


def table(html: str, table_id: str) -> str:
    """The HTML of the table with this id."""
    start = html.index(f'id="{table_id}"')
    return html[start:html.index("</table>", start)]


def test_pages_need_a_login(client: TestClient, world: World) -> None:
    for path in ("/console", "/console/jobs", f"/console/jobs/{world.daily}",
                 "/console/dead-letter", f"/console/runs/{world.dead[0]}"):
        response = client.get(path)
        assert response.status_code == 303, path
        assert response.headers["location"] == "/console/login"
    client.cookies.set("crondepot_console", "cdp_not-a-token", path="/console")
    assert client.get("/console").headers["location"] == "/console/login"


def test_login_keeps_the_token_in_a_strict_httponly_cookie_and_logout_drops_it(
        client: TestClient, world: World) -> None:
    page = client.get("/console/login")
    wrong = client.post("/console/login", data={"csrf": csrf_of(page.text),
                                                "token": "cdp_nope"})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.text
    page = client.get("/console/login")
    done = client.post("/console/login", data={"csrf": csrf_of(page.text),
                                               "token": world.admin})
    cookie = done.headers["set-cookie"]
    assert "crondepot_console=" in cookie and "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert "Path=/console" in cookie
    overview = client.get("/console")
    assert ">bank42<" in overview.text and "role-admin" in overview.text
    out = client.post("/console/logout", data={"csrf": csrf_of(overview.text)})
    assert out.status_code == 303 and out.headers["location"] == "/console/login"
    assert client.get("/console").status_code == 303


def test_login_form_needs_its_csrf_token(client: TestClient, world: World) -> None:
    client.get("/console/login")
    response = client.post("/console/login", data={"token": world.admin})
    assert response.status_code == 403
    assert "crondepot_console=" not in response.headers.get("set-cookie", "")


def test_overview_shows_states_charts_queue_dead_letter_and_workers(
        client: TestClient, world: World) -> None:
    login(client, world.admin)
    html = client.get("/console").text
    assert re.search(r'id="dead-size"><div class="big">2<', html)
    states = table(html, "states")
    assert re.search(r"st-succeeded\">succeeded</span></td><td class=\"num\"><a [^>]*>4<",
                     states)
    assert re.search(r"st-dead\">dead</span></td><td class=\"num\"><a [^>]*>2<", states)
    assert html.count('<rect class="ok"') >= 1 and '<rect class="bad"' in html
    assert '<polyline class="line avg"' in html
    assert "worker-1" in html and "box-a" in html
    queue = table(html, "queue")
    assert re.search(r"<td>urgent</td><td class=\"num\">1</td>", queue)
    assert "otherbank" not in html


def test_jobs_page_filters_and_shows_next_fires_and_last_runs(
        client: TestClient, world: World) -> None:
    login(client, world.admin)
    html = client.get("/console/jobs").text
    assert "bank42:berlin" in html and "bank42:bulk" in html
    assert "otherbank" not in html
    assert "&lt;b&gt;report&lt;/b&gt;" in html and "<b>report</b>" not in html
    assert 'data-action="pause"' in html and 'data-action="trigger"' in html
    # both ask first (console.js turns data-confirm into a confirmation dialog)
    assert f'data-confirm="Pause job {world.daily}?' in html
    assert f'data-confirm="Queue one run of job {world.daily} now?' in html
    row = html[html.index(f'data-job="{world.daily}"'):]
    row = row[:row.index("</tr>")]
    assert "st-queued" in row   # its newest run
    only_bulk = client.get("/console/jobs", params={"priority": "bulk"}).text
    assert "bank42:bulk" in only_bulk and "bank42:berlin" not in only_bulk
    by_prefix = client.get("/console/jobs", params={"key_prefix": "bank42:ber"}).text
    assert "bank42:berlin" in by_prefix and "bank42:bulk" not in by_prefix


def test_dst_notes_of_the_timetable(conn: psycopg.Connection[Any], world: World) -> None:
    job = get_job(conn, world.tenant_id, world.berlin)
    fires = views.fires(job, 10, now=datetime(2025, 3, 1, tzinfo=UTC))
    assert [f.local.day for f in fires[:5]] == [2, 9, 16, 23, 30]
    assert [f.note for f in fires[:5]] == [None, None, None, None, "moved"]
    assert fires[4].local.hour == 3 and "skipped" in fires[4].note_text


def test_job_page_shows_timetable_runs_attempts_errors_and_lateness(
        client: TestClient, world: World) -> None:
    login(client, world.admin)
    berlin = client.get(f"/console/jobs/{world.berlin}").text
    timetable = table(berlin, "timetable")
    assert timetable.count("<tr>") == 11            # header + 10 fires
    assert "DST: moved" in timetable                # a March in the next 10 Sundays of March
    html = client.get(f"/console/jobs/{world.daily}").text
    runs = table(html, "runs")
    assert runs.count("st-succeeded") == 4 and runs.count("st-dead") == 2
    assert runs.count('<td class="num">6/') == 2    # attempts of the dead runs
    assert "http_4xx" in runs and "HTTP 400 from target" in runs
    assert "5.00 s" in runs                         # lateness of the run 50 minutes ago
    assert "&lt;script&gt;" in runs and "<script>alert" not in html
    limited = client.get(f"/console/jobs/{world.daily}", params={"runs": "2"}).text
    assert table(limited, "runs").count("<tr>") == 3


def test_job_page_shows_the_retry_curve(client: TestClient, world: World,
                                        conn: psycopg.Connection[Any]) -> None:
    login(client, world.admin)
    html = client.get(f"/console/jobs/{world.daily}").text
    assert ('id="retry-curve">6 attempts; waits up to 30, 60, 120, 240, 480 s (random from 0,'
            ' cap 600 s)') in html
    conn.execute("UPDATE jobs SET max_attempts = 3, retry_base_s = 1, retry_cap_s = 2 "
                 "WHERE id = %s", (world.daily,))
    html = client.get(f"/console/jobs/{world.daily}").text
    assert 'id="retry-curve">3 attempts; waits up to 1, 2 s (random from 0, cap 2 s)' in html


def test_job_page_shows_the_calendar(client: TestClient, world: World,
                                     conn: psycopg.Connection[Any]) -> None:
    login(client, world.admin)
    assert 'id="calendar"' not in client.get(f"/console/jobs/{world.daily}").text
    conn.execute("""UPDATE jobs SET calendar = '{"exclude": "in-bank-holidays", "on_excluded":
                 "previous_business_day", "business_days": "mon-fri"}' WHERE id = %s""",
                 (world.daily,))
    html = client.get(f"/console/jobs/{world.daily}").text
    assert ('id="calendar">in-bank-holidays: a fire on one of its dates moves to the business '
            'day before (business days mon-fri)') in html


def test_job_page_shows_the_delivery_window(client: TestClient, world: World,
                                            conn: psycopg.Connection[Any]) -> None:
    login(client, world.admin)
    html = client.get(f"/console/jobs/{world.daily}").text
    assert 'id="delivery-window">none (the tenant has no default)' in html
    assert "delivery window" not in table(html, "timetable")   # no column without one
    conn.execute("UPDATE tenants SET delivery_window = %s",
                 ('{"from": "09:00", "to": "21:00", "outside": "skip"}',))
    html = client.get(f"/console/jobs/{world.daily}").text
    assert ('id="delivery-window">the tenant\'s default: 09:00-21:00 every day, '
            'outside: skip') in html
    conn.execute("UPDATE jobs SET delivery_window = %s WHERE id = %s",
                 ('{"from": "09:00", "to": "09:01", "outside": "defer"}', world.daily))
    html = client.get(f"/console/jobs/{world.daily}").text
    assert 'id="delivery-window">09:00-09:01 every day, outside: defer' in html
    # the next fires say where the window puts them (a minute's window: most wait)
    timetable = table(html, "timetable")
    assert "<th>delivery window</th>" in timetable and "deferred to" in timetable


def test_job_page_shows_the_overlap_policy(client: TestClient, world: World,
                                           conn: psycopg.Connection[Any]) -> None:
    login(client, world.admin)
    html = client.get(f"/console/jobs/{world.daily}").text
    assert 'id="overlap">allow: a fire runs even while the previous run' in html
    conn.execute("UPDATE jobs SET overlap = 'skip' WHERE id = %s", (world.daily,))
    html = client.get(f"/console/jobs/{world.daily}").text
    assert 'id="overlap">skip: a fire that comes while a run of this job is running' in html
    conn.execute("UPDATE jobs SET overlap = 'replace' WHERE id = %s", (world.daily,))
    html = client.get(f"/console/jobs/{world.daily}").text
    assert "and the running run gives way: an async handler is cancelled" in html


def test_run_page(client: TestClient, world: World) -> None:
    login(client, world.admin)
    html = client.get(f"/console/runs/{world.dead[0]}").text
    assert world.dead[0] in html and "timeout" in html and 'id="replay-one"' in html


def test_another_tenants_job_and_runs_are_not_found(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    for path in (f"/console/jobs/{world.theirs}", f"/console/runs/{world.their_dead}",
                 "/console/jobs/999999", "/console/jobs/abc", "/console/runs/1:1"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "otherbank" not in response.text and "secret" not in response.text
    pause = client.post(f"/console/jobs/{world.theirs}/pause", data={"csrf": csrf})
    assert pause.status_code == 404
    assert get_job(conn, _tenant(conn, "otherbank"), world.theirs).paused is False
    dead = client.get("/console/dead-letter").text
    assert world.their_dead not in dead and "their secret error" not in dead
    replay = client.post("/console/dead-letter/replay",
                         data={"csrf": csrf, "mode": "selected", "run_id": world.their_dead})
    assert replay.status_code == 303 and "replayed=0" in replay.headers["location"]
    assert run_status(conn, world.their_dead) == "dead"


def _tenant(conn: psycopg.Connection[Any], name: str) -> int:
    row = conn.execute("SELECT id FROM tenants WHERE name = %s", (name,)).fetchone()
    assert row is not None
    tenant_id: int = row[0]
    return tenant_id


@pytest.mark.parametrize("action", ["pause", "trigger"])
def test_a_read_token_sees_everything_but_is_refused_changes(
        client: TestClient, world: World, conn: psycopg.Connection[Any], action: str) -> None:
    csrf = login(client, world.reader)
    for path in ("/console", "/console/jobs", f"/console/jobs/{world.daily}",
                 "/console/dead-letter", f"/console/runs/{world.dead[0]}"):
        assert client.get(path).status_code == 200, path
    runs_before = conn.execute("SELECT count(*) FROM runs").fetchone()
    refused = client.post(f"/console/jobs/{world.daily}/{action}", data={"csrf": csrf})
    assert refused.status_code == 403
    assert "read" in refused.text and "admin" in refused.text
    assert get_job(conn, world.tenant_id, world.daily).paused is False
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == runs_before
    replay = client.post("/console/dead-letter/replay",
                         data={"csrf": csrf, "mode": "selected", "run_id": world.dead[0]})
    assert replay.status_code == 403 and "replay" in replay.text
    everything = client.post("/console/dead-letter/replay",
                             data={"csrf": csrf, "mode": "matching", "confirm": "yes"})
    assert everything.status_code == 403
    assert run_status(conn, world.dead[0]) == "dead"


def test_posts_without_the_sessions_csrf_token_are_refused(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    login(client, world.admin)
    for data in ({}, {"csrf": ""}, {"csrf": "0" * 64}):
        assert client.post(f"/console/jobs/{world.daily}/pause", data=data).status_code == 403
        replay = client.post("/console/dead-letter/replay",
                             data={**data, "mode": "selected", "run_id": world.dead[0]})
        assert replay.status_code == 403 and "CSRF" in replay.text
    assert get_job(conn, world.tenant_id, world.daily).paused is False
    assert run_status(conn, world.dead[0]) == "dead"
    # another session's token does not do either
    other = TestClient(client.app, follow_redirects=False)
    other_csrf = login(other, world.reader)
    assert client.post(f"/console/jobs/{world.daily}/pause",
                       data={"csrf": other_csrf}).status_code == 403


def test_admin_pauses_resumes_and_triggers(client: TestClient, world: World,
                                           conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    paused = client.post(f"/console/jobs/{world.daily}/pause",
                         data={"csrf": csrf, "back": "/console/jobs?priority=urgent"})
    assert paused.status_code == 303
    assert paused.headers["location"] == "/console/jobs?priority=urgent&notice=paused"
    assert get_job(conn, world.tenant_id, world.daily).paused is True
    page = client.get(paused.headers["location"]).text
    assert "Job paused" in page and 'data-action="resume"' in page
    client.post(f"/console/jobs/{world.daily}/resume", data={"csrf": csrf})
    assert get_job(conn, world.tenant_id, world.daily).paused is False
    runs = conn.execute("SELECT count(*) FROM runs WHERE job_id = %s",
                        (world.berlin,)).fetchone()
    assert runs == (0,)
    trig = client.post(f"/console/jobs/{world.berlin}/trigger",
                       data={"csrf": csrf, "back": "https://evil.example/"})
    (run_id,) = conn.execute("SELECT run_id FROM runs WHERE job_id = %s AND status = "
                             "'queued'", (world.berlin,)).fetchone() or (None,)
    assert trig.headers["location"] == (f"/console/jobs/{world.berlin}?notice=triggered&"
                                        f"run={run_id.replace(':', '%3A')}")
    assert f"Run {run_id} was queued" in client.get(trig.headers["location"]).text
    # The same second again: the page says which run already stands for it.
    again = client.get(f"/console/jobs/{world.berlin}?notice=already&run={run_id}").text
    assert f"Already queued: run {run_id}" in again
    # audited like the API: the token is the actor (auth.principal names it); the world's
    # setup named none, and is recorded as role:<user>
    actors = {row[0] for row in conn.execute(
        "SELECT actor FROM audit_log WHERE actor NOT LIKE 'role:%'")}
    assert actors and all(a.startswith("token:") and a.endswith("@bank42") for a in actors)


def test_dead_letter_filter_inspect_and_replay_selected(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    html = client.get("/console/dead-letter").text
    assert all(run in html for run in world.dead)
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in html
    assert client.get("/console/dead-letter", params={"error": "http_4xx"}
                      ).text.count('class="pick"') == 0
    assert client.get("/console/dead-letter", params={"error": "timed out"}
                      ).text.count('class="pick"') == 2
    assert client.get("/console/dead-letter", params={"job_id": str(world.berlin)}
                      ).text.count('class="pick"') == 0
    assert client.get("/console/dead-letter", params={"since": "2999-01-01T00:00"}
                      ).text.count('class="pick"') == 0
    assert client.get("/console/dead-letter", params={"since": "soon"}).status_code == 422
    done = client.post("/console/dead-letter/replay",
                       data={"csrf": csrf, "mode": "selected", "run_id": world.dead[0]})
    assert done.status_code == 303
    assert done.headers["location"] == "/console/dead-letter?replayed=1"
    assert "1 dead run(s) queued again" in client.get(done.headers["location"]).text
    assert run_status(conn, world.dead[0]) == "queued"
    assert run_status(conn, world.dead[1]) == "dead"
    nothing = client.post("/console/dead-letter/replay", data={"csrf": csrf, "mode": "selected"})
    assert nothing.status_code == 422


def test_replay_everything_matching_asks_first(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    csrf = login(client, world.admin)
    unconfirmed = client.post("/console/dead-letter/replay",
                              data={"csrf": csrf, "mode": "matching", "error": "timeout"})
    assert unconfirmed.status_code == 303
    assert unconfirmed.headers["location"].startswith("/console/dead-letter/replay?")
    assert run_status(conn, world.dead[0]) == "dead"
    confirm = client.get(unconfirmed.headers["location"])
    assert "Replay 2 dead run(s)?" in confirm.text and world.their_dead not in confirm.text
    form = dict(re.findall(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">',
                           confirm.text))
    assert form["confirm"] == "yes" and form["mode"] == "matching" and form["error"] == "timeout"
    done = client.post("/console/dead-letter/replay", data=form)
    assert done.headers["location"] == "/console/dead-letter?replayed=2"
    assert [run_status(conn, r) for r in world.dead] == ["queued", "queued"]
    assert run_status(conn, world.their_dead) == "dead"


def test_pages_send_security_headers_and_static_files_are_local(
        client: TestClient, world: World) -> None:
    login(client, world.admin)
    page = client.get("/console")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert "https://" not in page.text.replace("https://hooks", "")
    for name, kind in (("console.css", "text/css"), ("console.js", "text/javascript")):
        asset = client.get(f"/console/static/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind)
    assert client.get("/console/static/..%2Fsession.py").status_code == 404
    assert client.get("/console/static/routes.py").status_code == 404


def test_the_api_still_answers_problems(client: TestClient, world: World) -> None:
    response = client.get(f"/v1/jobs/{world.theirs}",
                          headers={"Authorization": f"Bearer {world.admin}"})
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"


def test_lists_page_with_cursor_and_a_job_is_named_by_id_or_key(
        client: TestClient, world: World, conn: psycopg.Connection[Any]) -> None:
    """One paging style (?cursor=, as in the API and the CLI) and a job by id or key in
    the dead letter's filter, where a key of no job of this tenant's matches nothing."""
    login(client, world.admin)
    for job in ("bank42:daily <b>report</b>", str(world.daily)):
        assert client.get("/console/dead-letter", params={"job_id": job}
                          ).text.count('class="pick"') == 2
    for job in ("otherbank:secret-job", "no-such-key", "key:", "key:99999999999999999999"):
        page = client.get("/console/dead-letter", params={"job_id": job})
        assert page.status_code == 200 and page.text.count('class="pick"') == 0, job
    conn.execute("UPDATE runs SET status = 'dead', finished_at = now(), attempt = 6 "
                 "WHERE job_id = %s AND status <> 'dead'", (world.daily,))
    dead = conn.execute("SELECT count(*) FROM runs WHERE status = 'dead' AND job_id = %s",
                        (world.daily,)).fetchone()
    assert dead is not None
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at, status, attempt, finished_at, error_class) "
                 "SELECT %(job)s || ':' || (1700000000 + n * 60), %(job)s, %(tenant)s, "
                 "'normal', to_timestamp(1700000000 + n * 60), to_timestamp(1700000000 + "
                 "n * 60), now(), 'dead', 6, to_timestamp(1700000000 + n * 60), 'timeout' "
                 "FROM generate_series(1, 250) AS n",
                 {"job": world.daily, "tenant": world.tenant_id})
    seen: list[str] = []
    url = "/console/dead-letter"
    while url:
        html = client.get(url).text
        seen += re.findall(r'name="run_id" value="([^"]+)"', html)
        found = re.search(r'href="(/console/dead-letter\?[^"]*cursor=[^"]*)" id="next-page"',
                          html)
        url = found.group(1).replace("&amp;", "&") if found else ""
    total = 250 + int(dead[0])
    assert len(seen) == len(set(seen)) == total
    # the count is of them all, on every page
    assert f"{total} run(s) match" in client.get("/console/dead-letter").text
    assert client.get("/console/dead-letter", params={"cursor": "x"}).status_code == 422
    jobs_page = client.get("/console/jobs", params={"cursor": str(world.daily)}).text
    assert "bank42:berlin" not in jobs_page and "bank42:bulk" in jobs_page
