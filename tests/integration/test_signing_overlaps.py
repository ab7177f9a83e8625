"""The worker's view of secret rotations, read from PostgreSQL: which tenants are in (or
lately out of) an overlap, and a database that cannot say is a retry, not a call."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from crondepot.job.guard import AddressGuard
from crondepot.limits.buckets import RateLimiter
from crondepot.queue import claim_runs
from crondepot.queue.lease import Deadline
from crondepot.tenancy.tenants import create_tenant
from crondepot.tenancy.webhook_secret import rotate_secret
from crondepot.worker.execute import Attempt, Executor
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.targets import WebhookTarget
from crondepot.worker.webhook_keys import SigningKeys, Snapshot, fetch_from
from tests.support.jobs import queued_runs
from tests.support.target_server import TargetServer


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    with ConnectionPool(db_url, min_size=1, max_size=4, open=True,
                        kwargs={"autocommit": True}) as opened:
        yield opened


def test_the_snapshot_holds_tenants_in_or_lately_out_of_an_overlap(
        conn: psycopg.Connection[Any], pool: ConnectionPool) -> None:
    fetch = fetch_from(pool)
    quiet = fetch()
    assert quiet.overlaps == {}
    now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    assert abs((quiet.db_now - now).total_seconds()) < 5
    bank, other, idle = (create_tenant(conn, name) for name in ("bank42", "otherbank", "idle"))
    first = rotate_secret(conn, bank.id, timedelta(hours=1))
    second = rotate_secret(conn, bank.id, timedelta(hours=2))
    ended = rotate_secret(conn, other.id, timedelta(0))
    seen = fetch()
    assert set(seen.overlaps) == {bank.id, other.id}
    # A second rotation drops the first secret: only the last two sign.
    assert seen.overlaps[bank.id].current == second.signing_secret
    assert seen.overlaps[bank.id].previous == first.signing_secret
    assert seen.overlaps[bank.id].until == second.previous_valid_until
    assert seen.overlaps[other.id].current == ended.signing_secret
    assert seen.overlaps[other.id].until <= seen.db_now
    # An overlap that ended more than an hour ago is no longer read.
    conn.execute("UPDATE tenants SET previous_secret_until = now() - interval '61 minutes' "
                 "WHERE id = %s", (other.id,))
    assert set(fetch().overlaps) == {bank.id}
    assert idle.id not in fetch().overlaps


def test_a_rotation_committed_before_a_claim_signs_that_run_with_both_secrets(
        conn: psycopg.Connection[Any], pool: ConnectionPool) -> None:
    queued_runs(conn, 1)
    tenant_id = conn.execute("SELECT id FROM tenants").fetchone()[0]  # type: ignore[index]
    keys = SigningKeys(fetch_from(pool), ttl_seconds=3600)
    old = conn.execute("SELECT signing_secret FROM tenants").fetchone()[0]  # type: ignore[index]
    db_now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    assert keys.secrets_for(tenant_id, old, db_now) == (old,)
    rotated = rotate_secret(conn, tenant_id, timedelta(hours=1))
    (run,) = claim_runs(conn, owner="t", shares={"normal": 1})
    assert run.signing_secret == rotated.signing_secret
    assert keys.secrets_for(tenant_id, run.signing_secret, run.db_now) == (
        rotated.signing_secret, old)


def test_a_database_that_cannot_say_which_secrets_sign_is_a_retry_and_nothing_is_sent(
        conn: psycopg.Connection[Any], pool: ConnectionPool) -> None:
    server = TargetServer()
    try:
        queued_runs(conn, 1)
        conn.execute("UPDATE jobs SET target = %s::jsonb",
                     (json.dumps({"type": "http", "url": server.url(), "dedupes": False}),))
        (run,) = claim_runs(conn, owner="t", shares={"normal": 1})

        def away() -> Snapshot:
            raise psycopg.OperationalError("connection refused")

        webhooks = WebhookTarget(AddressGuard(allow=["127.0.0.1/32"]))
        executor = Executor(pool, OutcomeWriter(pool), RateLimiter(pool), webhooks,
                            stopping=lambda: False, signing_keys=SigningKeys(away))
        deadline = Deadline.from_lease(run.lease_expires_at, run.db_now, time.monotonic())
        assert executor.run(Attempt(run, deadline), recorded=lambda: None) == "done"
        webhooks.close()
    finally:
        server.close()
    assert server.received == []
    row = conn.execute("SELECT status, last_error FROM runs").fetchone()
    assert row is not None and row[0] == "queued"
    assert "cannot read the tenant's signing secrets" in row[1]
    assert "nothing was sent" in row[1]
