"""Slots benchmark: a worker's 20 slots as threads or as asyncio tasks, measured.

Compares, for one process with ``--slots`` (20) concurrent slots:

- **threads**: the worker's own path. ``crondepot.worker.slots.Slots`` (20 long-lived
  threads on a ``queue.SimpleQueue``), each calling the real ``WebhookTarget.call`` (one
  shared ``httpx.Client`` on the guarded transport, ``connection_limits(20)``: 120
  connections kept alive, 1.5 s keep-alive expiry; a signed POST with the Standard Webhooks
  headers; the body read up to 64 KiB; the status classified), with an ``AddressGuard``
  that allows 127.0.0.1/32.
- **asyncio**: one event loop, 20 tasks taking items from an ``asyncio.Queue``, each making
  the same POST (same headers, signed with ``crondepot.worker.targets.sign``, same body,
  body read the same way, 2xx checked) through one shared ``httpx.AsyncClient`` with the
  same ``connection_limits(20)``, ``follow_redirects=False``, ``trust_env=False``. There is
  no async ``GuardedBackend``; the guard only acts when a connection is opened, which with
  keep-alive happens about 20 times per measurement.
- **uvloop**: the asyncio code on a uvloop event loop (skipped if uvloop is not installed).

Workloads, each ``N`` calls, the same ``N`` for every model, sized so the threads model's
measurement lasts about ``--seconds`` (7; a model half as fast takes twice as long):

- **http-0ms**: a real HTTP/1.1 server on loopback answering 200 at once (keep-alive).
- **http-50ms**: the same server answering after 50 ms (a slow SMS gateway).
- **sleep-50ms**: no I/O; each call is ``time.sleep(0.05)`` (threads) or
  ``asyncio.sleep(0.05)`` (asyncio): the slot model's own scheduling cost.

The server is a separate process (a raw asyncio HTTP/1.1 protocol, on uvloop when
installed), so its CPU is not counted; its CPU per call is printed alongside to show it is
not the limit. Every measurement runs in a fresh child process (so peak RSS is that model's
own): 3 warm-up calls per slot, then the ``N`` measured calls. Figures per measurement:
calls/s over the measured calls; the child's CPU seconds (``time.process_time``: user + sys,
all threads) per call and as a share of one core; peak RSS (``ru_maxrss``, which includes
the interpreter and imports, the same modules in every model) and its growth over the RSS
just before the measured calls; p50/p99 of each call's own duration (not queue wait).
Measurements run ``--rounds`` (3) times interleaved, the model order rotated each round;
the table prints medians.

Run it alone on the machine (other benchmarks and test runs take the same lock)::

    flock /tmp/crondepot-test.lock .venv/bin/python bench/slots.py
    flock /tmp/crondepot-test.lock .venv/bin/python bench/slots.py --quick   # ~30 s
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from importlib import metadata
from typing import Any, cast

MODELS = ("threads", "asyncio", "uvloop")
WORKLOADS = ("http-0ms", "http-50ms", "sleep-50ms")
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"  # base64 of 24 bytes, a test value
BODY = (b'{"run_id":"bench","job_id":1,"job_key":"sms-1","scheduled_at":"2026-11-30T00:00:00Z",'
        b'"due_at":"2026-11-30T00:00:00Z","attempt":1,"payload":{"to":"+15550100","text":'
        b'"Your code is 123456"}}')
MAX_BODY_BYTES = 64 * 1024  # as WebhookTarget reads


# -- the target: a separate process -------------------------------------------------------

_REPLY = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n"
          b"connection: keep-alive\r\n\r\n" + b'{"ok":true}')


class _TargetProtocol(asyncio.Protocol):
    """HTTP/1.1 with keep-alive, one request at a time per connection (httpx does not
    pipeline): a path starting ``/slow`` is answered after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self._delay = delay
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self._transport = cast(asyncio.Transport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        while True:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end]).lower()
            length = 0
            at = head.find(b"\r\ncontent-length:")
            if at >= 0:
                stop = head.find(b"\r\n", at + 2)
                length = int(head[at + 17:stop if stop >= 0 else None])
            total = end + 4 + length
            if len(self._buffer) < total:
                return
            del self._buffer[:total]
            if head.split(b" ", 2)[1].startswith(b"/slow"):
                asyncio.get_running_loop().call_later(self._delay, self._reply)
            else:
                self._reply()

    def _reply(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(_REPLY)


def serve(delay: float) -> None:
    """Serve on a free loopback port; print the port; run until killed."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: _TargetProtocol(delay), "127.0.0.1", 0,
                                          backlog=1024)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    _event_loop_runner(_uvloop_factory())(main())


# -- one measurement: a child process ------------------------------------------------------

def _uvloop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _event_loop_runner(
    factory: Callable[[], asyncio.AbstractEventLoop] | None,
) -> Callable[[Coroutine[Any, Any, None]], None]:
    def run(coro: Coroutine[Any, Any, None]) -> None:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(coro)
    return run


class _Measure:
    """Calls' durations, and the process's wall, CPU and RSS over the measured calls."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self._wall = self._cpu = self._user = self._sys = 0.0
        self._rss_before_kb = 0

    def start(self) -> None:
        self.latencies.clear()
        self._rss_before_kb = _current_rss_kb()
        times = os.times()
        self._user, self._sys = times.user, times.system
        self._cpu = time.process_time()
        self._wall = time.perf_counter()

    def stop(self) -> dict[str, Any]:
        wall = time.perf_counter() - self._wall
        cpu = time.process_time() - self._cpu
        times = os.times()
        latencies = sorted(self.latencies)
        return {
            "calls": len(latencies),
            "wall_s": wall,
            "cpu_s": cpu,
            "user_s": times.user - self._user,
            "sys_s": times.system - self._sys,
            "rss_before_kb": self._rss_before_kb,
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "p50_s": statistics.median(latencies),
            "p99_s": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))],
            "threads": threading.active_count(),
        }


