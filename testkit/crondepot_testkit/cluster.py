"""A private PostgreSQL cluster a test or a benchmark can restart (never the machine's shared
service).

Uses the PostgreSQL binaries that ship inside the pgserver package, listening on a free
loopback port. As root, PostgreSQL refuses to run, so the cluster runs as the ``pgserver``
user that pgserver itself creates.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from pgserver._commands import POSTGRES_BIN_PATH

from crondepot_testkit.processes import free_port


class PrivateCluster:
    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="crondepot-cluster-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.user: str | None = None
        if os.geteuid() == 0:
            from pgserver.utils import ensure_user_exists

            self.user = "pgserver"
            ensure_user_exists(self.user)
            os.chmod(self.root, 0o777)
        self._run("initdb", "-D", str(self.data), "--auth=trust", "-U", "postgres",
                  "--encoding=utf8", "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, exe: str, *args: str) -> None:
        subprocess.run([str(POSTGRES_BIN_PATH / exe), *args], check=True, user=self.user,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)

    def _ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-w", "-t", "60",
                  "-l", str(self.root / "log"), *args)

    def run_tool(self, exe: str, *args: str) -> None:
        """One of PostgreSQL's programs (pg_basebackup, …), as the cluster's user."""
        self._run(exe, *args)

    def start(self, *settings: str) -> None:
        """Start; ``settings`` are more server options, like ``-c archive_mode=on``."""
        self._ctl("-o", " ".join([f"-p {self.port} -h 127.0.0.1 -k {self.root} -c fsync=off "
                                  "-c max_connections=200", *settings]), "start")

    def stop(self, mode: str = "fast") -> None:
        self._ctl("-m", mode, "stop")

    def restart(self, mode: str = "immediate") -> None:
        """Stop (``immediate`` = crash-like, no checkpoint) and start again."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
