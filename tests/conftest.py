"""Test databases: real PostgreSQL, one fresh database per test, cloned from a template.

Where the server is:
- ``CRONDEPOT_TEST_DATABASE_URL`` (an admin URL, e.g. postgresql://127.0.0.1:5432/postgres), or
- the embedded PostgreSQL (pgserver), shared by all test processes of one checkout, in
  ``$CRONDEPOT_TEST_DATA_DIR`` (default: a folder in the system temp dir named after the
  checkout, so two checkouts' suites running at once never share, nor stop, one server).

The template is the fully migrated schema, made once per migration set (its name carries
the migrations' checksum) under an advisory lock, so parallel test processes (pytest -n)
build it once. Each test gets ``CREATE DATABASE … TEMPLATE`` (a file copy, milliseconds)
and the database is dropped afterwards.
"""

from __future__ import annotations

import hashlib
import os
import signal
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from crondepot.db import connect, migrate
from crondepot.db.embedded import EmbeddedPostgres
from crondepot.db.migrations import schema_checksum
from crondepot_testkit.cluster import PrivateCluster

_TEMPLATE_LOCK = 7301847220451893300


def _children_get_the_terminals_signals() -> None:
    """Tests send the processes they start SIGINT and SIGHUP as a terminal would (Ctrl-C, a
    closed window). A suite started in the background (``make test &`` in a script: SIGINT
    ignored) or under nohup (SIGHUP ignored) would pass "ignored" on to every process it
    starts, and those tests would fail for how the suite was started, not for what they
    test. A Python handler is reset to the default by exec in each child; for the suite
    itself SIGINT still interrupts it, and a hangup still does not end it."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, lambda _signum, _frame: None)


_children_get_the_terminals_signals()


@pytest.fixture(scope="session")
def admin_url() -> Iterator[str]:
    url = os.environ.get("CRONDEPOT_TEST_DATABASE_URL")
    if url:
        yield url
        return
    folder = Path(os.environ.get("CRONDEPOT_TEST_DATA_DIR") or _default_data_dir())
    server = EmbeddedPostgres(folder)
    server.start()
    yield server.admin_url
    server.close()


def _default_data_dir() -> Path:
    checkout = hashlib.sha256(str(Path(__file__).resolve().parent.parent).encode())
    return Path(tempfile.gettempdir()) / f"crondepot-test-pgdata-{checkout.hexdigest()[:10]}"


def _template_name() -> str:
    return f"crondepot_tpl_{schema_checksum()[:16]}"


@pytest.fixture(scope="session")
def template_db(admin_url: str) -> str:
    name = _template_name()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK,))
        try:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (name,)).fetchone()
            if not exists:
                building = f"{name}_building"
                conn.execute(f'DROP DATABASE IF EXISTS "{building}"')
                conn.execute(f'CREATE DATABASE "{building}"')
                with connect(make_conninfo(admin_url, dbname=building)) as tpl:
                    migrate(tpl)
                conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK,))
    return name


def _new_database(admin_url: str, template: str) -> tuple[str, str]:
    name = f"crondepot_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name, make_conninfo(admin_url, dbname=name)


def _drop_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(admin_url: str, template_db: str) -> Iterator[str]:
    """A migrated database of this test's own."""
    name, url = _new_database(admin_url, template_db)
    yield url
    _drop_database(admin_url, name)


@pytest.fixture
def empty_db_url(admin_url: str) -> Iterator[str]:
    """An empty database of this test's own (for migration tests)."""
    name, url = _new_database(admin_url, "template0")
    yield url
    _drop_database(admin_url, name)


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(db_url) as connection:
        yield connection


@pytest.fixture
def tenant_id(conn: psycopg.Connection[Any]) -> int:
    """Tenant bank42, granted the test handlers (tests.support.jobs.TEST_HANDLERS)."""
    from tests.support.jobs import tenant

    return tenant(conn, "bank42")


@pytest.fixture
def cluster() -> Iterator[PrivateCluster]:
    """A private PostgreSQL cluster the test may stop and restart (never the shared one)."""
    private = PrivateCluster()
    private.start()
    try:
        yield private
    finally:
        private.destroy()
