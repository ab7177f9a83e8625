"""A scheduler and workers whose hot path goes through a real PgBouncer in transaction mode
(``--pooled-db``) deliver every run once, while their LISTEN and maintenance connections go
to PostgreSQL directly; a pooled URL whose role does not see every tenant, a malformed one
or an unreachable one stops them at start. ``crondepot api --pooled-db`` serves requests
through it as its own role, and refuses the workers' role.

The pooler's tests are skipped where pgbouncer is not installed (.ci/run installs Debian's).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from crondepot.db import connect, roles
from crondepot_testkit.pgbouncer import POOLED_ROLE, PgBouncer, make_pooled_role, unusable
from crondepot_testkit.processes import Proc, free_port, wait_until
from tests.support.api import EMI, bearer, granted_tenant, start_api
from tests.support.jobs import CALLS_TABLE, bulk_due_jobs, queued_runs

pytestmark = pytest.mark.slow


@pytest.fixture
def bouncer(db_url: str) -> Iterator[PgBouncer]:
    if (why := unusable(db_url)) is not None:
        pytest.skip(why)
    make_pooled_role(db_url)
    with PgBouncer(db_url, default_pool_size=4) as pgb:
        yield pgb


def _one(conn: psycopg.Connection[Any], query: str) -> Any:
    row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def _sessions(conn: psycopg.Connection[Any]) -> set[tuple[str, str]]:
    """(role, application_name) of every session on the test database but this one."""
    rows = conn.execute("SELECT usename, application_name FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                        ).fetchall()
    return {(user, app) for user, app in rows}


def test_scheduler_and_workers_through_the_pooler_deliver_every_run_once(
        db_url: str, bouncer: PgBouncer) -> None:
    direct = roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    pooled = bouncer.url(db_url)
    with connect(db_url) as conn:
        conn.execute(CALLS_TABLE)
        queued_runs(conn, 300)                        # for the workers' claims at once
        bulk_due_jobs(conn, 300, handler="test.record")   # for the scheduler's tick
        env = {"CRONDEPOT_TEST_CALLS_URL": db_url}
        procs = [Proc("scheduler", "--db", direct, "--pooled-db", pooled, "--tick", "500ms",
                      env=env)]
        procs += [Proc("worker", "--db", direct, "--import", "tests.support.handlers",
                       "--name", f"w{i}", "--concurrency", "8", "--urgent-only", "0", env={
                           **env, "CRONDEPOT_POOLED_DATABASE_URL": pooled}) for i in range(2)]
        try:
            wait_until(lambda: _one(conn, "SELECT count(*) FROM runs "
                                          "WHERE status = 'succeeded'") == 600,
                       timeout=120, message="600 runs called and recorded")
            calls = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM test_calls"
                                 ).fetchone()
            sessions = _sessions(conn)
            clients = {(c["user"], c["application_name"])
                       for c in bouncer.admin("SHOW CLIENTS")}
        finally:
            codes = [p.stop() for p in procs]
    assert codes == [0, 0, 0], [p.output()[-2000:] for p in procs]
    assert calls == (600, 600)
    # Through the pooler: the workers' pools and the scheduler's ticks, as the pooled role.
    assert {("crondepot_pooled", "crondepot-worker"),
            ("crondepot_pooled", "crondepot-scheduler")} <= clients
    # Directly, as the runtime role: LISTEN (the scheduler's, each worker's) and maintenance.
    assert {(roles.DEFAULT_RUNTIME_ROLE, "crondepot-worker-listen"),
            (roles.DEFAULT_RUNTIME_ROLE, "crondepot-scheduler-listen")} <= sessions
    # Nothing the pooled role runs stays on a server connection as a session of its own:
    # the pooler's server sessions carry no crondepot application name of a LISTEN.
    assert not {app for user, app in sessions
                if user == POOLED_ROLE and app.endswith(("-listen", "-maintenance"))}


@pytest.mark.parametrize("command", ["worker", "scheduler"])
def test_a_pooled_role_that_does_not_see_every_tenant_stops_the_process(
        db_url: str, bouncer: PgBouncer, command: str) -> None:
    direct = roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    blind = bouncer.url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    proc = Proc(command, "--db", direct, "--pooled-db", blind)
    try:
        code = proc.popen.wait(timeout=60)
    finally:
        proc.kill()
    assert code != 0
    assert "--pooled-db: the pooled database URL's role does not see every tenant" in \
        proc.output()
    with connect(db_url) as conn:
        assert _one(conn, "SELECT count(*) FROM runs") == 0


@pytest.mark.parametrize(("pooled", "says"), [
    ("postgresql://[x", "expected a PostgreSQL URL"),
    (None, "--pooled-db: cannot connect through the pooler"),
])
def test_a_bad_or_unreachable_pooled_url_stops_the_worker(
        db_url: str, pooled: str | None, says: str) -> None:
    url = pooled or f"postgresql://{POOLED_ROLE}@127.0.0.1:{free_port()}/x?connect_timeout=2"
    proc = Proc("worker", "--db", db_url, "--pooled-db", url)
    try:
        assert proc.popen.wait(timeout=60) == 2      # a usage error
    finally:
        proc.kill()
    assert says in proc.output()
    with connect(db_url) as conn:
        assert _one(conn, "SELECT count(*) FROM runs") == 0


def test_the_api_process_through_the_pooler_serves_requests_as_its_own_role(
        db_url: str, bouncer: PgBouncer) -> None:
    direct = roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    through = bouncer.url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    with connect(db_url) as conn:
        made = granted_tenant(conn, "bank42")
    proc, base = start_api(direct, "--pooled-db", through)
    try:
        created = httpx.post(f"{base}/v1/jobs", json=EMI, headers=bearer(made.token),
                             timeout=30)
        listed = httpx.get(f"{base}/v1/jobs", headers=bearer(made.token), timeout=30)
        ready = httpx.get(f"{base}/readyz", timeout=30)
        clients = {(c["user"], c["application_name"]) for c in bouncer.admin("SHOW CLIENTS")}
    finally:
        proc.stop()
    assert "Traceback" not in proc.output(), proc.output()[-2000:]
    assert created.status_code == 201, created.text
    assert [job["key"] for job in listed.json()["items"]] == [EMI["key"]]
    assert ready.status_code == 200
    assert (roles.DEFAULT_RUNTIME_ROLE, "crondepot-api") in clients


def test_the_api_refuses_the_workers_pooled_role(db_url: str, bouncer: PgBouncer) -> None:
    direct = roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    proc = Proc("api", "--db", direct, "--pooled-db", bouncer.url(db_url),
                "--port", str(free_port()))
    try:
        code = proc.popen.wait(timeout=60)
    finally:
        proc.kill()
    assert code == 2
    assert "--pooled-db: the API's database role sees every tenant's rows" in proc.output()
