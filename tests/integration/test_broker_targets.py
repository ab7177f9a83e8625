"""The broker targets' calls against the real brokers on loopback (RabbitMQ, NATS
JetStream, Redis): what they publish and read back, that a repeat of a run adds nothing at
the deduplicating brokers (NATS, Redis), and that an unroutable AMQP publish fails the
attempt for good. Each test skips, naming its broker, when that broker is not running."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from crondepot.base.errors import PermanentError, TemporaryError
from crondepot.worker.targets import amqp, nats, redis
from crondepot.worker.targets.base import TargetSetup
from crondepot.worker.webhook_keys import SigningKeys
from crondepot_testkit.brokers import NatsServer
from crondepot_testkit.processes import wait_until
from tests.support import brokers

_BODY_KEYS = {"run_id", "job_id", "job_key", "scheduled_at", "due_at", "attempt", "payload"}


def _setup() -> TargetSetup:
    names = {"rabbit": brokers.AMQP_URL, "bus": brokers.NATS_URL, "cache": brokers.REDIS_URL}

    def url(name: str) -> str:
        return names[name]

    def no_webhooks() -> Any:
        raise AssertionError("a broker target made an HTTP client")

    return TargetSetup(webhooks=no_webhooks, signing_keys=SigningKeys(lambda: []),
                       connections=url)


# -- NATS JetStream ------------------------------------------------------------------------

_made: list[Any] = []


@pytest.fixture(autouse=True)
def _close_nats_targets() -> Iterator[None]:
    # A NATS client left open reconnects, and logs it, for the rest of the process: the
    # servers some tests stop would otherwise fill later tests' captured logs.
    yield
    while _made:
        _made.pop().close()


def _nats_target(setup: TargetSetup) -> Any:
    target = nats.make(setup)
    _made.append(target)
    return target


@pytest.fixture
def nats_subject() -> Iterator[tuple[str, str]]:
    brokers.require("nats")
    prefix = brokers.unique("crondepot-test.s")
    for stream in brokers.nats_stream(prefix):
        yield stream, f"{prefix}.reminders.sms"


def test_nats_publishes_the_webhook_body_with_the_run_id_as_msg_id(
        nats_subject: tuple[str, str]) -> None:
    stream, subject = nats_subject
    target = _nats_target(_setup())
    run = brokers.claimed("7:1791171000", {"type": "nats", "connection": "bus",
                                           "subject": subject, "timeout_s": 5})
    result = target.call(run, "bank42")
    assert result is not None and result["duplicate"] is False and result["stream"] == stream
    [(data, headers)] = brokers.nats_messages(stream)
    body = json.loads(data)
    assert set(body) == _BODY_KEYS
    assert body["run_id"] == "7:1791171000" and body["payload"] == {"sms": "bill due"}
    assert headers["Nats-Msg-Id"] == "7:1791171000"


def test_nats_a_repeat_of_the_same_run_is_stored_once(nats_subject: tuple[str, str]) -> None:
    stream, subject = nats_subject
    target = _nats_target(_setup())
    doc = {"type": "nats", "connection": "bus", "subject": subject, "timeout_s": 5}
    first = target.call(brokers.claimed("7:1", doc), "bank42")
    again = target.call(brokers.claimed("7:1", doc, attempt=2), "bank42")
    other = target.call(brokers.claimed("7:2", doc), "bank42")
    assert first and again and other
    assert (first["duplicate"], again["duplicate"], other["duplicate"]) == (False, True, False)
    assert [json.loads(d)["run_id"] for d, _ in brokers.nats_messages(stream)] == ["7:1", "7:2"]


def test_nats_a_subject_no_stream_captures_fails_for_good() -> None:
    brokers.require("nats")
    target = _nats_target(_setup())
    run = brokers.claimed("7:1", {"type": "nats", "connection": "bus",
                                  "subject": brokers.unique("nowhere.s"), "timeout_s": 2})
    with pytest.raises(PermanentError, match="no JetStream stream captures"):
        target.call(run, "bank42")


def test_nats_a_server_whose_jetstream_does_not_answer_is_retried() -> None:
    # as a server restarting answers before its JetStream has recovered the streams
    if not NatsServer.installed():
        pytest.skip("nats-server is not installed (CI machines have it: .ci/run)")
    server = NatsServer(jetstream=False)
    try:
        server.start()
        setup = _setup()
        target = _nats_target(TargetSetup(webhooks=setup.webhooks,
                                       signing_keys=setup.signing_keys,
                                       connections=lambda _: server.url))
        run = brokers.claimed("7:1", {"type": "nats", "connection": "bus",
                                      "subject": "reminders.sms", "timeout_s": 2})
        with pytest.raises(TemporaryError, match="JetStream does not answer"):
            target.call(run, "bank42")
    finally:
        server.close()


def test_nats_a_repeat_after_a_server_restart_is_still_dropped() -> None:
    # the duplicate window outlives a restart: the server rebuilds it from the stored messages
    if not NatsServer.installed():
        pytest.skip("nats-server is not installed (CI machines have it: .ci/run)")
    server = NatsServer()
    try:
        server.start()
        for stream in brokers.nats_stream("restart.s", server.url):
            setup = _setup()
            target = _nats_target(TargetSetup(webhooks=setup.webhooks,
                                           signing_keys=setup.signing_keys,
                                           connections=lambda _: server.url))
            doc = {"type": "nats", "connection": "bus", "subject": "restart.s.sms",
                   "timeout_s": 5}
            first = target.call(brokers.claimed("7:1", doc), "bank42")
            server.restart()
            again = target.call(brokers.claimed("7:1", doc, attempt=2), "bank42")
            assert first and again and (first["duplicate"], again["duplicate"]) == (False, True)
            assert len(brokers.nats_messages(stream, server.url)) == 1
    finally:
        server.close()


def test_nats_an_unreachable_server_is_retried() -> None:
    setup = _setup()
    target = _nats_target(TargetSetup(webhooks=setup.webhooks, signing_keys=setup.signing_keys,
                                   connections=lambda _: "nats://127.0.0.1:1"))
    run = brokers.claimed("7:1", {"type": "nats", "connection": "bus", "subject": "a.b",
                                  "timeout_s": 2})
    with pytest.raises(TemporaryError, match="nats"):
        target.call(run, "bank42")


# -- AMQP (RabbitMQ) -----------------------------------------------------------------------

@pytest.fixture
def amqp_exchange() -> Iterator[tuple[str, str]]:
    brokers.require("amqp")
    exchange = brokers.unique("crondepot-test.")
    for queue in brokers.amqp_queue(exchange, "sms"):
        yield exchange, queue


def test_amqp_publishes_a_persistent_confirmed_message_with_the_run_id(
        amqp_exchange: tuple[str, str]) -> None:
    exchange, queue = amqp_exchange
    target = amqp.make(_setup())
    run = brokers.claimed("7:1791171000", {"type": "amqp", "connection": "rabbit",
                                           "exchange": exchange, "routing_key": "sms"})
    assert target.call(run, "bank42") == {"exchange": exchange, "routing_key": "sms"}
    [(body, properties)] = brokers.amqp_messages(queue)
    assert json.loads(body)["run_id"] == "7:1791171000"
    assert set(json.loads(body)) == _BODY_KEYS
    assert properties.message_id == "7:1791171000"
    assert properties.delivery_mode == 2
    assert properties.content_type == "application/json"


def test_amqp_an_unroutable_publish_fails_the_attempt_for_good(
        amqp_exchange: tuple[str, str]) -> None:
    exchange, queue = amqp_exchange
    target = amqp.make(_setup())
    run = brokers.claimed("7:1", {"type": "amqp", "connection": "rabbit",
                                  "exchange": exchange, "routing_key": "no-queue-here"})
    with pytest.raises(PermanentError, match="returned unroutable"):
        target.call(run, "bank42")
    # the pooled channel is still good: the next run goes through
    ok = brokers.claimed("7:2", {"type": "amqp", "connection": "rabbit",
                                 "exchange": exchange, "routing_key": "sms"})
    assert target.call(ok, "bank42")
    assert [json.loads(b)["run_id"] for b, _ in brokers.amqp_messages(queue)] == ["7:2"]


def test_amqp_an_exchange_that_does_not_exist_fails_for_good() -> None:
    brokers.require("amqp")
    target = amqp.make(_setup())
    run = brokers.claimed("7:1", {"type": "amqp", "connection": "rabbit",
                                  "exchange": brokers.unique("missing."), "routing_key": "x"})
    with pytest.raises(PermanentError, match="NOT_FOUND"):
        target.call(run, "bank42")


# -- Redis Streams -------------------------------------------------------------------------

@pytest.fixture
def redis_stream() -> Iterator[str]:
    brokers.require("redis")
    stream = brokers.unique("crondepot-test:reminders:")
    yield stream
    brokers.redis_drop(stream, *(redis.guard_key(f"7:{n}") for n in (1, 2)))


def test_redis_adds_one_entry_and_a_repeat_adds_none(redis_stream: str) -> None:
    brokers.redis_drop(redis.guard_key("7:1"), redis.guard_key("7:2"))
    target = redis.make(_setup())
    doc = {"type": "redis", "connection": "cache", "stream": redis_stream}
    first = target.call(brokers.claimed("7:1", doc), "bank42")
    again = target.call(brokers.claimed("7:1", doc, attempt=2), "bank42")
    other = target.call(brokers.claimed("7:2", doc), "bank42")
    assert first and again and other
    assert (first["duplicate"], again["duplicate"], other["duplicate"]) == (False, True, False)
    entries = brokers.redis_entries(redis_stream)
    assert [e[b"run_id"] for e in entries] == [b"7:1", b"7:2"]
    assert json.loads(entries[0][b"body"])["payload"] == {"sms": "bill due"}


def test_redis_a_key_of_another_type_fails_and_leaves_no_guard(redis_stream: str) -> None:
    import redis as redis_client

    client = redis_client.Redis.from_url(brokers.REDIS_URL)
    client.set(redis_stream, "not a stream")
    brokers.redis_drop(redis.guard_key("7:1"))
    target = redis.make(_setup())
    with pytest.raises(PermanentError, match="not a stream"):
        target.call(brokers.claimed("7:1", {"type": "redis", "connection": "cache",
                                            "stream": redis_stream}), "bank42")
    assert client.exists(redis.guard_key("7:1")) == 0     # a retry after the fix adds it
    client.close()


# -- a broker connection lost under load ---------------------------------------------------

def _through(proxy: brokers.CuttableProxy, kind: str) -> TargetSetup:
    setup = _setup()
    return TargetSetup(webhooks=setup.webhooks, signing_keys=setup.signing_keys,
                       connections=lambda _: proxy.url(kind))


def _publish_all(target: Any, docs: dict[str, Any], proxy: brokers.CuttableProxy,
                 runs: int = 20) -> list[dict[str, Any] | None]:
    """Publish runs 7:1…7:runs, cutting every connection after the tenth, each run retried
    on a TemporaryError as the worker's retries would (a few, quickly): no run may be lost
    or end in an OutcomeUnknown."""
    import time

    results = []
    for n in range(1, runs + 1):
        if n == 11:
            proxy.cut()
        for attempt in range(1, 40):
            try:
                results.append(target.call(brokers.claimed(f"7:{n}", docs, attempt=attempt),
                                           "bank42"))
                break
            except TemporaryError:
                time.sleep(0.25)
        else:
            raise AssertionError(f"run 7:{n} never got through after the cut")
        if n == 10:
            before = proxy.accepted
    assert proxy.accepted > before, "no reconnect after the cut"
    return results


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[brokers.CuttableProxy]:
    kind = request.param
    brokers.require(kind)
    made = brokers.CuttableProxy({"amqp": 5672, "nats": 4222, "redis": 6379}[kind])
    yield made
    made.close()


@pytest.mark.parametrize("proxy", ["nats"], indirect=True)
def test_nats_reconnects_after_its_connection_is_cut_and_loses_no_run(
        proxy: brokers.CuttableProxy, nats_subject: tuple[str, str]) -> None:
    stream, subject = nats_subject
    target = _nats_target(_through(proxy, "nats"))
    _publish_all(target, {"type": "nats", "connection": "bus", "subject": subject,
                          "timeout_s": 2}, proxy)
    ids = [json.loads(d)["run_id"] for d, _ in brokers.nats_messages(stream)]
    assert ids == [f"7:{n}" for n in range(1, 21)]       # each once, none lost


@pytest.mark.parametrize("proxy", ["redis"], indirect=True)
def test_redis_reconnects_after_its_connection_is_cut_and_loses_no_run(
        proxy: brokers.CuttableProxy, redis_stream: str) -> None:
    brokers.redis_drop(*(redis.guard_key(f"7:{n}") for n in range(1, 21)))
    target = redis.make(_through(proxy, "redis"))
    try:
        _publish_all(target, {"type": "redis", "connection": "cache",
                              "stream": redis_stream, "timeout_s": 2}, proxy)
        ids = [e[b"run_id"].decode() for e in brokers.redis_entries(redis_stream)]
        assert ids == [f"7:{n}" for n in range(1, 21)]
    finally:
        brokers.redis_drop(*(redis.guard_key(f"7:{n}") for n in range(1, 21)))


@pytest.mark.parametrize("proxy", ["amqp"], indirect=True)
def test_amqp_reconnects_after_its_connection_is_cut_and_loses_no_run(
        proxy: brokers.CuttableProxy, amqp_exchange: tuple[str, str]) -> None:
    exchange, queue = amqp_exchange
    target = amqp.make(_through(proxy, "amqp"))
    _publish_all(target, {"type": "amqp", "connection": "rabbit", "exchange": exchange,
                          "routing_key": "sms", "timeout_s": 2}, proxy)
    ids = [json.loads(b)["run_id"] for b, _ in brokers.amqp_messages(queue)]
    assert ids == [f"7:{n}" for n in range(1, 21)]


def test_redis_target_closes_its_connections_at_worker_stop(redis_stream: str) -> None:
    import redis as redis_client

    name = brokers.unique("crondepot-test-close-").replace(".", "-")
    setup = TargetSetup(webhooks=lambda: None, signing_keys=SigningKeys(lambda: []),
                        connections=lambda _: f"{brokers.REDIS_URL}?client_name={name}")
    target = redis.make(setup)
    doc = {"type": "redis", "connection": "cache", "stream": redis_stream}
    assert target.call(brokers.claimed("7:1", doc), "bank42")
    observer = redis_client.Redis.from_url(brokers.REDIS_URL)

    def ours() -> int:
        return sum(1 for c in observer.client_list() if c.get("name") == name)

    assert ours() == 1
    target.close()
    wait_until(lambda: ours() == 0, timeout=10)   # the server notes the close at once
    observer.close()
