"""Row-level security (migration 0021): the runtime role sees the rows of the tenant named by
``crondepot.tenant_id``, every row with ``all``, and none without it; it cannot write
another tenant's row. And every table with a tenant_id column has it, so a table added later
cannot forget it.

The rows are written by the test's superuser connection (which no policy binds); every look
is through the runtime role, the role every process but migrate connects as.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from crondepot.db import ALL_TENANTS, Q, connect, roles
from crondepot.tenancy import connections, scope
from crondepot.tenancy.audit import act_as
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import hash_token, new_token
from tests.support.jobs import add_job, grant_limit, tenant

ROLE = roles.DEFAULT_RUNTIME_ROLE

# Tables whose rows belong to a tenant without a tenant_id column of their own.
BY_OTHER_KEY = {"tenants": "id", "run_attempts": None}


def _fill(conn: psycopg.Connection[Any], name: str) -> int:
    """Tenant ``name`` with a row in every table a tenant owns."""
    tenant_id = tenant(conn, name)
    act_as(conn, f"test:{name}")            # audited: audit_log rows
    job_id = add_job(conn, tenant_id, key=f"{name}-job", cron="*/5 * * * *")
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at, status) VALUES (%s, %s, %s, 'normal', now(), now(), now(), "
                 "'queued')", (f"{job_id}:1", job_id, tenant_id))
    conn.execute("INSERT INTO run_attempts (run_id, attempt, ended_at, outcome) "
                 "VALUES (%s, 1, now(), 'retried')", (f"{job_id}:1",))
    conn.execute("INSERT INTO job_timetables (job_id, tenant_id, cron, tz, since, until) "
                 "VALUES (%s, %s, '0 9 * * *', 'UTC', now() - interval '1 day', now())",
                 (job_id, tenant_id))
    conn.execute(Q.insert_api_token, {"tenant_id": tenant_id, "token_hash": hash_token(
        new_token()), "role": "admin", "label": name})
    conn.execute("INSERT INTO holds (tenant_id, kind, name) VALUES (%s, 'host', %s)",
                 (tenant_id, f"{name}.example.com"))
    conn.execute("INSERT INTO rate_limits (name, rate_per_second, burst, tokens, tenant_id) "
                 "VALUES (%s, 1, 1, 1, %s)", (f"{name}-own", tenant_id))
    conn.execute("INSERT INTO rate_limits (name, rate_per_second, burst, tokens) "
                 "VALUES (%s, 1, 1, 1)", (f"{name}-shared",))
    grant_limit(conn, tenant_id, f"{name}-shared")   # limit_grants
    connections.add(conn, f"{name}-bus", "nats://127.0.0.1:4222")
    grant(conn, tenant_id, connections=[f"{name}-bus"])     # connection_grants
    conn.execute("INSERT INTO calendars (tenant_id, name, dates) VALUES (%s, %s, "
                 "'{2026-12-25}')", (tenant_id, f"{name}-holidays"))
    conn.execute("INSERT INTO notice_channels (tenant_id, kind, address) VALUES (%s, "
                 "'email', %s)", (tenant_id, f"ops@{name}.example"))
    conn.execute("INSERT INTO notice_events (tenant_id, channel_id, job_id, kind, detail) "
                 "SELECT tenant_id, id, %s, 'run_dead', 'a test event' FROM notice_channels "
                 "WHERE tenant_id = %s", (job_id, tenant_id))
    conn.execute(Q.compose_notices, {"now": None, "window_s": 3600, "limit": 100})
    conn.execute("SELECT set_config('crondepot.actor', '', false)")
    return tenant_id


def _owned_tables(conn: psycopg.Connection[Any]) -> list[str]:
    """Every table of the schema with a tenant_id column, from the catalog: partitioned
    ones (runs) and each of their partitions too."""
    return [row[0] for row in conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid "
        "WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p') "
        "AND a.attname = 'tenant_id' AND NOT a.attisdropped ORDER BY 1")]


@pytest.fixture
def tenants(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    return _fill(conn, "alpha"), _fill(conn, "beta")


@pytest.fixture
def runtime(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """The runtime role, naming no tenant (an API connection before its token is known)."""
    with connect(roles.runtime_url(db_url, ROLE)) as connection:
        assert connection.execute("SELECT current_user").fetchone() == (ROLE,)
        yield connection


def _tenants_seen(conn: psycopg.Connection[Any], table: str) -> set[int]:
    column = BY_OTHER_KEY.get(table, "tenant_id")
    if column is None:          # run_attempts: its run's tenant, read as the owner sees it
        rows = conn.execute("SELECT a.run_id FROM run_attempts a").fetchall()
        return {int(run_id.split(":")[0]) for (run_id,) in rows}
    return {row[0] for row in conn.execute(f"SELECT DISTINCT {column} FROM {table}")}


def test_the_owned_tables_are_the_ones_filled(conn: psycopg.Connection[Any],
                                               tenants: tuple[int, int]) -> None:
    """Every table with a tenant_id holds rows of both tenants here (so the tests below
    look at every one): a new owned table should be filled by _fill too."""
    a, b = tenants
    for table in _owned_tables(conn):
        column = "tenant_id"
        seen = {row[0] for row in conn.execute(f"SELECT DISTINCT {column} FROM {table}")}
        assert {a, b} <= seen, table


def test_a_tenant_sees_only_its_own_rows(conn: psycopg.Connection[Any],
                                         runtime: psycopg.Connection[Any],
                                         tenants: tuple[int, int]) -> None:
    a, b = tenants
    jobs_of = {t: row[0] for t in (a, b) for row in conn.execute(
        "SELECT id FROM jobs WHERE tenant_id = %s", (t,))}
    scope.serve(runtime, a, "test")
    for table in [*_owned_tables(conn), *BY_OTHER_KEY]:
        seen = _tenants_seen(runtime, table)
        if table == "run_attempts":
            assert seen == {jobs_of[a]}, table
        elif table == "rate_limits":    # and the shared bucket granted to it (None)
            assert seen == {a, None}, table
        else:
            assert seen == {a}, table
    # Shared buckets: the one granted to alpha, not beta's.
    names = {row[0] for row in runtime.execute("SELECT name FROM rate_limits")}
    assert names == {"alpha-own", "alpha-shared"}
    # Through the views too (security_invoker).
    for view in ("stored_jobs", "job_writes", "job_inserts"):
        assert {row[0] for row in runtime.execute(
            f"SELECT DISTINCT tenant_id FROM {view}")} == {a}, view


def test_no_tenant_sees_nothing(conn: psycopg.Connection[Any],
                                runtime: psycopg.Connection[Any],
                                tenants: tuple[int, int]) -> None:
    for table in [*_owned_tables(conn), *BY_OTHER_KEY, "stored_jobs"]:
        assert runtime.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
    # Nor after a request's tenant was forgotten (the API pool's reset).
    scope.serve(runtime, tenants[0], "test")
    runtime.execute(Q.clear_actor)
    assert runtime.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_all_tenants_sees_everything(db_url: str, conn: psycopg.Connection[Any],
                                     tenants: tuple[int, int]) -> None:
    with connect(roles.runtime_url(db_url, ROLE), tenants=ALL_TENANTS) as everyone:
        for table in [*_owned_tables(conn), *BY_OTHER_KEY]:
            assert (everyone.execute(f"SELECT count(*) FROM {table}").fetchone()
                    == conn.execute(f"SELECT count(*) FROM {table}").fetchone()), table


def test_another_tenants_rows_cannot_be_written(conn: psycopg.Connection[Any],
                                                runtime: psycopg.Connection[Any],
                                                tenants: tuple[int, int]) -> None:
    a, b = tenants
    scope.serve(runtime, a, "test")
    # Inserting a row of b: refused by WITH CHECK.
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        runtime.execute("INSERT INTO holds (tenant_id, kind, name) VALUES (%s, 'host', 'x')",
                        (b,))
    # Moving a's own row to b: refused too.
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        runtime.execute("UPDATE holds SET tenant_id = %s WHERE tenant_id = %s", (b, a))
    # Changing or deleting b's rows: they are not there to change.
    assert runtime.execute("UPDATE jobs SET paused = true WHERE tenant_id = %s",
                           (b,)).rowcount == 0
    assert runtime.execute("DELETE FROM handler_grants WHERE tenant_id = %s",
                           (b,)).rowcount == 0
    assert conn.execute("SELECT count(*) FROM handler_grants WHERE tenant_id = %s",
                        (b,)).fetchone() != (0,)
    # A shared bucket granted to a is readable, not writable.
    assert runtime.execute("UPDATE rate_limits SET burst = 9 WHERE name = 'alpha-shared'"
                           ).rowcount == 0
    # Without a tenant, nothing can be written at all.
    runtime.execute(Q.clear_actor)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        runtime.execute("INSERT INTO holds (tenant_id, kind, name) VALUES (%s, 'host', 'y')",
                        (a,))


def test_a_token_is_found_before_its_tenant_is_known(conn: psycopg.Connection[Any],
                                                     runtime: psycopg.Connection[Any],
                                                     tenants: tuple[int, int]) -> None:
    """The bearer-token look-up (a SECURITY DEFINER function) finds the token from a
    connection that sees no tenant's rows."""
    token = new_token()
    conn.execute(Q.insert_api_token, {"tenant_id": tenants[1], "token_hash": hash_token(token),
                                      "role": "read", "label": "lookup"})
    row = runtime.execute(Q.api_token_principal, {"token_hash": hash_token(token)}).fetchone()
    assert row is not None and row[0] == tenants[1] and row[1] == "beta"
    assert runtime.execute(Q.api_token_principal,
                           {"token_hash": hash_token(new_token())}).fetchone() is None


