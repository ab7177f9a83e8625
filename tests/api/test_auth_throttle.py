"""Failed authentication per client address (api/throttle.py): bad bearer tokens and bad
console logins from one address are answered 429 after ten, counted by route, and the
address's good token waits too; another address is not held back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from prometheus_client.core import REGISTRY

from crondepot.api import ApiSettings
from crondepot.tenancy.tenants import new_token
from tests.support.api import bearer
from tests.support.console import csrf_of
from tests.support.pooler import api_app

ATTACKER = ("203.0.113.7", 40000)
NEIGHBOUR = ("198.51.100.9", 40000)


@pytest.fixture
def app(db_url: str, settings: ApiSettings) -> FastAPI:
    return api_app(db_url, settings)


@pytest.fixture
def attacker(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, client=ATTACKER, follow_redirects=False) as client:
        yield client


def _count(name: str, route: str) -> float:
    return REGISTRY.get_sample_value(name, {"route": route}) or 0.0


def test_ten_bad_tokens_then_429_for_that_address_only(
        app: FastAPI, attacker: TestClient, h: dict[str, str]) -> None:
    for _ in range(15):                        # no credential: refused, but guesses nothing
        assert attacker.get("/v1/jobs").status_code == 401
    for _ in range(10):
        assert attacker.get("/v1/jobs", headers=bearer(new_token())).status_code == 401
    refused = attacker.get("/v1/jobs", headers=bearer(new_token()))
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "30"
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["type"] == "https://crondepot.dev/problems/rate-limited"
    assert "failed authentications" in refused.json()["detail"]
    # The address's own good token waits too (checking it would tell a guesser it is good),
    # and a forwarded-for header from an untrusted peer changes nothing.
    assert attacker.get("/v1/jobs", headers=h).status_code == 429
    assert attacker.get("/v1/jobs", headers={**h, "X-Forwarded-For": "192.0.2.1"}) \
        .status_code == 429
    neighbour = TestClient(app, client=NEIGHBOUR)   # the same app: the lifespan is running
    assert neighbour.get("/v1/jobs", headers=h).status_code == 200
    assert neighbour.get("/v1/jobs", headers=bearer(new_token())).status_code == 401
    assert attacker.get("/v1/jobs", headers=h).status_code == 429   # still: nothing reset


def test_a_success_does_not_reset_the_count(attacker: TestClient, h: dict[str, str]) -> None:
    for _ in range(9):
        assert attacker.get("/v1/jobs", headers=bearer(new_token())).status_code == 401
        assert attacker.get("/v1/jobs", headers=h).status_code == 200
    assert attacker.get("/v1/jobs", headers=bearer(new_token())).status_code == 401
    assert attacker.get("/v1/jobs", headers=h).status_code == 429


def test_failures_and_refusals_are_counted_by_route_template(
        attacker: TestClient, token: str) -> None:
    route = "/v1/jobs/{job_id}"
    failed, refused = (_count("crondepot_auth_failures_total", route),
                       _count("crondepot_auth_throttled_total", route))
    listing = _count("crondepot_auth_failures_total", "/v1/jobs")
    for n in range(12):
        attacker.get(f"/v1/jobs/{n}", headers=bearer(new_token()))
    assert _count("crondepot_auth_failures_total", route) == failed + 10
    assert _count("crondepot_auth_throttled_total", route) == refused + 2
    assert _count("crondepot_auth_failures_total", "/v1/jobs") == listing
    assert REGISTRY.get_sample_value("crondepot_auth_failures_total",
                                     {"route": "/v1/jobs/3"}) is None


def test_console_logins_from_one_address_are_throttled(
        attacker: TestClient, token: str) -> None:
    before = _count("crondepot_auth_failures_total", "/console/login")
    for _ in range(10):
        page = attacker.get("/console/login")
        wrong = attacker.post("/console/login", data={"csrf": csrf_of(page.text),
                                                      "token": new_token()})
        assert wrong.status_code == 401
    assert _count("crondepot_auth_failures_total", "/console/login") == before + 10
    page = attacker.get("/console/login")
    refused = attacker.post("/console/login", data={"csrf": csrf_of(page.text),
                                                    "token": token})
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "30"
    assert "crondepot_console=" not in refused.headers.get("set-cookie", "")
    # the API's routes share the address's count
    assert attacker.get("/v1/jobs", headers=bearer(token)).status_code == 429
