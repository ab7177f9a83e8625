"""A stand-in SMS gateway on loopback, for chaos runs and benchmarks.

It records every request (idempotency key, attempt, arrival time, what it answered) and can:
- drop repeated idempotency keys (``dedupe=True``: a repeat is answered 200 but has no
  effect) or not (every accepted request is an effect: a second SMS);
- enforce a rate limit (429 with ``Retry-After: 1`` beyond it);
- inject faults on demand: a share of 503s, slow answers past the client's timeout, a
  permanent 400 for payloads marked ``{"permanent": true}``, and an outage (every request
  503) for a given number of seconds;
- answer every request late by a delay drawn uniformly from a range (a real gateway's
  0.3–1.5 s), so that a client needs rate × delay calls in flight to keep up.

Use it in-process (``Gateway(...).start()``; change ``gateway.faults`` while it runs) or
standalone: ``python bench/gateway.py --port 8099 --dedupe --rate 450``; standalone, SIGTERM
ends it like Ctrl-C, and ``--record FILE`` then writes every request, one a line
(``arrived status key``), for the process that started it (bench/fullday.py).
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Faults:
    share_503: float = 0.0          # this share of requests answers 503
    share_slow: float = 0.0         # this share of requests answers after slow_seconds
    slow_seconds: float = 0.0
    outage_until: float = 0.0       # time.monotonic() until which every request is 503
    delay_range: tuple[float, float] = (0.0, 0.0)   # every answer this late (uniform), s

    def outage(self, seconds: float) -> None:
        self.outage_until = time.monotonic() + seconds


@dataclass(frozen=True, slots=True)
class Request:
    key: str
    attempt: int
    arrived: float                  # time.time()
    status: int
    effect: bool                    # an SMS went out (first accepted, or any without dedupe)


@dataclass
class Gateway:
    dedupe: bool = True
    rate: float = 0.0               # requests per second accepted; 0 = unlimited
    port: int = 0
    faults: Faults = field(default_factory=Faults)
    requests: list[Request] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._accepted: set[str] = set()
        self._tokens = max(self.rate, 1.0)
        self._refilled = time.monotonic()
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.gateway = self
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sms"

    def start(self) -> Gateway:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- deciding an answer -------------------------------------------------------------

    def answer(self, key: str, attempt: int, payload: dict[str, Any]) -> tuple[int, float]:
        """(status, delay) for one request, recorded."""
        now = time.monotonic()
        delay = 0.0
        with self._lock:
            if now < self.faults.outage_until:
                status = 503
            elif payload.get("permanent"):
                status = 400
            elif self.rate and not self._take(now):
                status = 429
            elif random.random() < self.faults.share_503:
                status = 503
            else:
                status = 200
                if random.random() < self.faults.share_slow:
                    delay = self.faults.slow_seconds
            low, high = self.faults.delay_range
            if high > 0:
                delay = max(delay, random.uniform(low, high))
            effect = status == 200 and (not self.dedupe or key not in self._accepted)
            if status == 200:
                self._accepted.add(key)
            self.requests.append(Request(key, attempt, time.time(), status, effect))
        return status, delay

    def _take(self, now: float) -> bool:
        self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False

    # -- reading the record ---------------------------------------------------------------

    def write_record(self, path: str) -> None:
        """Every request so far, one a line: ``arrived status key``."""
        with self._lock:
            requests = list(self.requests)
        with open(path, "w", encoding="utf-8") as out:
            for r in requests:
                out.write(f"{r.arrived:.6f} {r.status} {r.key}\n")

    def stats(self) -> dict[str, Any]:
        with self._lock:
            requests = list(self.requests)
        effects = Counter(r.key for r in requests if r.effect)
        accepted = Counter(r.key for r in requests if r.status == 200)
        return {
            "requests": len(requests),
            "by_status": dict(Counter(r.status for r in requests)),
            "keys_delivered": len(effects),
            "duplicate_effects": sum(n - 1 for n in effects.values() if n > 1),
            "duplicate_requests_accepted": sum(n - 1 for n in accepted.values() if n > 1),
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    gateway: Gateway

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client killed mid-request (chaos runs kill -9 workers) resets its connection:
        # nothing was answered or recorded, and it is not the gateway's error to print.
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            document = json.loads(body)
        except json.JSONDecodeError:
            document = {}
        key = self.headers.get("Idempotency-Key", "")
        status, delay = self.server.gateway.answer(
            key, int(document.get("attempt", 0)), document.get("payload") or {})
        if delay:
            time.sleep(delay)
        answer = json.dumps({"status": status}).encode()
        try:
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "1")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        except OSError:
            self.close_connection = True    # the client timed out and went away

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8099)
    parser.add_argument("--dedupe", action="store_true", help="drop repeated keys")
    parser.add_argument("--rate", type=float, default=0, help="requests/s accepted (0 = any)")
    parser.add_argument("--share-503", type=float, default=0.0)
    parser.add_argument("--delay", type=delay_range, default=(0.0, 0.0), metavar="LOW-HIGH",
                        help="answer every request this many seconds late, e.g. 0.3-1.5")
    parser.add_argument("--seconds", type=float, default=0, help="stop after (0 = Ctrl-C)")
    parser.add_argument("--quiet", action="store_true", help="no stats every 5 s")
    parser.add_argument("--record", metavar="FILE",
                        help="at exit, write every request to FILE: arrived status key")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    gateway = Gateway(dedupe=args.dedupe, rate=args.rate, port=args.port,
                      faults=Faults(share_503=args.share_503, delay_range=args.delay)).start()
    print(f"gateway on {gateway.url} (dedupe={args.dedupe}, rate={args.rate or 'any'})",
          flush=True)
    deadline = time.monotonic() + args.seconds if args.seconds else float("inf")
    try:
        while time.monotonic() < deadline:
            time.sleep(min(5.0, max(0.0, deadline - time.monotonic())))
            if not args.quiet:
                print(json.dumps(gateway.stats()), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        gateway.stop()
        if args.record:
            gateway.write_record(args.record)


def delay_range(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split("-", 1))
    except ValueError:
        low, high = -1.0, -1.0
    if not 0 <= low <= high <= 60:
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH seconds, 0 <= LOW <= HIGH <= 60, "
                                         f"like 0.3-1.5, got {text!r}")
    return low, high


if __name__ == "__main__":
    main()
