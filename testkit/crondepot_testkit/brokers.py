"""Private brokers a test or a benchmark may stop and start (never the machine's shared
RabbitMQ, NATS and Redis, which other tests and CI use): each listens on a free loopback
port, keeps its data in a temporary directory of its own, and survives its own restart
with that data.

- ``RedisServer``: persistence on (``appendonly yes``, ``appendfsync always``), so the
  stream entries and the redis target's guard keys outlive a restart, even a crash: without
  it a restart forgets both (docs/targets.md).
- ``NatsServer``: JetStream with its store in the directory (or, asked, no JetStream).
- ``RabbitNode``: a node of its own name (``crondepot-test-…@localhost``), its own Erlang
  cookie (``HOME`` is the directory) and no configuration file of the machine's, stopped
  with ``rabbitmqctl -n NODE stop``.

``restart()`` stops and starts the broker on the same port and says how long it took to
answer again.

``PrivateStream`` is the other way to be alone on a broker: a JetStream stream of a unique
name and subjects on a NATS server others share (bench/chaos.py's, on the machine's NATS).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from crondepot_testkit.processes import free_port, wait_until

_START_TIMEOUT = 120.0
T = TypeVar("T")


def _accepting(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


class PrivateBroker:
    """A broker process of the caller's own: ``start``, ``stop``, ``restart``, ``close``."""

    kind = ""
    binary = ""     # the server's executable, looked up on PATH

    @classmethod
    def installed(cls) -> bool:
        return shutil.which(cls.binary) is not None

    def __init__(self, prefix: str) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=prefix))
        self.port = free_port()
        self.popen: subprocess.Popen[bytes] | None = None
        self._log = open(self.root / "broker.log", "ab")  # noqa: SIM115

    @property
    def url(self) -> str:
        raise NotImplementedError

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def ready(self) -> bool:
        return _accepting(self.port)

    def start(self) -> None:
        # A session of its own: a signal to the test's process group never reaches it.
        self.popen = subprocess.Popen(self.command(), stdout=self._log, stderr=self._log,
                                      env=self.env(), cwd=self.root, start_new_session=True)
        wait_until(self._started, timeout=_START_TIMEOUT, interval=0.1,
                   message=f"the private {self.kind} on port {self.port} to answer "
                           f"(its log: {self.root / 'broker.log'})")

    def _started(self) -> bool:
        if self.popen is not None and self.popen.poll() is not None:
            raise AssertionError(f"the private {self.kind} exited with {self.popen.returncode}"
                                 f": {self.log()[-3000:]}")
        return self.ready()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(sig)
        self._reap()

    def _reap(self) -> None:
        assert self.popen is not None
        try:
            self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()
        self.popen = None
        wait_until(lambda: not _accepting(self.port), timeout=30,
                   message=f"the private {self.kind}'s port to close")

    def restart(self, sig: int = signal.SIGTERM) -> float:
        """Stop (``sig``) and start again; the seconds it did not answer."""
        began = time.monotonic()
        self.stop(sig)
        self.start()
        return time.monotonic() - began

    def log(self) -> str:
        return (self.root / "broker.log").read_text(errors="replace")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.stop(signal.SIGKILL)
        self._log.close()
        shutil.rmtree(self.root, ignore_errors=True)


class RedisServer(PrivateBroker):
    kind = "redis"
    binary = "redis-server"

    def __init__(self) -> None:
        super().__init__("crondepot-redis-")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        return [self.binary, "--port", str(self.port),
                "--bind", "127.0.0.1", "--dir", str(self.root), "--save", "",
                "--appendonly", "yes", "--appendfsync", "always"]

    def ready(self) -> bool:
        # PING answers LOADING while the append-only file is read back
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False


class NatsServer(PrivateBroker):
    kind = "nats"
    binary = "nats-server"

    def __init__(self, *, jetstream: bool = True) -> None:
        super().__init__("crondepot-nats-")
        self.monitor_port = free_port()
        self.jetstream = jetstream

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        store = ["-js", "-sd", str(self.root / "store")] if self.jetstream else []
        return [self.binary, "-a", "127.0.0.1",
                "-p", str(self.port), "-m", str(self.monitor_port), *store]

    def ready(self) -> bool:
        # /healthz answers 200 once JetStream has recovered its streams
        import urllib.request

        try:
            with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.monitor_port}/healthz", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False


_nodes = itertools.count(1)


