"""``crondepot up`` on a shared laptop, with real processes: one ``up`` per embedded
database, a taken port refused before anything starts, and a closed terminal (SIGHUP)
stopping every child and the embedded server it started."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.request import urlopen

import pytest

from crondepot.db import connect
from crondepot_testkit.processes import Proc, free_port, wait_until


def _up(folder: Path, port: int) -> Proc:
    return Proc("up", "--data-dir", str(folder), "--port", str(port), "--schedulers", "1",
                "--workers", "1", "--tick", "500ms")


def _run_up(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", "up", *args],
                          capture_output=True, text=True, timeout=120)


def _status(folder: Path) -> tuple[int, dict[str, object]]:
    done = subprocess.run([sys.executable, "-m", "crondepot", "db", "status", "--data-dir",
                           str(folder), "--json"], capture_output=True, text=True, timeout=60)
    return done.returncode, json.loads(done.stdout)


def _serving(port: int) -> bool:
    try:
        return bool(urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status == 200)
    except OSError:
        return False


def _alive(pid: int) -> bool:
    """Running: a zombie (exited, its parent not yet told) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _children(up: Proc) -> list[int]:
    return [int(line["child_pid"]) for line in up.lines()
            if str(line.get("msg", "")).startswith("started ") and line.get("child_pid")]


def _folder() -> Path:
    return Path(tempfile.mkdtemp(prefix="crondepot-up-")) / "pgdata"


@pytest.mark.slow
def test_a_second_up_on_the_same_embedded_database_is_refused_and_the_first_goes_on() -> None:
    folder, port = _folder(), free_port()
    first = _up(folder, port)
    try:
        wait_until(lambda: _serving(port), timeout=120, message="the first up serving")
        second = _run_up("--data-dir", str(folder), "--port", str(port))   # the same port
        assert second.returncode == 2, second.stderr
        assert f"another crondepot up (pid {first.popen.pid}) is running on the embedded " \
               f"database in {folder}" in second.stderr
        assert "crondepot is up" not in second.stdout
        assert _serving(port) and (folder / "postmaster.pid").exists()
        code, status = _status(folder)
        assert code == 0 and status["running"] is True
        assert status["up_pid"] == first.popen.pid
    finally:
        first.kill(signal.SIGINT)
        code = first.popen.wait(timeout=90)
    assert code == 0, first.output()
    assert not (folder / "postmaster.pid").exists()     # the first up stopped what it started
    assert _status(folder) == (1, {"data_dir": str(folder.resolve()), "running": False,
                                   "server_pid": None, "up_pid": None})


def test_a_taken_port_is_an_error_before_anything_starts(empty_db_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = _run_up("--db", empty_db_url, "--port", str(port))
    assert result.returncode == 2, result.stderr
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr
    with connect(empty_db_url) as conn:
        assert conn.execute("SELECT to_regclass('jobs')").fetchone() == (None,)  # not migrated


@pytest.mark.slow
def test_a_closed_terminal_stops_every_child_and_the_embedded_server() -> None:
    folder, port = _folder(), free_port()
    up = _up(folder, port)
    try:
        wait_until(lambda: _serving(port) and len(_children(up)) == 3, timeout=120,
                   message="api, scheduler and worker started")
        server = int((folder / "postmaster.pid").read_text().splitlines()[0])
        children = _children(up)
        up.kill(signal.SIGHUP)
        code = up.popen.wait(timeout=90)
    finally:
        up.kill()
    assert code == 0, up.output()
    assert "all stopped" in up.output()
    assert "did not stop" not in up.output()            # each child stopped on its SIGTERM
    for pid in [*children, server]:
        wait_until(lambda pid=pid: not _alive(pid), timeout=30, message=f"pid {pid} gone")
    assert not (folder / "postmaster.pid").exists()
