"""``crondepot api`` serves the app over real HTTP and stops cleanly on SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import httpx
import pytest

from crondepot.api.app import ApiSettings
from crondepot.base.version import __version__
from crondepot.db.migrations import schema_revision
from crondepot_testkit.processes import free_port

# The group is driven directly: registering it in crondepot.cli is the lead's one-line change.
RUNNER = """
import argparse, sys
from crondepot.cli import api
parser = argparse.ArgumentParser()
api.register(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.run(args))
"""




@pytest.mark.parametrize("workers", [1, 2])
def test_api_command_serves_healthz_and_readyz_then_stops_on_sigint(
        db_url: str, workers: int) -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", RUNNER, "api", "--db", db_url,
                                "--port", str(port), "--workers", str(workers)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                assert time.monotonic() < deadline, "the API did not start in 30 s"
                time.sleep(0.1)
        assert response.json() == {"status": "ok", "version": __version__,
                                   "schema_revision": schema_revision()}
        assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        for _ in range(4):        # every process answers (the kernel spreads connections)
            assert httpx.get(f"http://127.0.0.1:{port}/v1/jobs",
                             timeout=5).status_code == 401
        if workers > 1:
            children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True,
                                      text=True).stdout.split()
            assert len(children) >= workers
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_each_api_process_gets_its_share_of_the_request_budget() -> None:
    settings = ApiSettings(rate_per_second=50, burst=100)
    assert settings.for_one_of(1) is settings
    share = settings.for_one_of(4)
    assert (share.rate_per_second, share.burst) == (12.5, 25)
    assert ApiSettings(burst=1).for_one_of(3).burst == 1


def test_api_refuses_a_bad_process_count(db_url: str) -> None:
    done = subprocess.run([sys.executable, "-c", RUNNER, "api", "--db", db_url, "--workers",
                           "0"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "--workers" in done.stderr and "from 1 to 64" in done.stderr