def _current_rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def measure_threads(workload: str, calls: int, url: str, slots: int,
                    delay: float) -> dict[str, Any]:
    """The worker's path: ``Slots`` threads, each calling ``WebhookTarget.call``."""
    from crondepot.job.guard import AddressGuard
    from crondepot.worker.slots import Slots
    from crondepot.worker.targets import WebhookCall, WebhookTarget

    measure = _Measure()
    latencies = measure.latencies
    done = threading.Event()
    target = WebhookTarget(AddressGuard(["127.0.0.1/32"]), slots=slots)
    expected = 0
    finished = itertools.count(1)  # next() on a count is atomic under the GIL

    def finish() -> None:
        if next(finished) == expected:
            done.set()

    def call(run_id: str, _slot: str) -> None:
        started = time.perf_counter()
        target.call(WebhookCall(url=url, run_id=run_id, body=BODY, signing_secret=SECRET,
                                timeout_s=10.0, dedupes=False))
        latencies.append(time.perf_counter() - started)
        finish()

    def nap(run_id: str, _slot: str) -> None:
        started = time.perf_counter()
        time.sleep(delay)
        latencies.append(time.perf_counter() - started)
        finish()

    pool: Slots[str] = Slots(slots, nap if workload == "sleep-50ms" else call)

    def batch(count: int, prefix: str) -> None:
        nonlocal expected, finished
        expected, finished = count, itertools.count(1)
        done.clear()
        for i in range(count):
            pool.submit(f"{prefix}{i:08d}", "normal")
        if not done.wait(timeout=600):
            raise RuntimeError(f"threads: {count} calls not done in 600 s")

    batch(slots * 3, "warm-")
    measure.start()
    batch(calls, "run-")
    result = measure.stop()
    pool.shutdown()
    target.close()
    return result


