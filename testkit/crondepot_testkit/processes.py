"""Real crondepot processes for acceptance tests, a free loopback port, and waiting on
conditions (not sleeps)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from crondepot.cli.up import UpRefused, check_ports_free


class Proc:
    """A crondepot sub-command in its own process, logging JSON lines to a file; run by
    ``python -m module`` (a wrapper of crondepot's command line, such as
    ``crondepot_testkit.traced``)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None,
                 module: str = "crondepot") -> None:
        self.log: IO[str] = tempfile.NamedTemporaryFile(  # noqa: SIM115
            "w+", prefix="crondepot-proc-", suffix=".log", delete=False)
        self.args = args
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdout=self.log, stderr=subprocess.STDOUT,
            env={**os.environ, "CRONDEPOT_LOG_FORMAT": "json", **(env or {})},
        )

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def stop(self, timeout: float = 30) -> int:
        self.kill(signal.SIGTERM)
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Ask for every thread's stack (crondepot's processes dump them on SIGUSR1), so
            # the failure says what the process was waiting on, then kill it.
            self.kill(signal.SIGUSR1)
            time.sleep(1)
            self.popen.kill()
            self.popen.wait()
            raise AssertionError(
                f"crondepot {' '.join(self.args)} did not stop within {timeout:g}s of "
                f"SIGTERM; the end of its output:\n{self.output()[-6000:]}") from None

    def lines(self) -> list[dict[str, Any]]:
        entries = []
        for line in Path(self.log.name).read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                entries.append({"msg": line})
        return entries

    def output(self) -> str:
        return Path(self.log.name).read_text()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


_handed_out: set[int] = set()


def free_port(span: int = 1) -> int:
    """A loopback port (the first of ``span`` consecutive ones) that nothing listens on.

    Not the kernel's pick (``bind(0)``): that comes from the ephemeral range, where any
    outgoing connection of a test running beside this one (a pool's connection to
    PostgreSQL) may take it between this check and the process that binds it. A random
    port below that range is never given to outgoing connections, so only a listener can
    take it, and two tests drawing the same one of ~20,000 at once is negligible. ``span``
    covers ``up``, whose children listen on ``--metrics-port`` + 0, 1, 2...
    """
    low, _ = _ephemeral_range()
    floor, ceiling = 10000, max(low - span, 10001)
    draw = random.SystemRandom()
    for _ in range(200):
        first = draw.randrange(floor, ceiling)
        ports = range(first, first + span)
        if any(port in _handed_out for port in ports):
            continue
        try:
            check_ports_free("127.0.0.1", list(ports))   # as ``up`` checks them
        except UpRefused:
            continue
        _handed_out.update(ports)
        return first
    raise RuntimeError("no free loopback port below the ephemeral range")


def wait_until(condition: Callable[[], bool], *, timeout: float, interval: float = 0.05,
               message: str = "condition", describe: Callable[[], str] | None = None) -> None:
    """Poll ``condition`` until it holds; on a timeout fail with ``message`` and what
    ``describe`` says of the state then (rows, a process's output), so a failure in CI
    can be read without running it again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval)
    state = ""
    if describe is not None:
        try:
            state = f"; the state then:\n{describe()}"
        except Exception as exc:          # the timeout is the failure, not this
            state = f"; describing the state failed: {exc!r}"
    raise AssertionError(f"timed out after {timeout}s waiting for {message}{state}")
