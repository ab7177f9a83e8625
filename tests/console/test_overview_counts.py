"""The console's "runs by state" counts a tenant's queued and running runs now (read in two
parts since migration 0019: running runs left the listing index), and never another
tenant's."""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.api.console.views import overview
from tests.support.runs import seed_runs


def test_queued_and_running_are_counted_per_tenant(conn: psycopg.Connection[Any]) -> None:
    _ids, jobs = seed_runs(conn)         # bank42: a_q1 queued, b_r1 running; acme: d_f1
    # a second tenant's run running and one queued: counted for it, never for bank42
    conn.execute(
        """
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                          attempt, available_at, lease_owner, lease_token, lease_expires_at)
        SELECT %(job)s || ':' || n, j.id, j.tenant_id, 'normal', now(), now(), s, 1, now(),
               CASE WHEN s = 'running' THEN 'w2' END,
               CASE WHEN s = 'running' THEN gen_random_uuid() END,
               CASE WHEN s = 'running' THEN now() + interval '1 hour' END
        FROM jobs j, (VALUES (1, 'running'), (2, 'running'), (3, 'queued')) AS v (n, s)
        WHERE j.id = %(job)s
        """, {"job": jobs["D"]})
    tenants = dict(conn.execute("SELECT name, id FROM tenants").fetchall())
    bank = overview(conn, tenants["bank42"])["states"]
    acme = overview(conn, tenants["acme"])["states"]
    assert (bank["queued"], bank["running"]) == (1, 1)
    assert (acme["queued"], acme["running"]) == (1, 2)
