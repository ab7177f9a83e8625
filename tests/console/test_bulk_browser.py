"""The console's bulk form in a real headless Chromium: filter the jobs by label, ask to
pause every match, see the count and the keys, cancel (nothing changes), then confirm."""

from __future__ import annotations

from typing import Any

import psycopg
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from crondepot.job.store import get_job
from tests.console.test_browser import (  # noqa: F401  (fixtures)
    _login,
    _shot,
    _wait,
    browser,
    console_url,
    pytestmark,
)
from tests.support.console import World, add_job


def test_bulk_pause_asks_to_confirm_in_a_real_browser(
        browser: WebDriver, console_url: str, world: World,  # noqa: F811
        conn: psycopg.Connection[Any]) -> None:
    made = [add_job(conn, world.tenant_id, key=f"emi:{i}", cron="0 9 * * *",
                    labels={"bank": "42"}) for i in range(3)]
    _login(browser, console_url, world.admin)
    browser.get(f"{console_url}/jobs")
    _wait(browser, "input[name=label]").send_keys("bank=42")
    browser.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    # The unfiltered page has a bulk form too: wait for the filtered page itself (its URL
    # names the label), not for an element both pages show.
    WebDriverWait(browser, 15).until(lambda b: "label=bank" in b.current_url)
    _wait(browser, "#bulk-form")
    assert len(browser.find_elements(By.CSS_SELECTOR, "tr[data-job]")) == 3
    browser.find_element(By.ID, "bulk-count").click()
    question = _wait(browser, "#bulk-question")
    assert question.text == "Pause 3 job(s)?"
    assert browser.find_element(By.ID, "bulk-sample").text == "emi:0, emi:1, emi:2"
    _shot(browser, "20-bulk-confirm")
    browser.find_element(By.LINK_TEXT, "Cancel").click()
    _wait(browser, "#jobs")
    assert not any(get_job(conn, world.tenant_id, j).paused for j in made)
    browser.find_element(By.ID, "bulk-count").click()
    _wait(browser, "#confirm-bulk").click()
    assert _wait(browser, "#bulk-notice").text == "pause: 3 job(s) changed."
    _shot(browser, "21-bulk-done")
    assert all(get_job(conn, world.tenant_id, j).paused for j in made)
    assert get_job(conn, world.tenant_id, world.daily).paused is False
