"""The API's request pool behind a real PgBouncer in transaction mode (``crondepot api
--pooled-db``; deploy/pgbouncer/pgbouncer.ini): each request is one transaction whose tenant
and actor are its own, so on ONE server connection shared by two tenants' interleaved
requests nothing leaks from one request to the next, an error in the middle of a request
included; the start-up checks take the API's role through the pooler and refuse the
workers' one.

Skipped where a pooler cannot sit (the embedded PostgreSQL's Unix socket; no pgbouncer):
the suite's pass on PostgreSQL 15 over TCP runs them. The whole of tests/api runs through
the pooler with CRONDEPOT_TEST_API_POOLER=1 (tests/support/pooler.py, .ci/run).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings, create_app
from crondepot.api.auth import Conn, Reader
from crondepot.db import roles
from crondepot.db.connect import TenantSettingError, TransactionPoolerError
from crondepot_testkit.pgbouncer import POOLED_ROLE, PgBouncer, make_pooled_role, unusable
from tests.support.api import EMI, bearer, granted_tenant

RUNTIME = roles.DEFAULT_RUNTIME_ROLE
SETTINGS = ApiSettings(pool_max_size=4, rate_per_second=10_000, burst=10_000,
                       pool_wait_seconds=60)


@pytest.fixture
def one_server(db_url: str) -> Iterator[PgBouncer]:
    """A PgBouncer with ONE server connection per (database, role): every request of the
    API's pool, whichever tenant's, runs on the same PostgreSQL session in turn."""
    if (why := unusable(db_url)) is not None:
        pytest.skip(why)
    with PgBouncer(db_url, default_pool_size=1) as pgb:
        yield pgb


def _probe_routes(app: FastAPI) -> None:
    """Two routes of this test's app only: what the request's session says about itself,
    and a statement that fails in the middle of a request."""
    def whoami(who: Reader, conn: Conn) -> JSONResponse:
        row = conn.execute(
            "SELECT pg_backend_pid(), current_setting('crondepot.tenant_id', true), "
            "current_setting('crondepot.actor', true), "
            "(SELECT count(*) FROM jobs), (SELECT count(DISTINCT tenant_id) FROM jobs), "
            "current_setting('transaction_isolation')"
        ).fetchone()
        assert row is not None
        return JSONResponse({"tenant": who.tenant, "pid": row[0], "setting": row[1],
                             "actor": row[2], "jobs": row[3], "tenants": row[4],
                             "isolation": row[5]})

    def boom(who: Reader, conn: Conn) -> JSONResponse:
        conn.execute("SELECT 1 / 0")
        raise AssertionError("unreachable")

    app.add_api_route("/test/whoami", whoami, methods=["GET", "POST"], include_in_schema=False)
    app.add_api_route("/test/boom", boom, methods=["POST"], include_in_schema=False)


def _app(db_url: str, bouncer: PgBouncer) -> FastAPI:
    direct = roles.runtime_url(db_url, RUNTIME)
    app = create_app(direct, SETTINGS, pooled_url=bouncer.url(db_url, RUNTIME))
    _probe_routes(app)
    return app


def _leftover(bouncer: PgBouncer, db_url: str) -> tuple[Any, ...]:
    """What the next client of the pooler's one server connection finds there."""
    with psycopg.connect(bouncer.url(db_url, RUNTIME), autocommit=True,
                         prepare_threshold=None) as raw:
        row = raw.execute("SELECT current_setting('crondepot.tenant_id', true), "
                          "current_setting('crondepot.actor', true), "
                          "(SELECT count(*) FROM jobs)").fetchone()
    assert row is not None
    return tuple(row)


def _token_ids(conn: psycopg.Connection[Any]) -> dict[str, int]:
    rows = conn.execute("SELECT t.name, min(k.id) FROM api_tokens k JOIN tenants t "
                        "ON t.id = k.tenant_id GROUP BY t.name").fetchall()
    return {name: token_id for name, token_id in rows}


