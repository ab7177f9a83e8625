"""The worker's webhook client alone: CPU per call as the slots grow.

bench/fullday.py found a worker of 320 slots spending about 4 ms of CPU per call inside
httpcore's sync connection pool, which walks every connection it holds under one lock on
each request and each response close. This measures just that path: ``--slots`` threads
calling a local gateway (bench/gateway.py in its own process, answering 0.3-1.5 s late as in
the full-day run, so that every slot holds a connection) through
one ``WebhookTarget``, and prints the client process's CPU per call and the calls a second.

    python bench/webhook_pool.py --slots 20 320 --calls 6000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from crondepot.job.guard import AddressGuard
from crondepot.worker.targets.http import WebhookCall, WebhookTarget
from crondepot_testkit.processes import free_port

HERE = Path(__file__).resolve().parent


def measure(url: str, slots: int, calls: int) -> tuple[float, float]:
    """(CPU µs per call, calls per second) of ``calls`` calls from ``slots`` threads."""
    target = WebhookTarget(AddressGuard.from_env(), slots=slots)
    left = iter(range(calls))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if next(left, None) is None:
                    return
            target.call(WebhookCall(url=url, run_id="bench:1", body=b"{}",
                                    signing_secret="whsec_" + "A" * 32, timeout_s=10,
                                    dedupes=True))

    threads = [threading.Thread(target=work) for _ in range(slots)]
    cpu, wall = time.process_time(), time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    target.close()
    return cpu / calls * 1e6, calls / wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, nargs="+", default=[20, 320])
    parser.add_argument("--calls", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", default="0.3-1.5",
                        help="the gateway's answer delay range in seconds (0.3-1.5, as the "
                             "full-day run's; 0-0 answers at once)")
    args = parser.parse_args()
    os.environ["CRONDEPOT_TARGET_ALLOWLIST"] = "127.0.0.1/32"
    port = free_port()
    gateway = subprocess.Popen([sys.executable, str(HERE / "gateway.py"), "--port", str(port),
                                "--quiet", "--delay", args.delay], stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/sms"
    try:
        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        for slots in args.slots:
            figures = [measure(url, slots, args.calls) for _ in range(args.rounds)]
            cpu = sorted(f[0] for f in figures)[len(figures) // 2]
            rate = sorted(f[1] for f in figures)[len(figures) // 2]
            print(f"{slots:4d} slots: {cpu:7.0f} µs of client CPU per call, {rate:6.0f} calls/s "
                  f"(medians of {args.rounds})")
    finally:
        gateway.terminate()
        gateway.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