async def measure_asyncio(workload: str, calls: int, url: str, slots: int,
                          delay: float) -> dict[str, Any]:
    """20 tasks on one loop, each making the same signed POST with one ``AsyncClient``."""
    import httpx

    from crondepot.worker.targets import connection_limits, sign

    measure = _Measure()
    latencies = measure.latencies
    client = httpx.AsyncClient(limits=connection_limits(slots), follow_redirects=False,
                               trust_env=False, headers={"User-Agent": "crondepot/0.1"})
    target_url = httpx.URL(url)

    async def call(run_id: str) -> None:
        started = time.perf_counter()
        # As WebhookTarget.call: fresh timestamp and signature, the same five headers.
        timestamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "Idempotency-Key": run_id,
            "webhook-id": run_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(SECRET, run_id, timestamp, BODY),
        }
        async with client.stream("POST", target_url, content=BODY, headers=headers,
                                 timeout=10.0) as response:
            received = bytearray()
            async for chunk in response.aiter_bytes():
                received += chunk
                if len(received) >= MAX_BODY_BYTES:
                    break
        if not 200 <= response.status_code < 300:
            raise RuntimeError(f"HTTP {response.status_code}: {bytes(received[:200])!r}")
        latencies.append(time.perf_counter() - started)

    async def nap(run_id: str) -> None:
        started = time.perf_counter()
        await asyncio.sleep(delay)
        latencies.append(time.perf_counter() - started)

    work = nap if workload == "sleep-50ms" else call

    async def slot(items: asyncio.Queue[str | None]) -> None:
        while True:
            item = await items.get()
            if item is None:
                return
            await work(item)

    async def batch(count: int, prefix: str) -> None:
        items: asyncio.Queue[str | None] = asyncio.Queue()
        for i in range(count):
            items.put_nowait(f"{prefix}{i:08d}")
        for _ in range(slots):
            items.put_nowait(None)
        await asyncio.wait_for(asyncio.gather(*(slot(items) for _ in range(slots))), 600)

    await batch(slots * 3, "warm-")
    measure.start()
    await batch(calls, "run-")
    result = measure.stop()
    await client.aclose()
    return result


def child(model: str, workload: str, calls: int, url: str, slots: int, delay: float) -> None:
    """One measurement; its figures as one JSON line on stdout."""
    # Same imports in every model, so the RSS baseline is the same.
    import httpx  # noqa: F401

    import crondepot.worker.slots
    import crondepot.worker.targets  # noqa: F401

    result: dict[str, Any] = {}
    if model == "threads":
        result = measure_threads(workload, calls, url, slots, delay)
    else:
        factory = _uvloop_factory() if model == "uvloop" else None

        async def main() -> None:
            result.update(await measure_asyncio(workload, calls, url, slots, delay))

        _event_loop_runner(factory)(main())
    print(json.dumps(result), flush=True)


# -- the parent: the server, the rounds, the table -------------------------------------------

