"""A prune pass reads only the runs it deletes: EXPLAIN ANALYZE on 100k runs over 31 days, as
the runtime role under row-level security (migration 0037, runs_finished_created; issue 34).

Before, the cut-off was a scalar subquery: an InitPlan the planner took for a third of the
table, so the pass read runs with a sequential scan (or, at best, every BRIN range whose
minimum was old, which after a retention period is all of them), and the attempts with a
hash join over all of run_attempts (bench/prune.py, docs/records/performance-runs.md)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from crondepot.db import ALL_TENANTS, Q, connect, roles
from crondepot.runs.retention import prune_cutoff
from tests.support.jobs import add_job, tenant
from tests.support.plans import filled_seq_scans, parent_index

STATES = ["succeeded"] * 8 + ["failed", "dead", "skipped", "running"]
RUNS = 100_000


class _Rollback(Exception):
    """Raised inside the explained pass's transaction: nothing it deleted stays deleted."""


@pytest.fixture
def runtime(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """The maintenance leader's connection: the runtime role, every tenant's rows."""
    with connect(roles.runtime_url(db_url, roles.DEFAULT_RUNTIME_ROLE),
                 tenants=ALL_TENANTS) as connection:
        yield connection


def _seed(conn: psycopg.Connection[Any]) -> None:
    bank, acme = tenant(conn, "bank42"), tenant(conn, "acme")
    jobs = [add_job(conn, t, cron="0 9 * * *", key=f"k{t}") for t in (bank, acme)]
    # 100k runs over 31 days, oldest first in the heap as a table filled day by day; one in
    # 12 is dead (kept by the pruner) or still running; one in 10 had an earlier attempt
    conn.execute(
        """
        WITH r AS (
            INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                              attempt, available_at, finished_at, created_at, lease_token,
                              lease_expires_at)
            SELECT (%(jobs)s::bigint[])[1 + g %% 2] || ':' || g,
                   (%(jobs)s::bigint[])[1 + g %% 2], (%(tenants)s::bigint[])[1 + g %% 2],
                   'normal', at, at, s.status, 1, at,
                   CASE WHEN s.status <> 'running' THEN at + interval '1 second' END, at,
                   CASE WHEN s.status = 'running' THEN gen_random_uuid() END,
                   CASE WHEN s.status = 'running' THEN now() + interval '1 hour' END
            FROM generate_series(%(runs)s, 1, -1) AS g,
                 LATERAL (SELECT now() - make_interval(secs => g * 31 * 86400.0 / %(runs)s)
                          AS at) AS t,
                 LATERAL (SELECT (%(states)s::text[])[1 + g %% 12] AS status) AS s
            RETURNING run_id
        )
        INSERT INTO run_attempts (run_id, attempt, started_at, ended_at, outcome)
        SELECT run_id, 1, now(), now(), 'retried' FROM r WHERE hashtext(run_id) %% 10 = 0
        """, {"jobs": jobs, "tenants": [bank, acme], "states": STATES, "runs": RUNS})
    conn.execute("ANALYZE runs")
    conn.execute("ANALYZE run_attempts")


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


def _explained_pass(conn: psycopg.Connection[Any], keep: timedelta,
                    plan_cache_mode: str) -> tuple[list[Any], int]:
    """The executed pass's plan nodes (rolled back) and the runs it deleted. The pruner's
    connection prepares the statement after five turns (psycopg's prepare_threshold), and
    PostgreSQL may then plan it once for any cut-off: the generic plan must be as good."""
    cutoff, limit = prune_cutoff(conn, keep), 500
    prepared = Q.prune_finished_runs.replace("%(cutoff)s", "$1").replace("%(limit)s", "$2")
    nodes: list[Any] = []
    conn.execute(f"PREPARE prune_pass AS {prepared}")
    try:
        with contextlib.suppress(_Rollback), conn.transaction():
            conn.execute("SELECT set_config('plan_cache_mode', %s, true)", (plan_cache_mode,))
            row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE prune_pass({}, {})")
                               .format(sql.Literal(cutoff), sql.Literal(limit))).fetchone()
            assert row is not None
            nodes = _nodes(row[0][0]["Plan"])
            raise _Rollback
    finally:
        conn.execute("DEALLOCATE prune_pass")
    return nodes, limit


@pytest.mark.parametrize("plan_cache_mode", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("days", [30, 20], ids=["a day past retention", "a backlog of 11 days"])
def test_a_prune_pass_reads_only_the_runs_it_deletes(
        conn: psycopg.Connection[Any], runtime: psycopg.Connection[Any], days: int,
        plan_cache_mode: str) -> None:
    _seed(conn)
    nodes, limit = _explained_pass(runtime, timedelta(days=days), plan_cache_mode)
    scans = [n for n in nodes if n["Node Type"].endswith("Scan")]
    assert not filled_seq_scans(runtime, scans), scans
    # the candidates: one range of the partial index, in created_at order, read to the limit
    (candidates,) = [n for n in scans
                     if parent_index(n.get("Index Name", "")) == "runs_finished_created"]
    assert candidates["Actual Rows"] == limit, candidates
    assert candidates.get("Rows Removed by Filter", 0) == 0, candidates
    # the plan asked for: a generic one compares with the parameter, a custom one the value
    assert ("$1" in candidates["Index Cond"]) == (plan_cache_mode == "force_generic_plan"), \
        candidates
    # the deletes find their rows by key, one probe a run; no other index, no other read
    indexes = {parent_index(n["Index Name"]) for n in nodes if "Index Name" in n}
    assert indexes == {"runs_finished_created", "runs_pkey", "run_attempts_run"}, nodes
    assert not [n for n in nodes if "Join" in n["Node Type"]], nodes


def test_a_prune_deletes_the_oldest_finished_runs_first(
        conn: psycopg.Connection[Any], runtime: psycopg.Connection[Any]) -> None:
    _seed(conn)
    cutoff = prune_cutoff(runtime, timedelta(days=20))
    oldest = conn.execute(
        "SELECT run_id FROM runs WHERE status IN ('succeeded', 'failed', 'skipped', "
        "'cancelled') AND created_at < %s ORDER BY created_at LIMIT 500", (cutoff,)).fetchall()
    assert runtime.execute(Q.prune_finished_runs, {"cutoff": cutoff, "limit": 500}
                           ).rowcount == 500
    left = conn.execute("SELECT count(*) FROM runs WHERE run_id = ANY (%s)",
                        ([r[0] for r in oldest],)).fetchone()
    assert left == (0,)
    # the kept ones: dead and running runs of the oldest day are still there
    kept = conn.execute("SELECT DISTINCT status FROM runs WHERE created_at < %s", (cutoff,)
                        ).fetchall()
    assert {"dead", "running"} <= {r[0] for r in kept}
