"""The 9:00 console in a real headless Chromium against a real API server (uvicorn) and a
real backlog behind a 25/s rate limit: the limit panel and the status panel refresh
themselves as the database changes, the job page shows its payload block, the operator
sees every tenant, and /redoc loads nothing from outside. Screenshots go to the test's
tmp_path (nothing is attached to git). Every wait is on a condition, never on the clock;
nothing here depends on the current second (the world's queued run of "now" is never
triggered)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import uvicorn
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from crondepot.api import ApiSettings, create_app
from crondepot.db import roles
from crondepot.limits.holds import hold
from crondepot_testkit.processes import free_port
from tests.console.test_browser import CHROMIUM, browser, text_of  # noqa: F401
from tests.support.console import World, add_job
from tests.support.nine import LIMIT, last_nine, nine_oclock_wave, processes, queue_fire

OPERATOR = "op_" + "browser-operator-token-of-the-test" * 2

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium")


@pytest.fixture
def server(db_url: str, world: World) -> Iterator[str]:
    """The API served by uvicorn on a free loopback port, as the runtime role, with an
    operator token; yields its root URL."""
    app = create_app(roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE),
                     ApiSettings(pool_max_size=4, rate_per_second=1000, burst=1000))
    app.state.console_operator_token = OPERATOR
    port = free_port()
    uv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                       lifespan="on"))
    thread = threading.Thread(target=uv.run, name="nine-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    uv.should_exit = True
    thread.join(timeout=30)


def _until(driver: WebDriver, check: Any, what: str, timeout: float = 20) -> Any:
    return WebDriverWait(driver, timeout).until(lambda d: check(d), message=what)


def _shot(driver: WebDriver, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1440, max(1000, min(int(height) + 140, 4000)))
    assert driver.save_screenshot(str(folder / f"{name}.png"))


def _login(driver: WebDriver, root: str, token: str, lands: str) -> None:
    driver.get(f"{root}/console/login")
    _until(driver, lambda d: d.find_elements(By.ID, "token"), "the login form")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "login").click()
    _until(driver, lambda d: d.find_elements(By.CSS_SELECTOR, lands), f"{lands} after login")


def test_the_nine_oclock_panels_in_chromium(
        browser: WebDriver, server: str, world: World, conn: psycopg.Connection[Any],  # noqa: F811
        db_url: str, tmp_path: Path) -> None:
    shots = tmp_path / "screenshots"
    ids = nine_oclock_wave(conn, world.tenant_id, 300)
    waiting = f'#limit-panel tr[data-limit="{LIMIT}"] .limit-waiting'

    # the overview: the backlog behind the limit, and no scheduler connected
    _login(browser, server, world.admin, "#tenant")
    assert text_of(browser, waiting) == "300"
    assert "none connected" in text_of(browser, "#schedulers")
    _shot(browser, shots, "01-overview-wave")

    # it refreshes itself: the next fire's runs, the schedulers and the leader appear
    # without a reload (the page's own marker survives: no navigation happened)
    browser.execute_script("document.body.setAttribute('data-not-reloaded', 'yes')")
    queue_fire(conn, ids[:100], last_nine() - 86_400)     # yesterday's, still queued
    _until(browser, lambda d: text_of(d, waiting) == "400", "the panel to show 400 waiting")
    _until(browser, lambda d: "400" in text_of(d, "#queue"), "the queue depth to follow")
    with processes(db_url):
        _until(browser, lambda d: "scheduler-2" in text_of(d, "#schedulers"), "schedulers")
        assert "node-a" in text_of(browser, "#leader")
        assert "clean" in text_of(browser, "#ledger")
        assert browser.find_element(By.TAG_NAME, "body").get_attribute(
            "data-not-reloaded") == "yes"
        _shot(browser, shots, "02-overview-live")

        # the limit panel, then a hold: "held", no drain estimate
        browser.find_element(By.LINK_TEXT, "Limits").click()
        _until(browser, lambda d: text_of(d, waiting) == "400", "the limit panel")
        assert "~16 s" in text_of(browser, f'tr[data-limit="{LIMIT}"] .limit-drain')
        hold(conn, world.tenant_id, "rate_limit", LIMIT)
        _until(browser, lambda d: "held" in text_of(d, f'tr[data-limit="{LIMIT}"] .limit-held'),
               "the hold to show")
        assert "after resume" in text_of(browser, f'tr[data-limit="{LIMIT}"] .limit-drain')
        _shot(browser, shots, "03-limits-held")

    # the job page: payload (escaped, indented), labels, spread, rate limit
    job = add_job(conn, world.tenant_id, key="bank42:renewal", cron="0 9 * * *",
                  rate_limit=LIMIT, labels={"product": "renewal"}, spread={"seconds": 300},
                  payload={"text": "<script>alert(1)</script> renew by Friday", "n": 2})
    browser.get(f"{server}/console/jobs/{job}")
    payload = _until(browser, lambda d: text_of(d, "#job-payload pre"), "the payload")
    assert '"text": "<script>alert(1)</script> renew by Friday"' in payload
    assert '\n  "n": 2' in payload
    assert "product=renewal" in text_of(browser, "#job-labels")
    assert LIMIT in text_of(browser, "#job-rate-limit")
    assert "300 s" in text_of(browser, "#job-spread")
    _shot(browser, shots, "04-job-payload")

    # a tenant asking for the operator view: not found
    browser.get(f"{server}/console/operator")
    assert "404" in text_of(browser, "h1") and "bank42" not in text_of(browser, "main")

    # the operator: every tenant side by side, refreshed live
    browser.delete_all_cookies()
    _login(browser, server, OPERATOR, "#tenants")
    assert browser.current_url == f"{server}/console/operator"
    bank = 'tr[data-tenant="bank42"] td:nth-child(2)'
    other = 'tr[data-tenant="otherbank"] td:nth-child(2)'
    # bank42's 400 are held (not ready): the world's one queued run is
    assert text_of(browser, bank) == "1" and text_of(browser, other) == "0"
    assert "held" in text_of(browser, f'tr[data-limit="{LIMIT}"] .limit-held')
    theirs = add_job(conn, _other_id(conn), key="ob:nine", cron="0 9 * * *")
    queue_fire(conn, [theirs], last_nine())
    _until(browser, lambda d: text_of(d, other) == "1", "otherbank's queue to refresh")
    _shot(browser, shots, "05-operator")

    # /redoc: rendered from the app's own files, nothing fetched from elsewhere
    browser.get(f"{server}/redoc")
    _until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".api-content"), "ReDoc")
    names = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name)")
    assert names and all(n.startswith(server) for n in names), names
    _shot(browser, shots, "06-redoc")
    assert len(list(shots.glob("*.png"))) == 6


def _other_id(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT id FROM tenants WHERE name = 'otherbank'").fetchone()
    assert row is not None
    return int(row[0])
