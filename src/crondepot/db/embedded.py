"""The embedded PostgreSQL (pgserver) used when no database URL is given.

One data directory is one server. The first crondepot process that needs it starts it; every
process using the same directory shares it (pgserver keeps a list of the processes holding
it, under a file lock); the last one to let go stops it cleanly. A process killed with
SIGKILL cannot let go, so the server then keeps running until ``crondepot db stop``:
harmless, and the next process simply finds it running.

The server's superuser (``postgres``, trusted on a socket only this user can reach) owns the
schema and migrates; every other process connects as the runtime role (db/roles.py), which
``start`` creates with the database, so a process started before the first migrate is told
the schema is missing rather than that its role is.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import warnings
from pathlib import Path
from typing import Any

import platformdirs

from crondepot.base.errors import DatabaseUnavailable
from crondepot.db import roles
from crondepot.db.queries import Q

DATABASE_NAME = "crondepot"  # created by Q.create_database


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("crondepot")) / "pgdata"


def up_lock_path(data_dir: Path) -> Path:
    """The lock file a running ``crondepot up`` holds (flock) beside its data directory; it
    holds that ``up``'s pid."""
    return data_dir.parent / f"{data_dir.name}.up.lock"


def up_holder(data_dir: Path) -> int | None:
    """The pid of the ``crondepot up`` running on ``data_dir``, if one is."""
    try:
        with open(up_lock_path(data_dir)) as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = lock.read().strip()
                return int(pid) if pid.isdigit() else 0
            return None
    except FileNotFoundError:
        return None


def server_pid(data_dir: Path) -> int | None:
    """The embedded server's postmaster pid, if it is running."""
    try:
        first = (data_dir / "postmaster.pid").read_text().splitlines()[0]
    except (FileNotFoundError, IndexError):
        return None
    return int(first) if first.strip().isdigit() else None


class EmbeddedPostgres:
    """A handle on the embedded server in ``data_dir``; ``close()`` lets go of it."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir.expanduser().resolve()
        self._server: Any = None

    @property
    def admin_url(self) -> str:
        """The conninfo of the server's ``postgres`` database (start() first)."""
        assert self._server is not None, "start() the server first"
        url: str = self._server.get_uri("postgres")
        return url

    def start(self) -> str:
        """Start (or join) the server; return the conninfo of crondepot's database, as the
        owner."""
        _quiet_platformdirs()
        import pgserver  # imported late: it is heavy and only needed without a URL

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._server = pgserver.get_server(  # type: ignore[attr-defined]
                self.data_dir, cleanup_mode="stop")
        except Exception as exc:  # pgserver raises plain subprocess/OS errors
            raise DatabaseUnavailable(
                f"could not start the embedded PostgreSQL in {self.data_dir}: {exc}"
            ) from exc
        self._ensure_database()
        url: str = self._server.get_uri(DATABASE_NAME)
        return url

    def _ensure_database(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            if not conn.execute(Q.database_exists).fetchone():
                # Another process may create it between our check and our create: its
                # CREATE committed first gives DuplicateDatabase, one still running gives
                # our CREATE a UniqueViolation on the catalog's index (two test processes,
                # or two `up`s, on a new data directory).
                with contextlib.suppress(psycopg.errors.DuplicateDatabase,
                                         psycopg.errors.UniqueViolation):
                    conn.execute(Q.create_database)
            roles.ensure(conn, roles.DEFAULT_RUNTIME_ROLE)

    def close(self) -> None:
        if self._server is not None:
            self._server.cleanup()
            self._server = None


def _quiet_platformdirs() -> None:
    # pgserver asks platformdirs for a runtime dir; without XDG_RUNTIME_DIR (containers, CI)
    # platformdirs warns on every start although its fallback works.
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/tmp/runtime-{os.getuid()}")
    Path(os.environ["XDG_RUNTIME_DIR"]).mkdir(mode=0o700, parents=True, exist_ok=True)
    warnings.filterwarnings("ignore", module="platformdirs")


def stop(data_dir: Path) -> bool:
    """Stop the embedded server in ``data_dir`` whoever started it; False if none was running."""
    import subprocess

    # pgserver's own wrapper around its pg_ctl binary (made at import time, hence the ignore)
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

    data_dir = data_dir.expanduser().resolve()
    if not (data_dir / "postmaster.pid").exists():
        return False
    user = "pgserver" if os.geteuid() == 0 else None  # pgserver runs postgres as this user
    try:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=user, timeout=60)
    except subprocess.CalledProcessError:
        return False
    (data_dir / ".handle_pids.json").unlink(missing_ok=True)
    return True
