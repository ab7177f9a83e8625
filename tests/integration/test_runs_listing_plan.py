"""The runs list across jobs and the finished counts read an index, not the table: EXPLAIN
on 100k runs of two tenants (migration 0014, runs_tenant_status_ended)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from crondepot.db import Q
from tests.support.jobs import add_job, tenant

STATES = ["succeeded"] * 8 + ["failed", "dead", "skipped"]


def _plan(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> str:
    row = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
    assert row is not None
    return json.dumps(row[0])


def _seed(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    bank, acme = tenant(conn, "bank42"), tenant(conn, "acme")
    jobs = [add_job(conn, t, cron="0 9 * * *", key=f"k{t}") for t in (bank, acme)]
    # 100k runs over 30 days, one a ~26 s, alternating tenants, mostly succeeded
    conn.execute(
        """
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                          attempt, available_at, finished_at, last_error, error_class)
        SELECT (%(jobs)s::bigint[])[1 + g %% 2] || ':' || g, (%(jobs)s::bigint[])[1 + g %% 2],
               (%(tenants)s::bigint[])[1 + g %% 2], 'normal', at, at,
               (%(states)s::text[])[1 + g %% 11], 1, at, at + interval '1 second',
               CASE WHEN g %% 11 >= 8 THEN 'boom ' || g END,
               CASE WHEN g %% 11 >= 8 THEN 'PermanentError' END
        FROM generate_series(1, 100000) AS g,
             LATERAL (SELECT now() - make_interval(secs => g * 26) AS at) AS t
        """, {"jobs": jobs, "tenants": [bank, acme], "states": STATES})
    conn.execute("ANALYZE runs")
    return bank, acme


def test_the_list_and_the_counts_use_the_index(conn: psycopg.Connection[Any]) -> None:
    bank, _acme = _seed(conn)
    since = datetime.now(UTC) - timedelta(hours=1)
    listing = {"tenant_id": bank, "status": "failed", "job_id": None, "error": None,
               "since": since, "until": None, "before_at": None, "before_run_id": None,
               "limit": 101}
    plan = _plan(conn, Q.api_list_runs, listing)
    assert "runs_tenant_status_ended" in plan and '"Seq Scan"' not in plan, plan
    assert '"Sort"' not in plan, plan               # read in the index's order
    # the next page: the cursor is a bound of the same index range
    page = _plan(conn, Q.api_list_runs, listing | {"since": None, "before_at": since,
                                                     "before_run_id": "9"})
    assert "runs_tenant_status_ended" in page and '"Sort"' not in page, page
    for tenant_id in (bank, None):
        counts = _plan(conn, Q.finished_last_hour, {"tenant_id": tenant_id})
        assert "runs_tenant_status_ended" in counts, counts
        assert not any('"Relation Name": "runs"' in part and '"Seq Scan"' in part
                       for part in counts.split("{")), counts
