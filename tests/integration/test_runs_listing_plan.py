"""The runs list across jobs and the finished counts read an index, not the table: EXPLAIN
on 100k runs of two tenants (migration 0014, runs_tenant_status_ended; since migration 0019
that index leaves running runs out, and the list reads them through runs_running)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from crondepot.db import Q
from crondepot.runs import partitions
from crondepot.runs.reads import listed_statuses
from tests.support.jobs import add_job, tenant
from tests.support.plans import filled_seq_scans, of_runs, parent_index, parent_names

STATES = ["succeeded"] * 8 + ["failed", "dead", "skipped"]


def _plan(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]) -> str:
    row = conn.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchone()
    assert row is not None
    return parent_names(json.dumps(row[0]))


def _seed(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    bank, acme = tenant(conn, "bank42"), tenant(conn, "acme")
    jobs = [add_job(conn, t, cron="0 9 * * *", key=f"k{t}") for t in (bank, acme)]
    # A day partition for each of the 31 days, as the maintenance leader keeps them: the
    # plans are read over every day's copy of the indexes.
    partitions.make_ahead(conn, days=31, now=datetime.now(UTC) - timedelta(days=31))
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


def _nodes(plan: Any) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


def _plan_root(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any], *,
               analyze: bool = False) -> dict[str, Any]:
    explain = "EXPLAIN (ANALYZE, FORMAT JSON) " if analyze else "EXPLAIN (FORMAT JSON) "
    row = conn.execute(explain + sql, params).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]["Plan"]
    return plan


def _runs_scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The plan's scans of runs, each with its index (and, executed, the rows it returned)."""
    return [node | {"Index Name": parent_index(node.get("Index Name", ""))}
            for node in _nodes(plan) if of_runs(node.get("Relation Name"))]


def _scans_of_runs(conn: psycopg.Connection[Any], params: dict[str, Any]) -> list[dict[str, Any]]:
    """The executed list's scans of runs."""
    return _runs_scans(_plan_root(conn, Q.list_runs, params, analyze=True))


def test_the_list_and_the_counts_use_the_index(conn: psycopg.Connection[Any]) -> None:
    bank, _acme = _seed(conn)
    since = datetime.now(UTC) - timedelta(hours=1)
    listing = {"tenant_id": bank, "status": "failed", "job_id": None, "error": None,
               "since": since, "until": None, "before_at": None, "before_run_id": None,
               "limit": 101}
    for status, index in (("failed", "runs_tenant_status_ended"),   # one status
                          (None, "runs_tenant_status_ended"),       # all of them
                          ("running", "runs_running")):
        scans = _scans_of_runs(conn, listing | {"status": status,
                                                "statuses": listed_statuses(status)})
        assert {scan.get("Index Name") for scan in scans} >= {index}, scans
        assert not filled_seq_scans(conn, scans), scans
    # the next page (thousands of failed runs before the cursor): the index range is read
    # in its order and stops at the limit; the running part reads no run
    page = listing | {"since": None, "before_at": since, "before_run_id": "9",
                      "statuses": listed_statuses("failed")}
    scans = [scan for scan in _scans_of_runs(conn, page) if scan.get("Actual Loops")]
    assert scans and all(scan.get("Index Name") == "runs_tenant_status_ended"
                         for scan in scans), scans
    # (each day's copy of the index merged in order: one row more a day at most, read to
    # open the merge)
    assert 101 <= sum(scan["Actual Rows"] for scan in scans) <= 101 + len(scans), scans
    for tenant_id in (bank, None):
        counts = _plan(conn, Q.finished_last_hour, {"tenant_id": tenant_id})
        assert "runs_tenant_status_ended" in counts, counts
        assert not filled_seq_scans(conn, _nodes(json.loads(counts)[0]["Plan"])), counts


def test_a_list_across_statuses_reads_a_limit_per_status_not_the_history(
        conn: psycopg.Connection[Any]) -> None:
    # Without a status, one range over the tenant and a sort read its whole history (a
    # parallel seq scan of 3.7 M runs, 2.5 s, in bench/fullday.py --scale 0.1): each status
    # is now its own range, read to the limit.
    bank, _acme = _seed(conn)
    listing = {"tenant_id": bank, "status": None, "statuses": listed_statuses(None),
               "job_id": None, "error": None, "since": None, "until": None,
               "before_at": None, "before_run_id": None, "limit": 101}
    scans = _scans_of_runs(conn, listing)
    assert not filled_seq_scans(conn, scans), scans
    read = sum(scan.get("Actual Rows", 0) * scan.get("Actual Loops", 1) for scan in scans)
    assert read <= len(listed_statuses(None)) * 101, scans
    rows = conn.execute(Q.list_runs, listing).fetchall()
    newest = conn.execute(
        "SELECT run_id FROM runs WHERE tenant_id = %s ORDER BY coalesce(finished_at, due_at) "
        "DESC, run_id DESC LIMIT 101", (bank,)).fetchall()
    assert [row[0] for row in rows] == [row[0] for row in newest]


def test_the_consoles_queued_and_running_counts_use_an_index(
        conn: psycopg.Connection[Any]) -> None:
    """The console's queued and running counts of a tenant are read from an index each
    (running runs are not in runs_tenant_status_ended), never by a scan of runs."""
    bank, _acme = _seed(conn)
    plan = _plan_root(conn, Q.console_runs_by_state, {"tenant_id": bank})
    queued, running = plan["Plans"][:2]     # the parts, in the query's order
    for part in (queued, running):
        scans = _runs_scans(part)
        assert scans and not filled_seq_scans(conn, scans), part
