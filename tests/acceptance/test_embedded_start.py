"""Processes that start the embedded PostgreSQL on a new data directory at the same time
(the test suite's workers on a fresh machine, two `up`s) all get crondepot's database."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_START = """
import sys
from crondepot.db.embedded import EmbeddedPostgres
server = EmbeddedPostgres(__import__("pathlib").Path(sys.argv[1]))
url = server.start()
import psycopg
with psycopg.connect(url) as conn:
    print(conn.execute("SELECT current_database()").fetchone()[0], flush=True)
sys.stdin.read()          # hold the server until every process has connected
server.close()
"""


def test_processes_starting_a_new_embedded_server_together_all_get_the_database(
        tmp_path: Path) -> None:
    # On a new data directory each process finds no database and creates it: one CREATE
    # wins, the others' fail with DuplicateDatabase or, while the winner's CREATE still
    # runs, a UniqueViolation on the catalog; both mean "it is there now". Without the
    # second, a whole test run errored at setup on a fresh machine (1,060 errors).
    folder = tmp_path / "pgdata"
    starts = [subprocess.Popen([sys.executable, "-c", _START, str(folder)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for _ in range(4)]
    try:
        names = [p.stdout.readline().strip() for p in starts if p.stdout]
    finally:
        for p in starts:
            _, err = p.communicate("", timeout=120)
            assert p.returncode == 0, err[-2000:]
    assert names == ["crondepot"] * 4
