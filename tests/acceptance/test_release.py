"""The release as a user gets it: ``python -m build``'s wheel installed in a new venv (its
dependencies from the package index), then ``crondepot up`` on the embedded database, one
job created and triggered with that venv's CLI, its run succeeded, and ``up`` stopped.

It downloads and installs about 45 packages (a minute or more), so it runs once per CI run,
not in each of the suite's two passes: ``.ci/run`` sets ``CRONDEPOT_RELEASE_SMOKE=1``.
Each step's duration is printed (``pytest -s``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import crondepot
from crondepot.db.migrations import schema_revision
from crondepot_testkit.processes import free_port, wait_until
from tests.support.release import build_dists

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("CRONDEPOT_RELEASE_SMOKE") != "1",
                       reason="installs the wheel's dependencies from the package index (a "
                              "minute or more): .ci/run runs it once with "
                              "CRONDEPOT_RELEASE_SMOKE=1"),
]
JOB = {"key": "smoke", "cron": "0 0 1 1 *", "tz": "UTC",
       "target": {"type": "python", "handler": "crondepot.log"},
       "payload": {"note": "the release smoke test"}}


def _clean_env() -> dict[str, str]:
    """Nothing of this tree or of the shared venv reaches the installed release."""
    return {name: value for name, value in os.environ.items()
            if not name.startswith(("CRONDEPOT_", "PYTHON", "VIRTUAL_ENV"))}


class Installed:
    def __init__(self, venv: Path, data: Path) -> None:
        self.exe = venv / "bin" / "crondepot"
        self.data = data

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.exe), *args, "--data-dir", str(self.data)],
                              capture_output=True, text=True, timeout=120, env=_clean_env())
        assert done.returncode == 0, f"crondepot {' '.join(args)}: {done.stderr[-2000:]}"
        return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    folder = tmp_path_factory.mktemp("release")
    began = time.monotonic()
    _, wheel = build_dists(folder)
    built = time.monotonic()
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120,
                   env=_clean_env())
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet",
                           "--disable-pip-version-check", str(wheel)],
                          capture_output=True, text=True, timeout=600, env=_clean_env())
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"\nrelease: built in {built - began:.1f} s; venv and install "
          f"{time.monotonic() - built:.1f} s")
    yield Installed(venv, folder / "pgdata")


def test_the_installed_wheel_is_this_tree_and_nothing_more(installed: Installed) -> None:
    done = installed.run("--version")
    assert done.stdout.strip() == (f"crondepot {crondepot.__version__} "
                                   f"(schema revision {schema_revision()})")
    python = installed.exe.parent / "python"
    probe = subprocess.run([str(python), "-c", "import crondepot, importlib.util; "
                            "print(crondepot.__file__); "
                            "print(importlib.util.find_spec('crondepot_testkit'))"],
                           capture_output=True, text=True, timeout=60, env=_clean_env())
    where, testkit = probe.stdout.split()
    assert where.startswith(str(installed.exe.parent.parent)) and testkit == "None"


def test_up_on_the_embedded_database_runs_a_job(installed: Installed, tmp_path: Path) -> None:
    port = free_port()
    log = (tmp_path / "up.log").open("w")
    began = time.monotonic()
    up = subprocess.Popen([str(installed.exe), "up", "--data-dir", str(installed.data),
                           "--port", str(port), "--schedulers", "1", "--workers", "1",
                           "--tick", "500ms"], stdout=log, stderr=subprocess.STDOUT,
                          env=_clean_env())
    try:
        health: dict[str, Any] = {}

        def serving() -> bool:
            try:
                health.update(httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json())
            except (httpx.HTTPError, ValueError):
                return False
            return True

        wait_until(lambda: serving() or up.poll() is not None, timeout=180, message="/healthz")
        assert up.poll() is None, (tmp_path / "up.log").read_text()[-3000:]
        assert health == {"status": "ok", "version": crondepot.__version__,
                          "schema_revision": schema_revision()}
        serving_at = time.monotonic()
        installed.run("tenants", "create", "smoke", "--json")
        installed.run("tenants", "grant", "smoke", "--handler", "crondepot.log")
        installed.run("jobs", "add", json.dumps(JOB), "--tenant", "smoke")
        installed.run("jobs", "trigger", "smoke", "--tenant", "smoke")
        triggered_at = time.monotonic()
        runs: list[dict[str, Any]] = []

        def succeeded() -> bool:
            listed = installed.run("runs", "list", "--tenant", "smoke", "--job", "smoke",
                                   "--json")
            runs[:] = json.loads(listed.stdout)["items"]
            return any(run["status"] == "succeeded" for run in runs)

        wait_until(succeeded, timeout=60, message="the triggered run to succeed")
        assert len(runs) == 1
        done_at = time.monotonic()
    finally:
        up.send_signal(signal.SIGTERM)
        code = up.wait(timeout=90)
        log.close()
    print(f"\nrelease: up serving after {serving_at - began:.1f} s; the triggered run "
          f"succeeded {done_at - triggered_at:.1f} s after the trigger; stopped "
          f"{time.monotonic() - done_at:.1f} s later")
    assert code == 0, (tmp_path / "up.log").read_text()[-3000:]