class RabbitNode(PrivateBroker):
    kind = "amqp"
    binary = "rabbitmq-server"

    def __init__(self) -> None:
        super().__init__("crondepot-rabbit-")
        self.node = f"crondepot-test-{os.getpid()}-{next(_nodes)}@localhost"
        self.dist_port = free_port()
        (self.root / "enabled_plugins").write_text("[].\n")
        # in place of /etc/rabbitmq/rabbitmq-env.conf, which names the machine's node
        (self.root / "rabbitmq-env.conf").write_text(
            'export ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"\n')

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/%2F"

    def _bin(self, name: str) -> str:
        # the packaged scripts, not /usr/sbin's wrappers (which switch to the rabbitmq user
        # and its home, cookie and configuration: the machine's node)
        packaged = Path("/usr/lib/rabbitmq/bin") / name
        return str(packaged) if packaged.exists() else (shutil.which(name) or name)

    def command(self) -> list[str]:
        return [self._bin("rabbitmq-server")]

    def env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.root), "RABBITMQ_NODENAME": self.node,
                "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_DIST_PORT": str(self.dist_port),
                "RABBITMQ_MNESIA_BASE": str(self.root / "mnesia"),
                "RABBITMQ_LOG_BASE": str(self.root / "log"),
                "RABBITMQ_PID_FILE": str(self.root / "pid"),
                "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.root / "enabled_plugins"),
                "RABBITMQ_CONFIG_FILE": str(self.root / "rabbitmq"),
                "RABBITMQ_ADVANCED_CONFIG_FILE": str(self.root / "advanced.config"),
                "RABBITMQ_CONF_ENV_FILE": str(self.root / "rabbitmq-env.conf")}

    def ready(self) -> bool:
        import pika

        if not _accepting(self.port):
            return False
        try:
            pika.BlockingConnection(pika.URLParameters(self.url)).close()
        except Exception:   # booting: any failure means "not yet"
            return False
        return True

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.popen is None:
            return
        if sig == signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGKILL)   # beam and its port programs
        else:
            subprocess.run([self._bin("rabbitmqctl"), "-n", self.node, "stop"],
                           env=self.env(), stdout=self._log, stderr=self._log, timeout=120,
                           check=False)
        self._reap()


@dataclass(frozen=True, slots=True)
class StoredMessage:
    msg_id: str         # its Nats-Msg-Id
    stored: float       # when the stream stored it (unix seconds)
    data: bytes


class PrivateStream:
    """A JetStream stream of the caller's own on a NATS server others share (the machine's):
    a name and subjects no other run uses, file storage, a duplicate window of
    ``duplicate_window`` seconds; ``delete`` removes it."""

    def __init__(self, url: str, prefix: str = "crondepot",
                 duplicate_window: float = 1200.0) -> None:
        tag = uuid.uuid4().hex[:10]
        self.url = url
        self.name = f"{prefix}_{tag}".upper().replace("-", "_")
        self.prefix = f"{prefix}.{tag}"
        self.duplicate_window = duplicate_window

    def subject(self, leaf: str) -> str:
        return f"{self.prefix}.{leaf}"

    def _call(self, work: Callable[[Any], Awaitable[T]]) -> T:
        import nats

        async def go() -> T:
            client = await nats.connect(self.url, connect_timeout=5,
                                        allow_reconnect=False)
            try:
                return await work(client.jetstream())
            finally:
                await client.close()

        return asyncio.run(go())

    def create(self) -> None:
        async def add(js: Any) -> None:
            await js.add_stream(name=self.name, subjects=[f"{self.prefix}.>"],
                                duplicate_window=self.duplicate_window)

        self._call(add)

    def messages(self) -> list[StoredMessage]:
        """Every message the stream holds, in order."""
        from nats.js.errors import NotFoundError

        async def read(js: Any) -> list[StoredMessage]:
            info = await js.stream_info(self.name)
            out: list[StoredMessage] = []
            if not info.state.messages:
                return out
            for seq in range(max(1, info.state.first_seq), info.state.last_seq + 1):
                try:
                    msg = await js.get_msg(self.name, seq)
                except NotFoundError:
                    continue
                out.append(StoredMessage(str((msg.headers or {}).get("Nats-Msg-Id", "")),
                                         msg.time.timestamp() if msg.time else 0.0,
                                         msg.data or b""))
            return out

        return self._call(read)

    def delete(self) -> None:
        async def drop(js: Any) -> None:
            await js.delete_stream(self.name)

        with contextlib.suppress(Exception):    # gone already, or the server is
            self._call(drop)
