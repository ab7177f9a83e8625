"""What API tests share beyond their fixtures: a sample job document, the bearer header, a
snapshot of every job and run (to show a refused request changed nothing), and a tenant
granted what the sample job names."""

from __future__ import annotations

from typing import Any

import httpx
import psycopg

from crondepot.limits.buckets import set_limit
from crondepot.tenancy import connections
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import NewTenant, create_tenant
from crondepot_testkit.processes import Proc, free_port, wait_until
from tests.support.jobs import TEST_HANDLERS

EMI: dict[str, Any] = {
    "key": "bank42:48213:emi", "cron": "0 9 5 * *", "tz": "Asia/Kolkata",
    "priority": "normal",
    "target": {"type": "http", "url": "https://hooks.example.com/emi", "timeout_s": 10,
               "dedupes": True},
    "payload": {"loan": 48213},
    "misfire": {"policy": "skip_after_local_time", "until": "20:00"},
    "catchup": "all", "spread": {"seconds": 1800, "key": "48213"},
    "max_attempts": 6, "lease_seconds": 60, "rate_limit": "sms-gateway",
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def snapshot(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    """Every row of jobs and runs, hashed: equal snapshots mean nothing changed."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM jobs), (SELECT count(*) FROM runs),"
        " (SELECT md5(coalesce(string_agg(j::text, ',' ORDER BY id), '')) FROM jobs j),"
        " (SELECT md5(coalesce(string_agg(r::text, ',' ORDER BY run_id), '')) FROM runs r)"
    ).fetchone()
    assert row is not None
    return tuple(row)


# The connections of the broker examples (api/models.py), on this machine's brokers.
BROKER_CONNECTIONS = {"bus": "nats://127.0.0.1:4222", "cache": "redis://127.0.0.1:6379/0",
                      "rabbit": "amqp://guest:guest@127.0.0.1:5672/%2F"}


def granted_tenant(conn: psycopg.Connection[Any], name: str) -> NewTenant:
    """A new tenant (with its admin token) that may use the test handlers, the shared
    limit sms-gateway (EMI names it) and the broker connections the OpenAPI examples name
    (BROKER_CONNECTIONS), as an operator would have granted them."""
    made = create_tenant(conn, name)
    set_limit(conn, "sms-gateway", 450, 50)
    for connection, url in BROKER_CONNECTIONS.items():
        connections.add(conn, connection, url)
    grant(conn, made.id, handlers=TEST_HANDLERS, limits=["sms-gateway"],
          connections=BROKER_CONNECTIONS)
    return made


def start_api(db_url: str, *extra: str,
              env: dict[str, str] | None = None) -> tuple[Proc, str]:
    """A ``crondepot api`` process on a free port, once it answers /healthz; and its base
    URL. The caller stops it."""
    port = free_port()
    process = Proc("api", "--db", db_url, "--port", str(port), *extra, env=env)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert process.popen.poll() is None, process.output()
        try:
            return httpx.get(f"{base}/healthz", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, timeout=30, interval=0.1, message="the API to start")
    return process, base
