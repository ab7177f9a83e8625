"""Runs per second through each broker target at P = 1 and 2 concurrent slots, against the
HTTP target on the same machine (issue 35, item 1).

What is measured is a target's call as a worker's slot makes it, publish and acknowledgement
included: NATS JetStream (PubAck awaited), RabbitMQ (publisher confirm awaited), Redis (the
guard-and-XADD script), and the HTTP target's signed POST to a loopback receiver (Python's
``ThreadingHTTPServer``, answering 204). No database: claims and records cost the same
whichever target a run calls, and bench/workers.py measures them. P threads share one
target (its pooled clients), as a worker's slots do; each call is a new run id.

The brokers are the machine's loopback ones (RabbitMQ 5672, NATS 4222, Redis 6379); a
broker not running is skipped with a line saying so. The stream, exchange, queue and Redis
keys it makes are removed afterwards. Figures are printed, never asserted. One command:

    python bench/broker_targets.py [--seconds 5] [--passes 3]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from crondepot.queue import ClaimedRun
from crondepot.worker.targets import amqp, http, nats, redis
from crondepot.worker.targets.base import Target, TargetSetup
from crondepot.worker.targets.http import WebhookTarget
from crondepot.worker.webhook_keys import SigningKeys, Snapshot

URLS = {"amqp": "amqp://guest:guest@127.0.0.1:5672/%2F", "nats": "nats://127.0.0.1:4222",
        "redis": "redis://127.0.0.1:6379/0"}
PORTS = {"amqp": 5672, "nats": 4222, "redis": 6379}
TAG = f"bench{uuid.uuid4().hex[:8]}"


class _Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _run(target: dict[str, Any], run_id: str) -> ClaimedRun:
    now = datetime.now(UTC)
    return ClaimedRun(run_id=run_id, job_id=1, job_key="bank42:48213:emi", tenant_id=1,
                      priority="normal", nominal_at=now, due_at=now, attempt=1,
                      lease_token=uuid.uuid4(), lease_expires_at=now, db_now=now,
                      target=target, payload={"loan": 48213, "template": "emi_due"},
                      max_attempts=6, lease_seconds=60, rate_limit=None,
                      signing_secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")


def _rate(target: Target, doc: dict[str, Any], slots: int, seconds: float) -> float:
    """Runs per second of ``slots`` threads calling ``target`` for ``seconds``."""
    counts = [0] * slots
    stop = time.perf_counter() + seconds

    def slot(i: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            target.call(_run(doc, f"{TAG}-{i}-{uuid.uuid4().hex[:8]}:{n}"), "bank42")
            n += 1
        counts[i] = n

    started = time.perf_counter()
    threads = [threading.Thread(target=slot, args=(i,)) for i in range(slots)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - started)


def _up(kind: str) -> bool:
    try:
        socket.create_connection(("127.0.0.1", PORTS[kind]), timeout=1).close()
        return True
    except OSError:
        return False


@contextmanager
def _http_case() -> Iterator[tuple[Target, dict[str, Any]]]:
    import os

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["CRONDEPOT_TARGET_ALLOWLIST"] = "127.0.0.1/32"
    webhooks = WebhookTarget(slots=4)
    keys = SigningKeys(lambda: Snapshot(db_now=datetime.now(UTC), overlaps={}))
    target = http.make(TargetSetup(webhooks=lambda: webhooks, signing_keys=keys))
    try:
        yield target, {"type": "http", "url": f"http://127.0.0.1:{server.server_port}/sms",
                       "timeout_s": 10}
    finally:
        server.shutdown()


def _setup(kind: str) -> TargetSetup:
    def no_webhooks() -> WebhookTarget:
        raise AssertionError("a broker target made an HTTP client")

    return TargetSetup(webhooks=no_webhooks, signing_keys=SigningKeys(
        lambda: Snapshot(db_now=datetime.now(UTC), overlaps={})),
        connections=lambda _: URLS[kind])


@contextmanager
def _nats_case() -> Iterator[tuple[Target, dict[str, Any]]]:
    import nats as nats_client

    stream = TAG.upper()

    async def admin(make: bool) -> None:
        nc = await nats_client.connect(URLS["nats"])
        js = nc.jetstream()
        if make:
            await js.add_stream(name=stream, subjects=[f"{TAG}.>"], duplicate_window=120.0)
        else:
            await js.delete_stream(stream)
        await nc.close()

    asyncio.run(admin(True))
    try:
        yield nats.make(_setup("nats")), {"type": "nats", "connection": "bus",
                                          "subject": f"{TAG}.reminders.sms", "timeout_s": 10}
    finally:
        asyncio.run(admin(False))


@contextmanager
def _amqp_case() -> Iterator[tuple[Target, dict[str, Any]]]:
    import pika

    conn = pika.BlockingConnection(pika.URLParameters(URLS["amqp"]))
    channel = conn.channel()
    channel.exchange_declare(TAG, "direct")
    channel.queue_declare(TAG, durable=True)
    channel.queue_bind(TAG, TAG, "sms")
    try:
        yield amqp.make(_setup("amqp")), {"type": "amqp", "connection": "rabbit",
                                          "exchange": TAG, "routing_key": "sms",
                                          "timeout_s": 10}
    finally:
        channel.queue_delete(TAG)
        channel.exchange_delete(TAG)
        conn.close()


@contextmanager
def _redis_case() -> Iterator[tuple[Target, dict[str, Any]]]:
    import redis as redis_client

    client = redis_client.Redis.from_url(URLS["redis"])
    try:
        yield redis.make(_setup("redis")), {"type": "redis", "connection": "cache",
                                            "stream": TAG, "timeout_s": 10}
    finally:
        client.delete(TAG)
        for keys in _chunks(client.scan_iter(match=f"crondepot:run:{TAG}-*", count=1000)):
            client.delete(*keys)
        client.close()


def _chunks(items: Iterator[Any], size: int = 500) -> Iterator[list[Any]]:
    chunk: list[Any] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


CASES: dict[str, Callable[[], Any]] = {"http": _http_case, "nats": _nats_case,
                                       "amqp": _amqp_case, "redis": _redis_case}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    print(f"{'target':<7} {'P':>2} {'runs/s (median of passes)':>27} {'passes':>24}")
    for kind, case in CASES.items():
        if kind != "http" and not _up(kind):
            print(f"{kind:<7} skipped: no broker on 127.0.0.1:{PORTS[kind]}")
            continue
        with case() as (target, doc):
            _rate(target, doc, 1, 0.5)          # warm up: connect, first publishes
            for slots in (1, 2):
                figures = [_rate(target, doc, slots, args.seconds)
                           for _ in range(args.passes)]
                passes = " ".join(f"{f:.0f}" for f in figures)
                print(f"{kind:<7} {slots:>2} {statistics.median(figures):>27.0f} {passes:>24}")


if __name__ == "__main__":
    main()
