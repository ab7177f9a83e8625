"""The claim's, the success write's and the fenced writes' kept plans: each reads only the
rows it takes or records, whatever the statistics were when the session planned it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from crondepot.queue import (
    ClaimedRun,
    Success,
    claim_runs,
    defer_run,
    extend_acquired_leases,
    record_final_failure,
    record_replaced,
    record_retry,
    record_successes,
    release_run,
    skip_past_deadline,
)
from crondepot.queue.lease import HeldLease
from tests.support.jobs import queued_runs
from tests.support.plans import fetched, make_the_plans, reads
from tests.support.runs import run_state


def test_a_claim_never_scans_the_runs_table(conn: psycopg.Connection[Any]) -> None:
    """Regressions (worker benchmarks): a generic plan cached while runs was nearly empty
    seq-scanned it once it had grown (28 ms a claim over 40,000 runs), and the check that a
    queue nobody asked for was empty seq-scanned every run, finished ones included. The
    claim's plans are made while the table is small and used after it has grown, without an
    ANALYZE in between; every read must still be an index scan."""
    queued_runs(conn, 40)
    for _ in range(12):  # past psycopg's and PL/pgSQL's switch to kept plans
        claim_runs(conn, owner="w", shares={"urgent": 1, "normal": 1})
    queued_runs(conn, 40_000, priority="bulk")
    conn.execute("UPDATE runs SET status = 'succeeded' WHERE run_id IN "
                 "(SELECT run_id FROM runs WHERE priority = 'bulk' LIMIT 39000)")
    scans = reads("seq_scan", "idx_scan")
    with conn.transaction():
        seq_before, idx_before = conn.execute(scans).fetchone() or (0, 0)
        claimed = claim_runs(conn, owner="w", shares={"urgent": 3, "normal": 2, "bulk": 0})
        seq_after, idx_after = conn.execute(scans).fetchone() or (0, 0)
    assert len(claimed) == 5
    assert seq_after == seq_before and idx_after > idx_before


@pytest.mark.parametrize("analyzed", [False, True])
def test_recording_successes_reads_only_the_rows_it_records(
        conn: psycopg.Connection[Any], analyzed: bool) -> None:
    """Regression (worker benchmark): the batch's size is unknown to the planner (a jsonb
    array, estimated at 100 rows), and the plan is kept for the session. Joined on run_id
    alone, the plan read every queued run per batch on a small table (a bitmap scan of the
    partial indexes) and seq-scanned a large analyzed one (the server's CPU per run went from
    130 to 410 µs). The function probes the primary key for the batch's run ids only."""
    queued_runs(conn, 2_000)
    if analyzed:
        conn.execute("ANALYZE runs")
    counts = reads("seq_scan", "idx_tup_fetch")
    for _ in range(8):   # past any switch to a kept plan
        runs = claim_runs(conn, owner="w", shares={"normal": 20})
        with conn.transaction():
            seq_before, fetched_before = conn.execute(counts).fetchone() or (0, 0)
            recorded = record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt)
                                               for r in runs])
            seq_after, fetched_after = conn.execute(counts).fetchone() or (0, 0)
        assert len(runs) == 20 and recorded == {r.run_id for r in runs}
        assert seq_after == seq_before
        assert fetched_after - fetched_before == 20   # 1,880 to 2,000 before


def test_recording_successes_planned_with_one_job_reads_only_its_jobs_once_jobs_grow(
        conn: psycopg.Connection[Any]) -> None:
    """The success writer heals failing jobs (functions/record_successes.sql) with plans kept
    for the session. Planned while jobs held one row (a fresh install), the health check and
    the heal each read the whole jobs table per batch, a plan kept as an import grows it to
    millions; they probe jobs_pkey for the batch's jobs only."""
    make_the_plans(conn, analyze=("jobs",))       # jobs analyzed with its one (bulk) row
    queued_runs(conn, 3_000)
    conn.execute("UPDATE jobs SET failing_fires = 2 WHERE id % 3 = 0")    # some are failing
    runs = claim_runs(conn, owner="w", shares={"normal": 20})
    with conn.transaction():
        before = fetched(conn, "jobs")
        recorded = record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt)
                                           for r in runs])
        after = fetched(conn, "jobs")
    assert recorded == {r.run_id for r in runs}
    assert after - before <= 3 * len(runs)                 # 6,000 before
    healed = conn.execute("SELECT count(*) FROM jobs WHERE id = ANY (%s) AND failing_fires = 0",
                          ([r.job_id for r in runs],)).fetchone()
    assert healed == (len(runs),)


