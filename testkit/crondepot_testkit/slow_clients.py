"""Slow HTTP clients over real sockets: connections that trickle a request head or body one
byte at a time, reopened whenever the server cuts them off. Shared by
tests/acceptance/test_slow_clients.py and bench/slow_clients.py."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

TICK = 0.2                  # each slow client sends one byte this often
DECLARED = 4096             # the body length the body tricklers announce (under 64 KiB)


@dataclass
class SlowClient:
    """One connection that sends ``head`` at once, then ``drip`` a byte per tick."""

    kind: str
    head: bytes
    drip: bytes
    sock: socket.socket
    opened: float = field(default_factory=time.monotonic)
    sent: int = 0
    closed: float | None = None
    answer: bytes = b""

    @property
    def lifetime(self) -> float:
        return (self.closed or time.monotonic()) - self.opened


class Trickle:
    """Keeps ``per_kind`` connections of each kind open and dripping, reopening any the server
    closes, until stopped; every connection it ever opened is kept for the assertions."""

    def __init__(self, port: int, kinds: dict[str, tuple[bytes, bytes]], per_kind: int) -> None:
        self.port, self.kinds, self.per_kind = port, kinds, per_kind
        self.clients: list[SlowClient] = []
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Trickle:
        for kind in self.kinds:
            for _ in range(self.per_kind):
                self._open(kind)
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopped.set()
        self.thread.join(timeout=10)
        for client in self.clients:
            client.sock.close()

    def open_now(self) -> int:
        with self.lock:
            return sum(1 for c in self.clients if c.closed is None)

    def _open(self, kind: str) -> None:
        head, drip = self.kinds[kind]
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        sock.sendall(head)
        sock.setblocking(False)
        with self.lock:
            self.clients.append(SlowClient(kind=kind, head=head, drip=drip, sock=sock))

    def _run(self) -> None:
        while not self.stopped.wait(TICK):
            with self.lock:
                open_ = [c for c in self.clients if c.closed is None]
            for client in open_:
                if self._step(client):
                    self._open(client.kind)

    @staticmethod
    def _step(client: SlowClient) -> bool:
        """Drip one byte; True if the server has closed the connection."""
        try:
            while chunk := client.sock.recv(65536):
                client.answer += chunk
            gone = True                   # recv returned b"": the server closed it
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if not gone and client.sent < len(client.drip):
            try:
                client.sock.send(client.drip[client.sent:client.sent + 1])
                client.sent += 1
            except OSError:
                gone = True
        if gone:
            client.closed = time.monotonic()
        return gone


def slow_requests(token: str) -> dict[str, tuple[bytes, bytes]]:
    """(head sent at once, then dripped) of each kind: a console login's body, a job
    create's body with ``token``, and a request head that never ends."""
    def body_head(path: str, media: str, extra: str = "") -> bytes:
        return (f"POST {path} HTTP/1.1\r\nHost: api\r\nContent-Type: {media}\r\n"
                f"Content-Length: {DECLARED}\r\n{extra}\r\n").encode()

    return {
        "login-body": (body_head("/console/login", "application/x-www-form-urlencoded"),
                       b"token=" + b"x" * DECLARED),
        "jobs-body": (body_head("/v1/jobs", "application/json",
                                f"Authorization: Bearer {token}\r\n"),
                      b'{"key": "' + b"k" * DECLARED),
        "head": (b"GET /v1/jobs HTTP/1.1\r\n", b"X-Slow: " + b"a" * 10_000),
    }
