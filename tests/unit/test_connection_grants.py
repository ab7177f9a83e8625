"""Connections without a database: what a read may show of a URL, which URLs are taken, and
a worker's refusal of a run whose connection grant went away after it was queued."""

from __future__ import annotations

import pytest

from crondepot.tenancy.connections import InvalidConnection, check_url, redacted
from crondepot.tenancy.grants import GrantMissing, TenantUses, run_refusal


@pytest.mark.parametrize(("url", "shown"), [
    ("amqp://sms:secret@mq.bank.internal:5672/%2F", ("amqp", "mq.bank.internal:5672")),
    ("rediss://:secret@redis.internal/0", ("rediss", "redis.internal")),
    ("nats://u:p@[::1]:4222", ("nats", "::1:4222")),
])
def test_a_read_shows_the_scheme_and_host_only(url: str, shown: tuple[str, str]) -> None:
    assert redacted(url) == shown
    assert "secret" not in "".join(redacted(url))


@pytest.mark.parametrize("url", ["http://h/", "amqp://", "redis://h:0x/", "nats:/h", ""])
def test_a_url_of_no_broker_is_refused_without_echoing_it(url: str) -> None:
    with pytest.raises(InvalidConnection) as err:
        check_url(url.replace("h", "user:hunter2@h") if url else url)
    assert "hunter2" not in str(err.value)


def test_a_worker_refuses_a_run_whose_connection_is_no_longer_granted() -> None:
    uses = TenantUses(tenant="bank42", handlers=frozenset(), limits=frozenset(),
                      connections=frozenset({"rabbit"}))
    target = {"type": "nats", "connection": "bus", "subject": "reminders.sms"}
    refused = run_refusal(target, None, uses)
    assert isinstance(refused, GrantMissing) and "connection 'bus'" in str(refused)
    assert run_refusal({**target, "connection": "rabbit"}, None, uses) is None
