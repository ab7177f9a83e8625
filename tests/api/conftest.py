"""Fixtures for API tests: the app on a fresh database, tenants and their tokens."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings
from crondepot.db import Q, roles
from crondepot.tenancy.tenants import hash_token, new_token
from tests.support.api import EMI, bearer, granted_tenant
from tests.support.client import Clients, serving
from tests.support.pooler import api_app


@pytest.fixture
def settings() -> ApiSettings:
    return ApiSettings(pool_max_size=12, rate_per_second=1000, burst=1000)


@pytest.fixture
def client(db_url: str, settings: ApiSettings) -> Iterator[TestClient]:
    """The app as it runs: connected as the runtime role, so row-level security holds
    (behind a PgBouncer with CRONDEPOT_TEST_API_POOLER=1: tests/support/pooler.py)."""
    with TestClient(api_app(roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE),
                            settings)) as test_client:
        yield test_client


@pytest.fixture
def tenant_id(conn: psycopg.Connection[Any]) -> int:
    """Tenant bank42 (granted as ``granted_tenant`` says)."""
    return granted_tenant(conn, "bank42").id


@pytest.fixture
def token(conn: psycopg.Connection[Any]) -> str:
    """An admin token of tenant bank42."""
    return granted_tenant(conn, "bank42").token


@pytest.fixture
def h(token: str) -> dict[str, str]:
    return bearer(token)


@pytest.fixture
def other(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Headers of another tenant's admin token."""
    return bearer(granted_tenant(conn, "otherbank").token)


@pytest.fixture
def reader(conn: psycopg.Connection[Any], token: str) -> dict[str, str]:
    """Headers of a read-only token of bank42."""
    read_token = new_token()
    tenant = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()
    assert tenant is not None
    conn.execute(Q.insert_api_token, {"tenant_id": tenant[0], "token_hash": hash_token(read_token),
                                      "role": "read", "label": "test"})
    return bearer(read_token)


@pytest.fixture
def job(client: TestClient, h: dict[str, str]) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=EMI, headers=h)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
def api_url(db_url: str, settings: ApiSettings) -> Iterator[str]:
    """The app as it runs (runtime role), served over HTTP in a thread: its base URL."""
    with serving(api_app(roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE),
                         settings)) as url:
        yield url


@pytest.fixture(params=["sync", "async"])
def clients(request: pytest.FixtureRequest, api_url: str) -> Iterator[Clients]:
    """Makes crondepot.Client (``sync``) or AsyncClient (``async``, driven step by step)
    for ``api_url``: each client test runs against both."""
    made = Clients(request.param, api_url)
    yield made
    made.close()


@pytest.fixture
def api(clients: Clients, token: str) -> Any:
    """A client of tenant bank42's admin token."""
    return clients(token)
