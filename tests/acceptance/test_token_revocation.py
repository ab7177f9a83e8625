"""Revocation across real API processes, and the console cookie behind a TLS proxy.

Two ``crondepot api`` processes on one database: a token revoked through one is refused by
both within a second (at once: nothing caches tokens), and a console session opened on the
other ends with it. ``--forwarded-allow-ips`` makes the console cookie ``Secure`` when a
trusted proxy says the client came over https, and only then.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from crondepot.db import connect
from crondepot.tenancy.tenants import create_tenant
from crondepot_testkit.processes import free_port
from tests.support.api import start_api

CSRF = re.compile(r'name="csrf" value="([^"]+)"')




@pytest.fixture
def two_apis(db_url: str) -> Iterator[tuple[str, str]]:
    first, a = start_api(db_url)
    second, b = start_api(db_url)
    try:
        yield a, b
    finally:
        first.stop()
        second.stop()


def _login(client: httpx.Client, token: str, headers: dict[str, str] | None = None
           ) -> httpx.Response:
    page = client.get("/console/login", headers=headers)
    csrf = CSRF.search(page.text)
    assert csrf, page.text
    # The login form's cookie is sent back by hand: httpx keeps a Secure one (the proxy
    # said https) off this plain-http connection, as a browser would.
    nonce = page.cookies.get("crondepot_console_login") or ""
    return client.post("/console/login", data={"csrf": csrf.group(1), "token": token},
                       headers={**(headers or {}),
                                "Cookie": f"crondepot_console_login={nonce}"})


def test_a_token_revoked_through_one_api_process_is_refused_by_both_within_a_second(
        db_url: str, two_apis: tuple[str, str]) -> None:
    a, b = two_apis
    with connect(db_url) as conn:
        admin = create_tenant(conn, "bank42").token
    auth = {"Authorization": f"Bearer {admin}"}
    issued = httpx.post(f"{a}/v1/tokens", json={"label": "doomed"}, headers=auth).json()
    doomed = {"Authorization": f"Bearer {issued['token']}"}
    with httpx.Client(base_url=b, follow_redirects=False) as console:
        assert _login(console, issued["token"]).status_code == 303
        assert console.get("/console").status_code == 200
        for base in (a, b):
            assert httpx.get(f"{base}/v1/jobs", headers=doomed).status_code == 200
        assert httpx.delete(f"{a}/v1/tokens/{issued['id']}", headers=auth).status_code == 204
        revoked = time.monotonic()
        # The very next request on either process is refused, and the console session on
        # the other process has ended.
        answers = [httpx.get(f"{base}/v1/jobs", headers=doomed).status_code
                   for base in (b, a, b, a)]
        page = console.get("/console")
        elapsed = time.monotonic() - revoked
    assert answers == [401] * 4
    assert page.status_code == 303 and page.headers["location"] == "/console/login"
    assert elapsed < 1.0
    for base in (a, b):         # the tenant's other token is untouched
        assert httpx.get(f"{base}/v1/jobs", headers=auth).status_code == 200


def _cookie_over_proxy(db_url: str, token: str, *extra: str) -> str:
    process, base = start_api(db_url, *extra)
    try:
        with httpx.Client(base_url=base, follow_redirects=False) as client:
            done = _login(client, token, headers={"X-Forwarded-Proto": "https",
                                                  "X-Forwarded-For": "203.0.113.7"})
            assert done.status_code == 303, done.text
            return done.headers["set-cookie"]
    finally:
        process.stop()


def test_the_console_cookie_is_secure_behind_a_trusted_tls_proxy_only(db_url: str) -> None:
    with connect(db_url) as conn:
        token = create_tenant(conn, "bank42").token
    trusted = _cookie_over_proxy(db_url, token, "--forwarded-allow-ips", "127.0.0.1")
    assert "crondepot_console=" in trusted and "; Secure" in trusted
    # The same headers from a client that is not a trusted proxy, or with the option left
    # out, are ignored: anyone could send them.
    for extra in (("--forwarded-allow-ips", "10.0.0.0/8"), ()):
        cookie = _cookie_over_proxy(db_url, token, *extra)
        assert "crondepot_console=" in cookie and "Secure" not in cookie, extra


@pytest.mark.parametrize("value", ["10.0.0.300", "proxy.internal", ",", "10.0.0.1,*"])
def test_a_mistyped_proxy_address_is_refused_at_start(db_url: str, value: str) -> None:
    result = subprocess.run([sys.executable, "-m", "crondepot", "api", "--db", db_url,
                             "--port", str(free_port()), "--forwarded-allow-ips", value],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--forwarded-allow-ips" in result.stderr
    assert "expected IP addresses" in result.stderr or "at least one" in result.stderr