def test_the_claim_keeps_its_plans_instead_of_planning_every_call(
        conn: psycopg.Connection[Any]) -> None:
    """Regression (perf, worker benchmark): the plan cache chose a fresh custom plan for the
    claim's statements on every call, about 30 % of the server's CPU per run. The function
    carries its planner settings, whoever calls it."""
    row = conn.execute("SELECT proconfig FROM pg_proc WHERE proname = 'crondepot_claim_runs'"
                       ).fetchone()
    assert row is not None
    assert set(row[0]) == {"enable_seqscan=off", "enable_bitmapscan=off", "enable_mergejoin=off",
                           "enable_hashjoin=off", "enable_sort=off",
                           "enable_incremental_sort=off",
                           "plan_cache_mode=force_generic_plan"}
    queued_runs(conn, 300)     # small and never analyzed when the plans are made
    counts = reads("idx_tup_fetch")
    for _ in range(10):
        with conn.transaction():
            (before,) = conn.execute(counts).fetchone() or (0,)
            claimed = claim_runs(conn, owner="w", shares={"urgent": 6, "normal": 3, "bulk": 1})
            (after,) = conn.execute(counts).fetchone() or (0,)
        # Generic plans from the first call on: claims still come right, and read the runs
        # they claim (a scan, then the update's probe, and the lending), not the queue.
        assert len(claimed) == 10
        assert after - before <= 3 * len(claimed)


def test_a_claim_planned_while_runs_was_empty_still_reads_only_what_it_claims(
        conn: psycopg.Connection[Any]) -> None:
    """Regression (lag benchmark at 500 runs/s): plans made while runs was analyzed empty
    (a fresh install) reached the claimed runs through runs_tenant_status_ended, every run
    of the tenant, and kept doing so as the table grew: claims took longer every minute."""
    conn.execute("ANALYZE runs")                  # empty, and the planner knows it
    make_the_plans(conn)
    queued_runs(conn, 600)                        # one tenant's runs pile up
    conn.execute("UPDATE runs SET status = 'succeeded', lease_token = NULL, "
                 "lease_expires_at = NULL WHERE run_id IN (SELECT run_id FROM runs "
                 "WHERE status = 'queued' LIMIT 300)")
    for _ in range(5):
        with conn.transaction():
            before = fetched(conn)
            claimed = claim_runs(conn, owner="w", shares={"normal": 10})
            after = fetched(conn)
            record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt)
                                    for r in claimed])
            recorded = fetched(conn)
        assert len(claimed) == 10
        assert after - before <= 3 * len(claimed)
        assert recorded - after <= len(claimed)      # the record's plan: the primary key


@pytest.mark.parametrize("analyzed_with", [0, 1])
def test_a_claim_planned_on_a_tiny_table_reads_only_what_it_claims_when_one_job_piles_up(
        conn: psycopg.Connection[Any], analyzed_with: int) -> None:
    """The claim's update keeps its plan for the session (functions/claim_runs.sql,
    "Settings"). Planned on statistics of a table with no run or one (a fresh install), a
    join from the claimed ids to runs and jobs was cheapest as a full scan of runs_job; kept,
    such a plan reads every run of a job per claim once one job's runs pile up (a job due
    every second, a gateway down). The update reaches runs by the claimed ids alone, so the
    primary key is the only plan it can keep."""
    queued_runs(conn, analyzed_with)
    conn.execute("ANALYZE runs")
    conn.execute("ANALYZE jobs")
    first = make_the_plans(conn)
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at) SELECT %s || ':' || g, r.job_id, r.tenant_id, 'normal', "
                 "now(), now(), now() FROM runs AS r, generate_series(1, 600) AS g "
                 "WHERE r.run_id = %s", (first.job_id, first.run_id))
    for _ in range(5):
        with conn.transaction():
            before, jobs_before = fetched(conn), fetched(conn, "jobs")
            claimed = claim_runs(conn, owner="w", shares={"normal": 10})
            after, jobs_after = fetched(conn), fetched(conn, "jobs")
        assert len(claimed) == 10
        assert after - before <= 3 * len(claimed)
        assert jobs_after - jobs_before <= 3 * len(claimed)    # job, lease, fields: probes