def test_two_tenants_interleaved_on_one_server_connection_leak_nothing(
        db_url: str, conn: psycopg.Connection[Any], one_server: PgBouncer) -> None:
    tokens = {name: granted_tenant(conn, name).token for name in ("alpha", "beta")}
    ids = _token_ids(conn)
    actors = {name: f"token:{ids[name]}@{name}" for name in tokens}

    def request(i: int) -> tuple[str, dict[str, Any], int]:
        name = ("alpha", "beta")[i % 2]
        created = client.post("/v1/jobs", json={**EMI, "key": f"{name}-{i}"},
                              headers=bearer(tokens[name]))
        seen = client.get("/test/whoami", headers=bearer(tokens[name]))
        assert seen.status_code == 200, seen.text
        return name, seen.json(), created.status_code

    with TestClient(_app(db_url, one_server)) as client, ThreadPoolExecutor(8) as threads:
        results = list(threads.map(request, range(40)))
        listed = {name: [job["key"] for job in client.get(
            "/v1/jobs", params={"limit": 100}, headers=bearer(token)).json()["items"]]
            for name, token in tokens.items()}
    assert [status for *_, status in results] == [201] * 40
    for name, seen, _ in results:
        # The request's own tenant and actor, and its tenant's rows only.
        assert seen["tenant"] == name
        assert (seen["setting"], seen["actor"]) == (str(_tenant_id(conn, name)), actors[name])
        assert seen["tenants"] == 1
    # Every request ran on the one server session the pooler has: interleaved, not apart.
    assert len({seen["pid"] for _, seen, _ in results}) == 1
    servers = [s for s in one_server.admin("SHOW SERVERS") if s["user"] == RUNTIME]
    assert len(servers) == 1
    for name, keys in listed.items():
        assert len(keys) == 20 and all(key.startswith(f"{name}-") for key in keys)
    # The audit log names each tenant's own token for each of its jobs.
    audited = set(conn.execute(
        "SELECT t.name, a.actor FROM audit_log a JOIN tenants t ON t.id = a.tenant_id "
        "WHERE a.subject LIKE 'job %%' OR a.action LIKE 'job.%%'").fetchall())
    assert audited == {(name, actors[name]) for name in tokens}
    # The next client of that server connection finds no tenant, no actor, no row.
    assert _leftover(one_server, db_url) in {("", "", 0), (None, None, 0)}


def _tenant_id(conn: psycopg.Connection[Any], name: str) -> int:
    row = conn.execute("SELECT id FROM tenants WHERE name = %s", (name,)).fetchone()
    assert row is not None
    return int(row[0])


def test_an_error_mid_request_leaves_the_next_request_its_own_tenant(
        db_url: str, conn: psycopg.Connection[Any], one_server: PgBouncer) -> None:
    alpha, beta = granted_tenant(conn, "alpha"), granted_tenant(conn, "beta")
    app = _app(db_url, one_server)
    with TestClient(app, raise_server_exceptions=False) as client:
        assert client.post("/v1/jobs", json={**EMI, "key": "beta-1"},
                           headers=bearer(beta.token)).status_code == 201
        failed = client.post("/test/boom", headers=bearer(alpha.token))
        assert failed.status_code == 500
        after = client.get("/test/whoami", headers=bearer(beta.token)).json()
        # A change made before the error in the failed request is rolled back with it.
        created = client.post("/v1/jobs", json={**EMI, "key": "alpha-1"},
                              headers=bearer(alpha.token))
    assert after["setting"] == str(beta.id) and after["actor"].endswith("@beta")
    assert after["jobs"] == 1 and after["tenants"] == 1
    assert created.status_code == 201
    assert _leftover(one_server, db_url) in {("", "", 0), (None, None, 0)}


