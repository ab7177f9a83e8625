"""Fixtures for the console: the app on a fresh database, two tenants, jobs, runs, dead runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings
from crondepot.db import roles
from crondepot.tenancy.tenants import create_tenant, issue_token
from tests.support.console import World, add_job, add_run
from tests.support.pooler import api_app


@pytest.fixture
def world(conn: psycopg.Connection[Any]) -> World:
    bank = create_tenant(conn, "bank42")
    reader = issue_token(conn, bank.id, role="read", label="console test")
    other = create_tenant(conn, "otherbank")
    # Sundays of March at 02:30 in Berlin: the last one is skipped by the clock change.
    berlin = add_job(conn, bank.id, key="bank42:berlin", cron="30 2 * 3 0", tz="Europe/Berlin")
    daily = add_job(conn, bank.id, key="bank42:daily <b>report</b>", cron="*/5 * * * *",
                    priority="urgent")
    add_job(conn, bank.id, key="bank42:bulk", cron="0 3 * * *", priority="bulk")
    for minutes in (50, 40, 30, 20):
        add_run(conn, daily, minutes, "succeeded", late_seconds=minutes / 10)
    add_run(conn, daily, 15, "failed", error="HTTP 400 from target", error_class="http_4xx")
    dead = [add_run(conn, daily, minutes, "dead", attempt=6, error_class="timeout",
                    error="<script>alert('x')</script> timed out after 10 s")
            for minutes in (10, 5)]
    add_run(conn, daily, 0, "queued")
    conn.execute("INSERT INTO workers (name, host, pid, concurrency, busy) "
                 "VALUES ('worker-1', 'box-a', 4242, 8, 3)")
    theirs = add_job(conn, other.id, key="otherbank:secret-job", cron="0 1 * * *")
    their_dead = add_run(conn, theirs, 3, "dead", attempt=6, error_class="timeout",
                         error="their secret error")
    return World(tenant_id=bank.id, admin=bank.token, reader=reader, other=other.token,
                 berlin=berlin, daily=daily, theirs=theirs, their_dead=their_dead,
                 dead=list(reversed(dead)))


@pytest.fixture
def client(db_url: str) -> Iterator[TestClient]:
    """The app as it runs: connected as the runtime role, so row-level security holds
    (behind a PgBouncer with CRONDEPOT_TEST_API_POOLER=1: tests/support/pooler.py)."""
    settings = ApiSettings(pool_max_size=8, rate_per_second=1000, burst=1000)
    url = roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    with TestClient(api_app(url, settings), follow_redirects=False) as test_client:
        yield test_client
