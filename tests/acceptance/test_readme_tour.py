"""The README's tour, run as written against ``crondepot up --demo`` (issue 33).

The block after the README's ``<!-- tour: ... -->`` marker is what a newcomer types in a
second terminal; this test runs it with ``bash -e``, one line after another as a user would,
against a real ``up --demo`` (API, scheduler, worker with the demo SMS gateway), and then
checks that what the tour says happened did: the triggered reminder was sent, the refused
number failed, the bulk pause matched the labelled jobs. Only the address changes (a free
port instead of 8080) and the venv activation (this interpreter's directory goes first on
PATH instead).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.request import urlopen

import pytest

from crondepot.db import ALL_TENANTS, connect
from crondepot.db.connect import open_database
from crondepot_testkit.processes import Proc, free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- tour: tests/acceptance/test_readme_tour.py runs the next block -->"


def tour_script() -> str:
    text = (ROOT / "README.md").read_text()
    assert MARKER in text, "the README's tour marker is gone"
    block = re.search(r"```sh\n(.*?)```", text[text.index(MARKER):], re.S)
    assert block is not None, "no sh block after the tour marker"
    return block.group(1)


def test_the_tour_block_is_a_script_bash_can_read() -> None:
    done = subprocess.run(["bash", "-n"], input=tour_script(), text=True,
                          capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr


def _serving(port: int) -> bool:
    try:
        return bool(urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200)
    except OSError:
        return False


@pytest.mark.slow
def test_the_readme_tour_runs_as_written_against_up_demo() -> None:
    # A fresh data directory: the embedded PostgreSQL a new laptop gets, which the tour's
    # commands find as a user's do (CRONDEPOT_DATA_DIR instead of the default folder).
    folder = Path(tempfile.mkdtemp(prefix="crondepot-tour-")) / "pgdata"
    port = free_port()
    env = {**os.environ, "CRONDEPOT_DATA_DIR": str(folder),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for name in ("CRONDEPOT_DATABASE_URL", "CRONDEPOT_TENANT"):
        env[name] = ""      # unset for the tour (Proc lays env over this process's)
    up = Proc("up", "--demo", "--port", str(port), "--schedulers", "1", "--workers", "1",
              "--tick", "500ms", env=env)
    try:
        wait_until(lambda: _serving(port), timeout=120, message="up --demo serving")
        script = tour_script().replace("127.0.0.1:8080", f"127.0.0.1:{port}")
        script = script.replace(". .venv/bin/activate", "true  # PATH set by the test")
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-x"], input=script, text=True,
                              capture_output=True, cwd=ROOT, env=env, timeout=600)
        assert done.returncode == 0, f"{done.stderr[-6000:]}\n--- stdout ---\n" \
                                     f"{done.stdout[-3000:]}"
        owner = open_database(data_dir=folder).owner_url   # the server up started
        assert owner is not None
        with connect(owner, tenants=ALL_TENANTS) as conn:
            def run_states(key: str) -> list[str]:
                return [r[0] for r in conn.execute(
                    "SELECT r.status FROM runs r JOIN jobs j ON j.id = r.job_id"
                    " JOIN tenants t ON t.id = j.tenant_id"
                    " WHERE t.name = 'bank42' AND j.key = %s", (key,))]
            # The worker took the triggered runs: the demo gateway sent one, refused one.
            wait_until(lambda: run_states("bank42:48213:emi") == ["succeeded"], timeout=60,
                       message="the triggered EMI reminder sent")
            wait_until(lambda: "failed" in run_states("bank42:48214:emi")
                       or "dead" in run_states("bank42:48214:emi"), timeout=60,
                       message="the refused number failed")
            labelled = conn.execute(
                "SELECT count(*) FROM jobs j JOIN tenants t ON t.id = j.tenant_id"
                " WHERE t.name = 'bank42' AND j.labels->>'bank' = '42'").fetchone()
            assert labelled is not None and labelled[0] >= 7   # 3 added and 4 imported
        # the curl with the tour's token listed the tenant's jobs over HTTP
        assert '"key":"bank42:48213:emi"' in done.stdout.replace(" ", "")
    finally:
        up.kill(signal.SIGINT)
        up.popen.wait(timeout=90)
    assert not (folder / "postmaster.pid").exists()     # up stopped the server it started