def _die_with_parent() -> None:
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def _run_child(args: argparse.Namespace, model: str, workload: str, calls: int,
               base_url: str, server_pid: int) -> dict[str, Any]:
    import psutil  # type: ignore[import-untyped]

    url = base_url + ("/slow" if workload == "http-50ms" else "/fast")
    server = psutil.Process(server_pid)
    before = server.cpu_times()
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", model, workload, str(calls),
         url, str(args.slots), str(args.delay_ms / 1000)],
        capture_output=True, text=True, timeout=900, preexec_fn=_die_with_parent, check=False)
    after = server.cpu_times()
    if done.returncode != 0:
        raise RuntimeError(f"{model} {workload} failed ({done.returncode}):\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["server_cpu_s"] = (after.user + after.system) - (before.user + before.system)
    return result


def _versions() -> str:
    names = ["httpx", "httpcore", "anyio", "uvloop", "psutil"]
    found = []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return f"Python {platform.python_version()}, " + ", ".join(found)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def _calls_for(slots: int, seconds: float, rate: float) -> int:
    """About ``rate × seconds`` calls, a multiple of ``slots``, at least 5 per slot."""
    return max(slots * 5, round(rate * seconds / slots) * slots)


def run(args: argparse.Namespace) -> None:
    models = [m for m in args.models.split(",") if m]
    if "uvloop" in models and _uvloop_factory() is None:
        print("uvloop is not installed: skipping the uvloop model")
        models.remove("uvloop")
    workloads = [w for w in args.workloads.split(",") if w]
    print(f"slots benchmark: {args.slots} slots in one process, {args.rounds} round(s), "
          f"N sized for ~{args.seconds:g} s per threads measurement, {args.delay_ms:g} ms delay")
    print(f"machine: {os.cpu_count()} CPUs ({platform.machine()}), {_versions()}")
    print(f"load average before: {_load()}", flush=True)

    server = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve", str(args.delay_ms / 1000)],
        stdout=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        base_url = f"http://127.0.0.1:{port}"
        print(f"target: pid {server.pid}, {base_url} "
              f"({'uvloop' if _uvloop_factory() else 'asyncio'} raw HTTP/1.1)", flush=True)

        # Size N: the 0 ms workload from a short threads run; the others from slots ÷ delay
        # (20 ÷ 50 ms = 400 calls/s at most).
        sizes: dict[str, int] = {}
        for workload in workloads:
            if workload == "http-0ms":
                probe = _run_child(args, "threads", workload, args.slots * 50, base_url,
                                   server.pid)
                rate = probe["calls"] / probe["wall_s"]
                print(f"calibration: threads http-0ms {rate:,.0f} calls/s", flush=True)
            else:
                rate = args.slots / (args.delay_ms / 1000)
            sizes[workload] = _calls_for(args.slots, args.seconds, rate)
        print("calls per measurement: "
              + ", ".join(f"{w} {n:,}" for w, n in sizes.items()), flush=True)

        results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for round_no in range(args.rounds):
            order = models[round_no % len(models):] + models[:round_no % len(models)]
            for workload in workloads:
                for model in order:
                    result = _run_child(args, model, workload, sizes[workload], base_url,
                                        server.pid)
                    results.setdefault((workload, model), []).append(result)
                    print(f"  round {round_no + 1} {workload:<10} {model:<8}"
                          f" {result['calls'] / result['wall_s']:8,.0f} calls/s"
                          f" {result['cpu_s'] / result['calls'] * 1e6:7,.0f} µs CPU/call"
                          f"  load {_load()}", flush=True)
    finally:
        server.kill()
        server.wait()

    print(f"\nload average after: {_load()}\n")
    print(table(results, workloads, models))


def table(results: dict[tuple[str, str], list[dict[str, Any]]], workloads: Sequence[str],
          models: Sequence[str]) -> str:
    def med(runs: list[dict[str, Any]], figure: Callable[[dict[str, Any]], float]) -> float:
        return float(statistics.median([figure(r) for r in runs]))

    def growth_mb(r: dict[str, Any]) -> float:
        grown: int = max(0, r["peak_rss_kb"] - r["rss_before_kb"])
        return grown / 1024

    header = ("| workload | model | calls/s | CPU µs/call (min–max) | CPU % of a core "
              "| peak RSS MB (+ during calls) | p50 ms | p99 ms | target CPU µs/call |")
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for workload in workloads:
        for model in models:
            runs = results.get((workload, model))
            if not runs:
                continue
            per_call = sorted(r["cpu_s"] / r["calls"] * 1e6 for r in runs)
            lines.append(
                f"| {workload} | {model} "
                f"| {med(runs, lambda r: r['calls'] / r['wall_s']):,.0f} "
                f"| {statistics.median(per_call):,.0f} ({per_call[0]:,.0f}–{per_call[-1]:,.0f}) "
                f"| {med(runs, lambda r: 100 * r['cpu_s'] / r['wall_s']):.0f} "
                f"| {med(runs, lambda r: r['peak_rss_kb'] / 1024):.1f} "
                f"(+{med(runs, growth_mb):.1f}) "
                f"| {med(runs, lambda r: r['p50_s'] * 1000):.2f} "
                f"| {med(runs, lambda r: r['p99_s'] * 1000):.2f} "
                f"| {med(runs, lambda r: r['server_cpu_s'] / r['calls'] * 1e6):,.0f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--slots", type=int, default=20, help="concurrent slots (20)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (3)")
    parser.add_argument("--seconds", type=float, default=7.0,
                        help="length of one threads measurement, which sizes N (7)")
    parser.add_argument("--delay-ms", type=float, default=50.0,
                        help="the slow target's and the sleep's delay (50)")
    parser.add_argument("--models", default=",".join(MODELS), help="threads,asyncio,uvloop")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="http-0ms,http-50ms,sleep-50ms")
    parser.add_argument("--quick", action="store_true",
                        help="smoke check: 1 round of ~1.5 s measurements")
    parser.add_argument("--serve", type=float, metavar="DELAY", help=argparse.SUPPRESS)
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.seconds = 1, 1.5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve is not None:
        serve(args.serve)
        return 0
    if args.child:
        model, workload, calls, url, slots, delay = args.child
        child(model, workload, int(calls), url, int(slots), float(delay))
        return 0
    started = time.monotonic()
    try:
        run(args)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    print(f"\ntotal {time.monotonic() - started:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
