"""A private PgBouncer in transaction mode in front of a PostgreSQL server, and the role the
cross-tenant processes connect through it as (db/connect.py, ``connect_pooled``).

The settings that matter are deploy/pgbouncer/pgbouncer.ini's (read from that file, so the
tests exercise the shipped one); only what belongs to this machine is replaced: the listen
address and port, the files, the server it points at, and ``trust`` for loopback.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from crondepot_testkit.processes import free_port

SHIPPED_INI = Path(__file__).resolve().parents[2] / "deploy" / "pgbouncer" / "pgbouncer.ini"
POOLED_ROLE = "crondepot_pooled"


def pgbouncer_binary() -> str | None:
    """The pgbouncer executable (Debian installs it in /usr/sbin), or None."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/bin")


def unusable(server_url: str) -> str | None:
    """Why a PgBouncer cannot be put in front of ``server_url`` here, or None: it is not
    installed, or the server is reached through a Unix socket (the embedded PostgreSQL,
    whose socket belongs to the user pgserver runs it as; a pooler sits in front of a
    server on the network, which the suite's pass on PostgreSQL 15 over TCP tests)."""
    if pgbouncer_binary() is None:
        return "pgbouncer not installed"
    host = str(conninfo_to_dict(server_url).get("host") or "")
    if not host or host.startswith("/"):
        return "the database is reached through a Unix socket (the embedded PostgreSQL)"
    return None


def make_pooled_role(admin_url: str, runtime_role: str = "crondepot_runtime",
                     role: str = POOLED_ROLE) -> None:
    """``role``: logs in, has the runtime role's privileges, and sees every tenant's rows in
    the database of ``admin_url`` (a default of the role there, which every session it
    starts, through a pooler or not, begins with)."""
    dbname = str(conninfo_to_dict(admin_url).get("dbname") or "postgres")
    with psycopg.connect(admin_url, autocommit=True) as conn:
        # Made by another test already (roles belong to the cluster), or at the same moment.
        with contextlib.suppress(psycopg.errors.DuplicateObject, psycopg.errors.UniqueViolation):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN IN ROLE {}").format(
                sql.Identifier(role), sql.Identifier(runtime_role)))
        conn.execute(sql.SQL(
            "ALTER ROLE {} IN DATABASE {} SET crondepot.tenant_id = 'all'").format(
            sql.Identifier(role), sql.Identifier(dbname)))
        conn.execute(sql.SQL(
            "ALTER ROLE {} IN DATABASE {} SET idle_in_transaction_session_timeout = '60s'"
        ).format(sql.Identifier(role), sql.Identifier(dbname)))


class PgBouncer:
    """``pgbouncer`` in the foreground on a free loopback port, in a temporary folder."""

    def __init__(self, server_url: str, *, users: tuple[str, ...] = (
            "postgres", "crondepot_runtime", POOLED_ROLE), **overrides: Any) -> None:
        binary = pgbouncer_binary()
        if binary is None:
            raise FileNotFoundError("pgbouncer is not installed")
        server: dict[str, Any] = conninfo_to_dict(server_url)
        self.folder = Path(tempfile.mkdtemp(prefix="crondepot-pgbouncer-"))
        self.port = free_port()
        ini = configparser.ConfigParser(interpolation=None)
        ini.optionxform = str      # type: ignore[assignment,method-assign]  # keep case
        ini.read(SHIPPED_INI)
        ini["databases"] = {"*": f"host={server.get('host', '127.0.0.1')} "
                                 f"port={server.get('port', 5432)}"}
        pgb = ini["pgbouncer"]
        pgb.update({"listen_addr": "127.0.0.1", "listen_port": str(self.port),
                    "unix_socket_dir": "", "auth_type": "trust",
                    "auth_file": str(self.folder / "userlist.txt"),
                    "logfile": str(self.folder / "pgbouncer.log"), "pidfile": "",
                    "admin_users": "postgres", "stats_users": "postgres"})
        pgb.update({k: str(v) for k, v in overrides.items()})
        (self.folder / "userlist.txt").write_text(
            "".join(f'"{user}" ""\n' for user in users))
        with (self.folder / "pgbouncer.ini").open("w") as out:
            ini.write(out)
        command = [binary, str(self.folder / "pgbouncer.ini")]
        if os.geteuid() == 0:
            # PgBouncer refuses to run as root: it drops to nobody, who must reach its files.
            command[1:1] = ["-u", "nobody"]
            for path in (self.folder, *self.folder.iterdir()):
                path.chmod(0o777 if path.is_dir() else 0o644)
        self.popen = subprocess.Popen(command,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if self.popen.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError(f"pgbouncer did not start: {self.log()}") from None
                time.sleep(0.05)

    def url(self, base_url: str, user: str = POOLED_ROLE) -> str:
        """``base_url``'s database, through this pooler, as ``user``."""
        params: dict[str, Any] = conninfo_to_dict(base_url)
        params.pop("password", None)
        params.pop("options", None)
        params.update(host="127.0.0.1", port=str(self.port), user=user)
        return make_conninfo("", **params)

    def admin(self, command: str) -> list[dict[str, Any]]:
        """A command of PgBouncer's admin console (``SHOW POOLS``), its rows as dicts."""
        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres",
                             dbname="pgbouncer", autocommit=True,
                             prepare_threshold=None) as conn:
            cur = conn.cursor()
            cur.execute(command, prepare=False)
            names = [c.name for c in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text() if path.exists() else ""

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
