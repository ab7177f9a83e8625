"""A real HTTP target on loopback for tests: answers by route, records every request."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# --- a real target on loopback ----------------------------------------------------------


@dataclass
class Route:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay_s: float = 0.0
    drop: bool = False  # read the request, then close without answering


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    client_port: int
    at: float = 0.0  # time.time() when the request had been read (the wall clock)


class TargetServer:
    """A ThreadingHTTPServer on 127.0.0.1 that answers by route and records every request."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        # Decides the answer from the request when set (a receiver that checks signatures);
        # otherwise the route of the path does.
        self.answer: Callable[[Received], Route] | None = None
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.target = self
        if ssl_context is not None:
            self._httpd.socket = ssl_context.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self.scheme = "http" if ssl_context is None else "https"
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        daemon=True)
        self._thread.start()

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def record(self, received: Received) -> None:
        with self._lock:
            self.received.append(received)

    def paths(self) -> list[str]:
        with self._lock:
            return [r.path for r in self.received]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default listen backlog is 5. Twenty worker slots connecting at once on a
    # busy machine overflow it, and a connection the kernel then resets after the request was
    # sent is, rightly, an unknown outcome to the worker: the run goes dead, not succeeded.
    request_queue_size = 1024
    target: TargetServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is observable
    # The headers and the body go out in two writes; with Nagle's algorithm the body then
    # waits for the client's delayed ACK (40 ms on Linux) on every keep-alive request.
    disable_nagle_algorithm = True
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        target = self.server.target
        received = Received(self.command, self.path,
                            {k.lower(): v for k, v in self.headers.items()}, body,
                            self.client_address[1], time.time())
        target.record(received)
        route = target.answer(received) if target.answer else target.routes.get(self.path,
                                                                                 Route())
        time.sleep(route.delay_s)
        if route.drop:
            self.close_connection = True
            return
        try:
            self.send_response(route.status)
            for name, value in route.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(route.body)))
            self.end_headers()
            self.wfile.write(route.body)
        except OSError:  # the client gave up (a timeout test); nothing to tell it
            self.close_connection = True

    do_GET = do_POST

    def log_message(self, format: str, *args: object) -> None:
        pass