def test_a_run_whose_job_was_deleted_is_left_queued_and_the_claim_takes_the_others(
        conn: psycopg.Connection[Any]) -> None:
    """runs.job_id has no foreign key: a job row deleted by hand leaves its runs. The claim
    leaves such a run queued (it has no lease time to take) and claims the others; it
    never fails on it."""
    queued_runs(conn, 3)
    orphan = conn.execute("SELECT run_id, job_id FROM runs ORDER BY run_id LIMIT 1").fetchone()
    assert orphan is not None
    conn.execute("DELETE FROM jobs WHERE id = %s", (orphan[1],))
    for _ in range(2):
        claimed = claim_runs(conn, owner="w", shares={"normal": 10})
        assert orphan[0] not in {r.run_id for r in claimed}
    assert run_state(conn, orphan[0]) == ("queued", 0, None)
    assert conn.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone() == (2,)


def test_a_claim_after_a_burst_on_stale_statistics_reads_only_what_it_takes(
        conn: psycopg.Connection[Any]) -> None:
    """Regression (bench/fullday.py at full size): runs ANALYZEd with history but no queue,
    then a burst queued for one tenant behind a rate limit, its newest run waiting on a
    retry's backoff. The planner then saw every path as one row and chose by accident: the
    take read all of the tenant's queued runs through (tenant, status) and sorted them
    (0.8 s with 336,000), the deadline-first take likewise, the ready-pair check hashed
    every ready run, and the overlap check read the queue through runs_queued: 2.0 s a claim
    of 20. With sorts priced out and the probes kept probes, each read is an index range
    in the right order, stopped by its LIMIT."""
    make_the_plans(conn)
    queued_runs(conn, 3_000, priority="bulk", tenant_name="history")
    conn.execute("UPDATE runs SET status = 'succeeded', finished_at = now() "
                 "WHERE priority = 'bulk'")
    conn.execute("ANALYZE runs")                          # the queue is empty now
    queued_runs(conn, 5_000)                              # the burst, not analyzed
    conn.execute("UPDATE runs SET rate_limit = 'sms', deadline_at = due_at + interval '1 h' "
                 "WHERE status = 'queued'")
    conn.execute("UPDATE runs SET available_at = now() + interval '1 min' WHERE run_id = "
                 "(SELECT max(run_id) FROM runs WHERE status = 'queued')")   # a retry waits
    for _ in range(3):
        with conn.transaction():
            before = fetched(conn)
            claimed = claim_runs(conn, owner="w", shares={"normal": 20})
            read = fetched(conn) - before
        assert len(claimed) == 20
        assert read < 200, f"{read} rows of runs read for a claim of 20"


_OPENING = datetime(2030, 1, 1, tzinfo=UTC)
FENCED_WRITES: dict[str, Callable[[psycopg.Connection[Any], ClaimedRun], object]] = {
    "release": lambda conn, run: release_run(conn, run.run_id, run.lease_token),
    "defer": lambda conn, run: defer_run(conn, run.run_id, run.lease_token, _OPENING),
    "retry": lambda conn, run: record_retry(conn, run.run_id, run.lease_token, error="503",
                                            error_class="HTTPStatus", delay=5),
    "failure": lambda conn, run: record_final_failure(
        conn, run.run_id, run.lease_token, status="failed", error="400",
        error_class="HTTPStatus"),
    "replaced": lambda conn, run: record_replaced(conn, run.run_id, run.lease_token,
                                                  error="replaced"),
    "past deadline": lambda conn, run: skip_past_deadline(conn, run.run_id, run.lease_token),
    "heartbeat": lambda conn, run: extend_acquired_leases(
        conn, [HeldLease(run.run_id, run.lease_token, 60)]),
}


@pytest.mark.parametrize("write", sorted(FENCED_WRITES))
def test_a_fenced_write_reads_its_own_run_when_many_are_running(
        conn: psycopg.Connection[Any], write: str) -> None:
    """Found measuring partitions (bench/claim_partitions.py): a fenced write finds its run
    by run id, lease token and `status = 'running'`. Planned generically on statistics taken
    while nothing was running (a quiet night), the partial index runs_running looked as
    cheap as the primary key: the write read every running run and kept the one (1.8 ms with
    6,000 running, after a mass crash of workers or a burst behind a slow gateway). Each
    write reads its own run, once or twice, however many run."""
    queued_runs(conn, 2_000)
    conn.execute("ANALYZE runs")                           # nothing is running
    conn.execute("SET plan_cache_mode = force_generic_plan")   # the plan a session keeps
    running: list[ClaimedRun] = []
    while len(running) < 1_500:
        running += claim_runs(conn, owner="w", shares={"normal": 100})
    for run in running[:8]:
        with conn.transaction():
            before = fetched(conn)
            FENCED_WRITES[write](conn, run)
            after = fetched(conn)
        assert after - before <= 2, f"{write} read {after - before} runs for one"
