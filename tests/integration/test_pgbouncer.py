"""Connections through a real PgBouncer in transaction mode (deploy/pgbouncer/pgbouncer.ini):
what breaks without the pooled connection's rules, and that with them a cross-tenant
connection sees every tenant, statement after statement, whichever server connection the
pooler lends it, while the API's role sees none.

The pooler's tests are skipped where pgbouncer is not installed (.ci/run installs Debian's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from crondepot.db import ALL_TENANTS, bounded, roles
from crondepot.db.connect import TenantSettingError, TransactionPoolerError, connect_pooled
from crondepot_testkit.pgbouncer import (
    POOLED_ROLE,
    PgBouncer,
    make_pooled_role,
    unusable,
)
from tests.support.jobs import add_job, tenant


@pytest.fixture
def bouncer(db_url: str) -> Iterator[PgBouncer]:
    if (why := unusable(db_url)) is not None:
        pytest.skip(why)
    make_pooled_role(db_url)
    # Two server connections for three clients: the pooler must move clients between them.
    with PgBouncer(db_url, default_pool_size=2) as pgb:
        yield pgb


def _two_tenants(conn: psycopg.Connection[Any]) -> None:
    for name in ("alpha", "beta"):
        add_job(conn, tenant(conn, name), key=f"{name}-job", cron="*/5 * * * *")


def test_startup_options_are_refused_by_the_pooler(db_url: str, bouncer: PgBouncer) -> None:
    # Why the pooled URL carries no options: the direct way of saying "all tenants" fails.
    url = bouncer.url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    with pytest.raises(psycopg.OperationalError, match="unsupported startup parameter"):
        psycopg.connect(bounded(url, tenants=ALL_TENANTS)).close()


def test_a_role_without_the_tenant_setting_is_refused_not_blind(
        db_url: str, bouncer: PgBouncer, conn: psycopg.Connection[Any]) -> None:
    _two_tenants(conn)
    url = bouncer.url(db_url, roles.DEFAULT_RUNTIME_ROLE)
    with pytest.raises(TenantSettingError, match="ALTER ROLE"):
        connect_pooled(url)
    # What it would have been: a working connection that sees no rows at all.
    with psycopg.connect(url, autocommit=True) as blind:
        assert blind.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_pooled_clients_see_every_tenant_across_server_connections(
        db_url: str, bouncer: PgBouncer, conn: psycopg.Connection[Any]) -> None:
    _two_tenants(conn)
    clients = [connect_pooled(bouncer.url(db_url)) for _ in range(3)]
    try:
        pids: set[int] = set()
        # Pairs of overlapping transactions (each pair holds both server connections), more
        # often than psycopg's prepare threshold (5): a client meets both server
        # connections, and a statement prepared on one would be missing on the other.
        for round_ in range(12):
            first, second = clients[round_ % 3], clients[(round_ + 1) % 3]
            with first.transaction(), second.transaction():
                for client in (first, second):
                    row = client.execute(
                        "SELECT count(*), count(DISTINCT tenant_id), pg_backend_pid() "
                        "FROM jobs").fetchone()
                    assert row is not None and row[:2] == (2, 2)
                    pids.add(row[2])
        assert len(pids) >= 2, "the pooler lent one server connection only"
        pools = {(p["database"], p["user"]): p for p in bouncer.admin("SHOW POOLS")}
        dbname = conn.info.dbname
        assert pools[(dbname, "crondepot_pooled")]["pool_mode"] == "transaction"
        assert pools[(dbname, "crondepot_pooled")]["cl_active"] == 3
    finally:
        for client in clients:
            client.close()


def test_the_api_refuses_a_role_that_sees_every_tenant(db_url: str) -> None:
    # The pooled role's defaults must never serve API requests: a request's connection
    # would see every tenant until its token is read. The API stays on the runtime role,
    # connected directly (docs/operations.md, "Poolers").
    from fastapi.testclient import TestClient

    from crondepot.api import create_app

    make_pooled_role(db_url)
    app = create_app(roles.runtime_url(db_url, POOLED_ROLE))
    with pytest.raises(TenantSettingError, match="sees every tenant"), TestClient(app):
        pass


@pytest.mark.parametrize("mode", ["transaction", "session"])
def test_the_api_refuses_a_transaction_pooler_not_a_session_one(db_url: str, mode: str) -> None:
    # A request's tenant is a session setting: through transaction pooling another client
    # would see it. (PgBouncer refuses the API's startup options unless told to ignore
    # them, which is what an operator would have done to put the API behind it.)
    from fastapi.testclient import TestClient

    from crondepot.api import create_app

    if (why := unusable(db_url)) is not None:
        pytest.skip(why)
    with PgBouncer(db_url, pool_mode=mode, ignore_startup_parameters="options") as pgb:
        app = create_app(pgb.url(db_url, roles.DEFAULT_RUNTIME_ROLE))
        if mode == "transaction":
            with pytest.raises(TransactionPoolerError, match="transaction-mode pooler"), \
                    TestClient(app):
                pass
        else:
            with TestClient(app) as client:
                assert client.get("/readyz").status_code == 200


def test_prepared_statements_break_through_the_pooler_without_the_setting(
        db_url: str, bouncer: PgBouncer) -> None:
    # Why POOLED_CONNECTION turns psycopg's prepared statements off (PgBouncer 1.18 cannot
    # keep them): with the default threshold, interleaved clients fail.
    clients = [psycopg.connect(bouncer.url(db_url), autocommit=True) for _ in range(3)]
    try:
        with pytest.raises(psycopg.errors.DatabaseError, match="prepared statement"):
            for round_ in range(12):
                first, second = clients[round_ % 3], clients[(round_ + 1) % 3]
                with first.transaction(), second.transaction():
                    for client in (first, second):
                        client.execute("SELECT count(*) FROM jobs").fetchone()
    finally:
        for client in clients:
            client.close()
