"""``crondepot connections add|list|remove`` and ``tenants grant|revoke --connection`` as an
operator runs them: the URL's secret never printed, and what a tenant's ``jobs add`` then
meets (a connection not granted to it is refused, naming target.connection)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import crondepot.cli as cli_module
from tests.acceptance.test_cli_grants import Result

SECRET = "s3cr3t-pa55"


@pytest.fixture
def cli(db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("CRONDEPOT_TENANT", raising=False)

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = cli_module.main([*args, "--db", db_url])
        out, err = capsys.readouterr()
        return Result(code, out, err)
    return run


def _job(key: str, connection: str) -> str:
    return json.dumps({"key": key, "cron": "0 9 * * *", "tz": "UTC",
                       "target": {"type": "amqp", "connection": connection,
                                  "exchange": "reminders", "routing_key": "sms"}})


def test_connections_are_added_listed_without_their_secret_and_removed(cli: Any) -> None:
    url = f"amqp://crondepot:{SECRET}@mq.bank.internal:5672/%2Fsms"
    added = cli("connections", "add", "rabbit", url)
    assert added.code == 0 and SECRET not in added.out
    assert added.out.strip() == "rabbit: amqp://mq.bank.internal:5672 (added)"
    assert cli("connections", "add", "bus", "nats://127.0.0.1:4222").code == 0
    listed = cli("connections", "list", "--json")
    assert listed.code == 0 and SECRET not in listed.out and "crondepot" not in listed.out
    assert [(c["name"], c["scheme"], c["host"]) for c in listed.json()] == [
        ("bus", "nats", "127.0.0.1:4222"), ("rabbit", "amqp", "mq.bank.internal:5672")]
    changed = cli("connections", "add", "rabbit", "amqps://mq2.bank.internal")
    assert changed.out.strip() == "rabbit: amqps://mq2.bank.internal (changed)"
    assert cli("connections", "remove", "bus").code == 0
    assert [c["name"] for c in cli("connections", "list", "--json").json()] == ["rabbit"]
    gone = cli("connections", "remove", "bus")
    assert gone.code == 2 and "no connection named 'bus'" in gone.err


@pytest.mark.parametrize(("name", "url", "says"), [
    ("Rabbit", "amqp://h", "name: expected a name like 'rabbit'"),
    ("rabbit", f"https://u:{SECRET}@h/", "url: expected a scheme of amqp"),
    ("rabbit", f"amqp://u:{SECRET}@h:99999/", "url: not a valid URL"),
    ("rabbit", f"amqp://u:{SECRET}@/", "url: names no host"),
])
def test_a_bad_connection_is_refused_without_echoing_the_url(
        cli: Any, name: str, url: str, says: str) -> None:
    refused = cli("connections", "add", name, url)
    assert refused.code == 2 and says in refused.err
    assert SECRET not in refused.err + refused.out
    assert cli("connections", "list", "--json").json() == []


def test_a_tenant_names_only_the_connections_granted_to_it(cli: Any) -> None:
    for tenant in ("bank42", "otherbank"):
        assert cli("tenants", "create", tenant).code == 0
    assert cli("connections", "add", "rabbit", "amqp://guest:guest@127.0.0.1:5672/").code == 0
    refused = cli("jobs", "add", "--tenant", "bank42", _job("a", "rabbit"))
    assert refused.code == 2
    assert "target.connection: connection 'rabbit' is not one tenant bank42 may use" \
        in refused.err
    assert "crondepot tenants grant bank42 --connection rabbit" in refused.err
    granted = cli("tenants", "grant", "bank42", "--connection", "rabbit")
    assert granted.code == 0 and granted.out.strip() == "granted to bank42: connection rabbit"
    assert cli("jobs", "add", "--tenant", "bank42", _job("a", "rabbit")).code == 0
    # granted to bank42 is not granted to otherbank, and reads as a name that does not exist
    theirs = cli("jobs", "add", "--tenant", "otherbank", _job("b", "rabbit"))
    missing = cli("jobs", "add", "--tenant", "otherbank", _job("b", "rabbot"))
    assert theirs.code == missing.code == 2
    assert theirs.err.replace("rabbit", "X") == missing.err.replace("rabbot", "X")
    shown = cli("tenants", "show", "bank42", "--json").json()
    assert shown["grants"]["connections"] == ["rabbit"]
    assert cli("tenants", "revoke", "bank42", "--connection", "rabbit").code == 0
    assert cli("jobs", "add", "--tenant", "bank42", _job("c", "rabbit")).code == 2
    unknown = cli("tenants", "grant", "bank42", "--connection", "nope")
    assert unknown.code == 2 and "no connection named 'nope'" in unknown.err


def test_a_connection_grant_and_revoke_are_in_the_tenants_audit_log(
        cli: Any, db_url: str) -> None:
    from crondepot.db import connect

    assert cli("tenants", "create", "bank42").code == 0
    assert cli("connections", "add", "bus", "nats://127.0.0.1:4222").code == 0
    assert cli("tenants", "grant", "bank42", "--connection", "bus").code == 0
    assert cli("tenants", "revoke", "bank42", "--connection", "bus").code == 0
    with connect(db_url) as conn:
        rows = conn.execute("SELECT action, after -> 'connections' FROM audit_log "
                            "WHERE subject = 'grants' ORDER BY id").fetchall()
    assert rows == [("tenant.grant", ["bus"]), ("tenant.revoke", ["bus"])]


def test_a_url_may_come_from_standard_input(cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(f"redis://:{SECRET}@cache.internal:6380/0\n"))
    added = cli("connections", "add", "cache", "-")
    assert added.code == 0 and added.out.strip() == "cache: redis://cache.internal:6380 (added)"