def test_every_table_with_a_tenant_id_has_row_security(conn: psycopg.Connection[Any]) -> None:
    """A table added with a tenant_id column and no policy fails here: enable row-level
    security on it and give it a policy keyed on crondepot.tenant_id (migration 0021)."""
    owned = _owned_tables(conn)
    assert {"jobs", "runs", "api_tokens", "audit_log"} <= set(owned)
    missing = [row[0] for row in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relname = ANY(%s) "
        "AND c.relnamespace = current_schema()::regnamespace "
        "AND NOT (c.relrowsecurity AND EXISTS (SELECT FROM pg_policy p "
        "WHERE p.polrelid = c.oid AND pg_get_expr(p.polqual, p.polrelid) "
        "LIKE '%%crondepot.tenant_id%%'))",
        ([*owned, *BY_OTHER_KEY],))]
    assert missing == []
    # And every view reads as its caller, so the policies hold through it.
    definer_views = [row[0] for row in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relkind = 'v' "
        "AND c.relnamespace = current_schema()::regnamespace "
        "AND NOT coalesce('security_invoker=true' = ANY(c.reloptions), false)")]
    assert definer_views == []


def test_the_api_metrics_gauges_count_every_tenant(db_url: str,
                                                   tenants: tuple[int, int]) -> None:
    """/metrics is the API's one read across tenants: its pooled connection asks for all."""
    from fastapi.testclient import TestClient
    from prometheus_client.parser import text_string_to_metric_families

    from crondepot.api import create_app

    with TestClient(create_app(roles.runtime_url(db_url, ROLE))) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    depth = {s.labels.get("priority"): s.value
             for family in text_string_to_metric_families(response.text)
             for s in family.samples if s.name == "crondepot_queue_depth"}
    assert depth["normal"] == 2          # one queued run of each tenant