def test_a_bulk_action_through_the_pooler_commits_batch_by_batch(
        db_url: str, conn: psycopg.Connection[Any], one_server: PgBouncer) -> None:
    # 2,500 matching jobs, 1,000 to a batch: three transactions, as on a direct connection
    # (each batch's summary entry carries its own transaction's time).
    made = granted_tenant(conn, "alpha")
    conn.execute(
        "INSERT INTO jobs (tenant_id, key, cron, tz, next_run_at, next_nominal_at, target) "
        "SELECT %s, 'bulk-' || g, '0 9 * * *', 'UTC', now() + interval '1 day', "
        "now() + interval '1 day', jsonb_build_object('type', 'python', 'handler', "
        "'test.noop') FROM generate_series(1, 2500) AS g", (made.id,))
    with TestClient(_app(db_url, one_server)) as client:
        done = client.post("/v1/jobs/bulk/pause", json={"key_prefix": "bulk-"},
                           headers=bearer(made.token))
    assert done.status_code == 200, done.text
    assert done.json()["count"] == 2500
    summaries = conn.execute("SELECT actor, at FROM audit_log "
                             "WHERE action = 'job.bulk_pause' ORDER BY id").fetchall()
    assert len(summaries) == 3
    assert len({at for _, at in summaries}) == 3
    assert {actor for actor, _ in summaries} == {f"token:{_token_ids(conn)['alpha']}@alpha"}
    assert conn.execute("SELECT count(*) FROM jobs WHERE NOT paused").fetchone() == (0,)


def test_one_transaction_requests_on_a_direct_url_leave_the_session_bare(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    # The request mode itself, without a pooler (so on the embedded database too): the
    # pooled URL may name PostgreSQL directly. One connection: every request on one session.
    alpha, beta = granted_tenant(conn, "alpha"), granted_tenant(conn, "beta")
    direct = roles.runtime_url(db_url, RUNTIME)
    app = create_app(direct, ApiSettings(pool_max_size=1, rate_per_second=10_000,
                                         burst=10_000), pooled_url=direct)
    _probe_routes(app)

    def bare(conn: Conn) -> JSONResponse:
        row = conn.execute("SELECT pg_backend_pid(), current_setting('crondepot.tenant_id', "
                           "true), current_setting('crondepot.actor', true), "
                           "current_setting('transaction_isolation'), "
                           "(SELECT count(*) FROM jobs)").fetchone()
        assert row is not None
        return JSONResponse(list(row))

    app.add_api_route("/test/bare", bare, methods=["GET", "POST"], include_in_schema=False)
    with TestClient(app) as client:
        assert client.post("/v1/jobs", json={**EMI, "key": "alpha-1"},
                           headers=bearer(alpha.token)).status_code == 201
        read, write = client.get("/test/bare").json(), client.post("/test/bare").json()
        seen = client.get("/test/whoami", headers=bearer(beta.token)).json()
        wrote = client.post("/test/whoami", headers=bearer(beta.token)).json()
        verified = client.get("/v1/verify", headers=bearer(alpha.token))
        forecast = client.get("/v1/forecast", headers=bearer(alpha.token))
    # Nothing of alpha's request is left on the session: no tenant, no actor, no row.
    assert read[1:3] in (["", ""], [None, None]) and read[4] == 0 and write[4] == 0
    # A request's transaction starts with its tenant: a read's REPEATABLE READ.
    assert (seen["isolation"], wrote["isolation"]) == ("repeatable read", "read committed")
    assert read[0] == write[0] == seen["pid"] == wrote["pid"]
    assert (seen["setting"], seen["jobs"]) == (str(beta.id), 0)
    # The two reads that need one snapshot take the request's own.
    assert verified.status_code == 200, verified.text
    assert forecast.status_code == 200, forecast.text


def test_the_api_takes_its_own_role_through_the_pooler_not_the_workers(
        db_url: str, one_server: PgBouncer) -> None:
    make_pooled_role(db_url)
    direct = roles.runtime_url(db_url, RUNTIME)
    with TestClient(create_app(direct, pooled_url=one_server.url(db_url, RUNTIME))) as client:
        assert client.get("/readyz").status_code == 200
    workers = create_app(direct, pooled_url=one_server.url(db_url, POOLED_ROLE))
    with pytest.raises(TenantSettingError, match="sees every tenant"), TestClient(workers):
        pass


def test_a_pooler_given_as_the_direct_url_is_refused_pointing_to_pooled_db(
        db_url: str) -> None:
    if (why := unusable(db_url)) is not None:
        pytest.skip(why)
    # (PgBouncer refuses the API's startup options unless told to ignore them.)
    with PgBouncer(db_url, ignore_startup_parameters="options") as pgb:
        app = create_app(pgb.url(db_url, RUNTIME))
        with pytest.raises(TransactionPoolerError, match="--pooled-db"), TestClient(app):
            pass
