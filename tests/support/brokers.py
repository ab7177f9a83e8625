"""The real brokers on this machine's loopback (RabbitMQ 5672, NATS JetStream 4222, Redis
6379) for the broker targets' tests: each test skips, saying which broker, when its broker
is not reachable (CI machines run all three: .ci/run)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from crondepot.queue import ClaimedRun

AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
NATS_URL = "nats://127.0.0.1:4222"
REDIS_URL = "redis://127.0.0.1:6379/0"
URLS = {"amqp": AMQP_URL, "nats": NATS_URL, "redis": REDIS_URL}
_PORTS = {"amqp": 5672, "nats": 4222, "redis": 6379}


def require(kind: str) -> None:
    """Skip the test unless the ``kind`` broker answers on its loopback port."""
    try:
        socket.create_connection(("127.0.0.1", _PORTS[kind]), timeout=1).close()
    except OSError as exc:
        pytest.skip(f"no {kind} broker on 127.0.0.1:{_PORTS[kind]} ({exc}); CI runs one")


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def claimed(run_id: str, target: dict[str, Any], payload: dict[str, Any] | None = None,
            attempt: int = 1) -> ClaimedRun:
    """A run as a claim returns it, for a target's call without a queue."""
    now = datetime.now(UTC)
    return ClaimedRun(run_id, 7, "bill-reminder", 1, "normal", now, now, attempt,
                      uuid.uuid4(), now, now, target, payload or {"sms": "bill due"}, 6, 60,
                      None, "whsec_x")


# -- NATS: a stream of the test's own, with a duplicate window ------------------------------

def nats_stream(subject_prefix: str, url: str = NATS_URL) -> Iterator[str]:
    """A JetStream stream capturing ``subject_prefix.>`` (deleted after the test)."""
    import nats

    name = subject_prefix.replace(".", "_").upper()

    async def make() -> None:
        nc = await nats.connect(url)
        await nc.jetstream().add_stream(name=name, subjects=[f"{subject_prefix}.>"],
                                        duplicate_window=600.0)
        await nc.close()

    async def drop() -> None:
        nc = await nats.connect(url)
        await nc.jetstream().delete_stream(name)
        await nc.close()

    asyncio.run(make())
    yield name
    asyncio.run(drop())


def nats_messages(stream: str, url: str = NATS_URL) -> list[tuple[bytes, dict[str, str]]]:
    """Every message the stream holds: (data, headers)."""
    import nats
    from nats.js.errors import NotFoundError

    async def read() -> list[tuple[bytes, dict[str, str]]]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        info = await js.stream_info(stream)
        out = []
        first = max(1, info.state.first_seq)     # an empty stream says 0
        for seq in range(first, info.state.last_seq + 1 if info.state.messages else first):
            try:
                msg = await js.get_msg(stream, seq)
            except NotFoundError:
                continue
            out.append((msg.data or b"", dict(msg.headers or {})))
        await nc.close()
        return out

    return asyncio.run(read())


# -- AMQP: an exchange and a queue of the test's own -------------------------------------

def amqp_queue(exchange: str, routing_key: str, url: str = AMQP_URL) -> Iterator[str]:
    """A direct exchange with one durable queue bound by ``routing_key``."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    channel = conn.channel()
    channel.exchange_declare(exchange, "direct")
    queue = f"{exchange}.q"
    channel.queue_declare(queue, durable=True)
    channel.queue_bind(queue, exchange, routing_key)
    try:
        yield queue
    finally:
        channel.queue_delete(queue)
        channel.exchange_delete(exchange)
        conn.close()


def amqp_messages(queue: str, url: str = AMQP_URL) -> list[tuple[bytes, Any]]:
    """Take every message in ``queue``: (body, properties)."""
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(url))
    channel = conn.channel()
    out = []
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            break
        out.append((body, properties))
    conn.close()
    return out


# -- Redis ---------------------------------------------------------------------------------

def redis_entries(stream: str, url: str = REDIS_URL) -> list[dict[bytes, bytes]]:
    import redis

    client = redis.Redis.from_url(url)
    try:
        return [fields for _, fields in client.xrange(stream)]
    finally:
        client.close()


def redis_drop(*keys: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.delete(*keys)
    finally:
        client.close()


# -- a connection the test can cut (a broker restart, as the clients see it) ---------------

class CuttableProxy:
    """A TCP forwarder to a broker's port on loopback: ``cut()`` resets every connection
    through it (what a client sees when its broker restarts) and keeps accepting new ones.
    The brokers are shared by the machine, so a test cuts its own connections, never
    restarts the broker."""

    def __init__(self, port: int) -> None:
        import threading

        self._upstream = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._closed = False
        self.accepted = 0       # connections made through it: a reconnect adds one
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, kind: str) -> str:
        return URLS[kind].replace(f":{_PORTS[kind]}", f":{self.port}")

    def _accept(self) -> None:
        import threading

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self._upstream))
            with self._lock:
                self._pairs.append((client, upstream))
                self.accepted += 1
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()
