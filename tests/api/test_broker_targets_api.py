"""Broker targets through the API: a connection granted to the tenant is accepted and read
back by name (never a URL); one not granted, or another tenant's, is a 422 naming
target.connection that says nothing of whether it exists; bad members are 422s naming
theirs; nothing is written on a refusal."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.tenancy import connections, grants
from crondepot.tenancy.tenants import create_tenant
from tests.support.api import snapshot

GOOD: dict[str, Any] = {"key": "renewal", "cron": "0 10 1 * *", "tz": "Asia/Kolkata"}
NATS = {"type": "nats", "connection": "bus", "subject": "reminders.sms"}
AMQP = {"type": "amqp", "connection": "rabbit", "exchange": "reminders", "routing_key": "sms"}
REDIS = {"type": "redis", "connection": "cache", "stream": "reminders"}


@pytest.fixture
def granted(h: dict[str, str]) -> None:
    """bank42's token (``h``), whose tenant is granted bus, cache and rabbit
    (tests.support.api.granted_tenant)."""


@pytest.mark.parametrize("target", [NATS, AMQP, REDIS])
def test_a_broker_target_on_a_granted_connection_is_stored(
        target: dict[str, Any], client: TestClient, h: dict[str, str], granted: None) -> None:
    response = client.post("/v1/jobs", json={**GOOD, "target": target}, headers=h)
    assert response.status_code == 201, response.text
    stored = response.json()["target"]
    assert stored == {**target, "timeout_s": 10}
    assert "://" not in response.text


def test_a_connection_not_granted_is_refused_as_one_that_does_not_exist(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        granted: None) -> None:
    other = create_tenant(conn, "otherbank")
    connections.add(conn, "their-bus", "nats://10.0.0.9:4222")
    grants.grant(conn, other.id, connections=["their-bus"])
    before = snapshot(conn)
    theirs = client.post("/v1/jobs", json={**GOOD, "target": {**NATS, "connection":
                                                               "their-bus"}}, headers=h)
    nowhere = client.post("/v1/jobs", json={**GOOD, "target": {**NATS, "connection":
                                                                "no-bus"}}, headers=h)
    assert theirs.status_code == nowhere.status_code == 422
    [error] = theirs.json()["errors"]
    assert error["field"] == "target.connection"
    assert theirs.text.replace("their-bus", "X") == nowhere.text.replace("no-bus", "X")
    assert "10.0.0.9" not in theirs.text
    assert snapshot(conn) == before


@pytest.mark.parametrize(("target", "field"), [
    ({**NATS, "connection": "nats://127.0.0.1:4222"}, "target.connection"),
    ({**NATS, "subject": "reminders.*"}, "target.subject"),
    ({**NATS, "subject": ""}, "target.subject"),
    ({k: v for k, v in NATS.items() if k != "subject"}, "target.subject"),
    ({**AMQP, "routing_key": "a\nb"}, "target.routing_key"),
    ({**AMQP, "exchange": "with space"}, "target.exchange"),
    ({**AMQP, "timeout_s": 0}, "target.timeout_s"),
    ({**REDIS, "stream": "a b"}, "target.stream"),
    ({**REDIS, "url": "redis://x"}, "target.url"),
])
def test_a_bad_broker_target_is_a_422_naming_the_field(
        target: dict[str, Any], field: str, client: TestClient, h: dict[str, str],
        conn: psycopg.Connection[Any], granted: None) -> None:
    before = snapshot(conn)
    response = client.post("/v1/jobs", json={**GOOD, "target": target}, headers=h)
    assert response.status_code == 422, response.text
    assert [e["field"] for e in response.json()["errors"]] == [field]
    assert snapshot(conn) == before
