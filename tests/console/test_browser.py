"""The console in a real headless Chromium (Selenium with the system chromedriver).

Logs in with a tenant token, sees a job's runs, replays a dead-lettered run (and checks the
database has it queued again), and sees a read-only token refused an admin action. Every
page is saved as a screenshot under artifacts/screenshots/ (kept out of git).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import uvicorn
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import WebDriverWait

from crondepot.api import ApiSettings, create_app
from crondepot.job.store import get_job
from crondepot_testkit.processes import free_port
from tests.support.console import World, run_status

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="the browser test needs Debian's chromium at /usr/bin/chromium "
           "(apt-get install -y chromium chromium-driver)")




@pytest.fixture
def console_url(db_url: str, world: World) -> Iterator[str]:
    """The API (and its console) served by uvicorn in a thread on a free loopback port."""
    app = create_app(db_url, ApiSettings(pool_max_size=4, rate_per_second=1000, burst=1000))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="console-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/console"
    server.should_exit = True
    thread.join(timeout=30)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    assert CHROMEDRIVER.exists(), "chromium is installed but chromedriver is not " \
                                  "(apt-get install -y chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--window-size=1440,1100", f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _shot(driver: WebDriver, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1440, max(1100, min(int(height) + 140, 4000)))
    assert driver.save_screenshot(str(SHOTS / f"{name}.png"))


def text_of(driver: WebDriver, css: str) -> str:
    """The first match's visible text, or "" when nothing matches. One script finds the
    element and reads it: the live parts swap their HTML every few seconds, and a find
    followed by a separate read can fall between (a stale element reference)."""
    return str(driver.execute_script(
        "const e = document.querySelector(arguments[0]);"
        " return e ? e.innerText.trim() : '';", css))


def _wait(driver: WebDriver, css: str) -> Any:
    return WebDriverWait(driver, 15).until(
        ready.presence_of_element_located((By.CSS_SELECTOR, css)))


def _login(driver: WebDriver, base: str, token: str, shot: str | None = None) -> None:
    driver.get(f"{base}/login")
    _wait(driver, "#token").send_keys(token)
    if shot:
        _shot(driver, shot)
    driver.find_element(By.ID, "login").click()
    _wait(driver, "#tenant")


def test_console_in_a_real_browser(browser: WebDriver, console_url: str, world: World,
                                   conn: psycopg.Connection[Any]) -> None:
    base = console_url
    browser.get(base)                               # not logged in: the login page
    assert browser.current_url == f"{base}/login"
    _login(browser, base, world.admin, shot="01-login")
    assert text_of(browser, "#tenant") == "bank42"
    assert text_of(browser, "#dead-size .big") == "2"
    assert browser.find_elements(By.CSS_SELECTOR, "svg rect.ok")
    _shot(browser, "02-overview")

    # the jobs, then one job's runs
    browser.find_element(By.LINK_TEXT, "Jobs").click()
    _wait(browser, "#jobs")
    assert "bank42:daily <b>report</b>" in browser.find_element(By.ID, "jobs").text
    _shot(browser, "03-jobs")
    browser.find_element(By.CSS_SELECTOR, f'tr[data-job="{world.daily}"] a.key').click()
    runs = _wait(browser, "#runs")
    for run_id in world.dead:
        assert run_id in runs.text
    assert "timeout" in runs.text and "<script>" in runs.text   # shown as text, not run
    _shot(browser, "04-job")
    browser.get(f"{base}/jobs/{world.berlin}")
    assert "DST: moved" in _wait(browser, "#timetable").text
    _shot(browser, "05-job-timetable")

    # the dead letter: inspect a run, replay one selected run
    browser.find_element(By.LINK_TEXT, "Dead letter").click()
    _wait(browser, "#dead")
    _shot(browser, "06-dead-letter")
    browser.find_element(By.LINK_TEXT, world.dead[1]).click()
    _wait(browser, "#replay-one")
    _shot(browser, "07-run")
    browser.back()
    box = _wait(browser, f'input.pick[value="{world.dead[0]}"]')
    box.click()
    browser.find_element(By.ID, "replay-selected").click()
    assert "1 dead run(s) queued again" in _wait(browser, "#notice").text
    assert run_status(conn, world.dead[0]) == "queued"
    assert run_status(conn, world.dead[1]) == "dead"

    # everything matching a filter, after a confirmation page
    browser.find_element(By.ID, "replay-matching").click()
    _wait(browser, "#confirm-replay")
    _shot(browser, "08-replay-confirm")
    browser.find_element(By.ID, "confirm-replay").click()
    assert "1 dead run(s) queued again" in _wait(browser, "#notice").text
    assert run_status(conn, world.dead[1]) == "queued"
    assert run_status(conn, world.their_dead) == "dead"     # another tenant's: untouched

    # a read-only token sees the job and is refused pausing it
    browser.find_element(By.CSS_SELECTOR, ".who button").click()   # log out
    _wait(browser, "#token")
    _login(browser, base, world.reader)
    assert browser.find_element(By.CSS_SELECTOR, ".role").text.lower() == "read"
    browser.get(f"{base}/jobs/{world.daily}")
    _wait(browser, "#runs")
    browser.find_element(By.CSS_SELECTOR, 'button[data-action="pause"]').click()
    _confirm(browser, accept=True)                  # it asks first, then is refused
    problem = _wait(browser, "#problem")
    assert "'read' role" in problem.text and "admin" in problem.text
    assert "403" in browser.find_element(By.CSS_SELECTOR, "h1").text
    _shot(browser, "09-read-only-refused")
    assert get_job(conn, world.tenant_id, world.daily).paused is False


def _confirm(driver: WebDriver, *, accept: bool) -> str:
    """Answer the browser's confirmation dialog; return its text."""
    alert = WebDriverWait(driver, 10).until(ready.alert_is_present())
    assert alert is not False
    text: str = alert.text
    if accept:
        alert.accept()
    else:
        alert.dismiss()
    return text


def _runs_of(conn: psycopg.Connection[Any], job_id: int) -> int:
    row = conn.execute("SELECT count(*) FROM runs WHERE job_id = %s", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_pause_and_trigger_ask_for_confirmation_first(
        browser: WebDriver, console_url: str, world: World,
        conn: psycopg.Connection[Any]) -> None:
    """Cancelling the dialog changes nothing; accepting it does the action."""
    # The Berlin job has no run due this second (the world queues one of the daily
    # job's at its own second), so a trigger always adds one.
    job = world.berlin
    _login(browser, console_url, world.admin)
    browser.get(f"{console_url}/jobs/{job}")
    _wait(browser, "#runs")
    page = browser.current_url

    browser.find_element(By.CSS_SELECTOR, 'button[data-action="pause"]').click()
    assert f"Pause job {job}?" in _confirm(browser, accept=False)
    assert browser.current_url == page
    assert get_job(conn, world.tenant_id, job).paused is False

    runs = _runs_of(conn, job)
    browser.find_element(By.CSS_SELECTOR, 'button[data-action="trigger"]').click()
    assert f"Queue one run of job {job} now?" in _confirm(browser, accept=False)
    assert _runs_of(conn, job) == runs

    browser.find_element(By.CSS_SELECTOR, 'button[data-action="trigger"]').click()
    _confirm(browser, accept=True)
    _wait(browser, "#notice")
    assert _runs_of(conn, job) == runs + 1

    _wait(browser, 'button[data-action="pause"]').click()
    _confirm(browser, accept=True)
    _wait(browser, 'button[data-action="resume"]')
    assert get_job(conn, world.tenant_id, job).paused is True
    _shot(browser, "10-paused-after-confirming")
