"""Claims, leases and fenced outcomes against a real database."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from crondepot.db import connect
from crondepot.queue import (
    ClaimedRun,
    LostLease,
    Success,
    WeightedOrder,
    claim_runs,
    extend_acquired_leases,
    reap_abandoned_runs,
    record_retry,
    record_success,
    record_successes,
    release_run,
)
from crondepot.queue.lease import HeldLease
from crondepot.runs.deadletter import DeadFilter, replay
from crondepot.scheduler.tick import tick
from crondepot.worker.loop import _configure_connection
from tests.support.jobs import bulk_due_jobs, queued_runs


def _status(conn: psycopg.Connection[Any], run_id: str) -> tuple[Any, ...]:
    row = conn.execute("SELECT status, attempt, lease_owner FROM runs WHERE run_id = %s",
                       (run_id,)).fetchone()
    assert row is not None
    return tuple(row)


def test_weighted_order_is_6_3_1_and_interleaved() -> None:
    order = WeightedOrder((6, 3, 1))
    assert order.take(10) == {"urgent": 6, "normal": 3, "bulk": 1}
    assert order.take(100) == {"urgent": 60, "normal": 30, "bulk": 10}
    sequence = [order.next() for _ in range(10)]
    assert sequence[:3] != ["urgent"] * 3 or sequence.index("normal") < 6


def test_weighted_order_rejects_bad_weights() -> None:
    with pytest.raises(ValueError, match="three non-negative"):
        WeightedOrder((0, 0, 0))


def test_claim_leases_each_run_to_one_worker(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 5)
    first = claim_runs(conn, owner="w1", shares={"normal": 3})
    second = claim_runs(conn, owner="w2", shares={"normal": 10})
    assert len(first) == 3 and len(second) == 2
    assert not {r.run_id for r in first} & {r.run_id for r in second}
    run = first[0]
    assert run.attempt == 1 and run.lease_expires_at - run.db_now == timedelta(seconds=60)
    assert _status(conn, run.run_id) == ("running", 1, "w1")


def test_an_empty_queue_lends_its_share(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 10, priority="bulk")
    claimed = claim_runs(conn, owner="w", shares={"urgent": 6, "normal": 3, "bulk": 1})
    assert len(claimed) == 10 and {r.priority for r in claimed} == {"bulk"}
    queued_runs(conn, 3, priority="normal")
    alone = claim_runs(conn, owner="w", shares={"urgent": 3}, lend=False)
    assert alone == []


def test_a_lent_turn_passes_over_an_empty_borrower(conn: psycopg.Connection[Any]) -> None:
    # Regression: a one-slot claim whose turn fell to bulk lent it to urgent (empty) and
    # stopped there, so a worker with normal runs ready claimed nothing and slept a poll.
    queued_runs(conn, 3, priority="normal")
    (run,) = claim_runs(conn, owner="w", shares={"bulk": 1})
    assert run.priority == "normal"
    # Urgent's spare goes to normal while normal has ready runs, the rest to bulk; a claim
    # never takes more than it asked for.
    queued_runs(conn, 5, priority="bulk")
    claimed = claim_runs(conn, owner="w", shares={"urgent": 3})
    assert sorted(r.priority for r in claimed) == ["bulk", "normal", "normal"]
    claimed = claim_runs(conn, owner="w", shares={"urgent": 2, "normal": 1})
    assert sorted(r.priority for r in claimed) == ["bulk", "bulk", "bulk"]


def test_two_queues_lending_to_the_same_one_are_both_served(
        conn: psycopg.Connection[Any]) -> None:
    # Urgent's and bulk's spare turns both go to normal (taken in one scan); a claim takes
    # exactly what it asked for and leaves the rest queued.
    queued_runs(conn, 10, priority="normal")
    claimed = claim_runs(conn, owner="w", shares={"urgent": 3, "normal": 1, "bulk": 2})
    assert len(claimed) == 6 and {r.priority for r in claimed} == {"normal"}
    assert len({r.run_id for r in claimed}) == 6
    left = conn.execute("SELECT count(*) FROM runs WHERE status = 'queued'").fetchone()
    assert left == (4,)


def test_the_workers_connections_deliver_payloads_exactly_and_instants_in_utc(
        conn: psycopg.Connection[Any]) -> None:
    # The worker's pool reads jsonb with orjson where that is exact (worker/loop.py): a
    # 30-digit account number must not become a float on the way to the handler.
    queued_runs(conn, 1, payload='{"account": 123456789012345678901234567890, "x": 1.5, '
                                 '"name": "Zoë", "n": 1e400}')
    conn.execute("SET TimeZone = 'Asia/Kolkata'")
    due = conn.execute("SELECT due_at FROM runs").fetchone()
    _configure_connection(conn)
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    assert run.payload == {"account": 123456789012345678901234567890, "x": 1.5,
                           "name": "Zoë", "n": 10**400}   # jsonb keeps numerics exact
    assert isinstance(run.payload["account"], int)
    # Timestamps come in UTC (the fast path), the same instants as in the session's zone.
    assert due is not None and run.due_at == due[0]
    assert run.due_at.tzinfo is UTC and run.db_now.tzinfo is UTC


def test_urgent_only_turns_take_urgent_runs_and_are_never_lent(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 4, priority="normal")
    assert claim_runs(conn, owner="w", shares={}, urgent_only=3) == []
    queued_runs(conn, 2, priority="urgent")
    claimed = claim_runs(conn, owner="w", shares={"normal": 2}, urgent_only=3)
    assert sorted(r.priority for r in claimed) == ["normal", "normal", "urgent", "urgent"]


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
    scans = "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'runs'"
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
    reads = ("SELECT seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables "
             "WHERE relname = 'runs'")
    for _ in range(8):   # past any switch to a kept plan
        runs = claim_runs(conn, owner="w", shares={"normal": 20})
        with conn.transaction():
            seq_before, fetched_before = conn.execute(reads).fetchone() or (0, 0)
            recorded = record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt)
                                               for r in runs])
            seq_after, fetched_after = conn.execute(reads).fetchone() or (0, 0)
        assert len(runs) == 20 and recorded == {r.run_id for r in runs}
        assert seq_after == seq_before
        assert fetched_after - fetched_before == 20   # 1,880 to 2,000 before


def test_recording_successes_planned_with_one_job_reads_only_its_jobs_once_jobs_grow(
        conn: psycopg.Connection[Any]) -> None:
    """The success writer heals failing jobs (functions/record_successes.sql) with plans kept
    for the session. Planned while jobs held one row (a fresh install), the health check and
    the heal each read the whole jobs table per batch, a plan kept as an import grows it to
    millions; they probe jobs_pkey for the batch's jobs only."""
    _make_the_plans(conn, analyze=("jobs",))       # jobs analyzed with its one (bulk) row
    queued_runs(conn, 3_000)
    conn.execute("UPDATE jobs SET failing_fires = 2 WHERE id % 3 = 0")    # some are failing
    runs = claim_runs(conn, owner="w", shares={"normal": 20})
    with conn.transaction():
        before = _fetched(conn, "jobs")
        recorded = record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt)
                                           for r in runs])
        after = _fetched(conn, "jobs")
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
                           "enable_hashjoin=off",
                           "plan_cache_mode=force_generic_plan"}
    queued_runs(conn, 300)     # small and never analyzed when the plans are made
    reads = "SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'runs'"
    for _ in range(10):
        with conn.transaction():
            (before,) = conn.execute(reads).fetchone() or (0,)
            claimed = claim_runs(conn, owner="w", shares={"urgent": 6, "normal": 3, "bulk": 1})
            (after,) = conn.execute(reads).fetchone() or (0,)
        # Generic plans from the first call on: claims still come right, and read the runs
        # they claim (a scan, then the update's probe, and the lending), not the queue.
        assert len(claimed) == 10
        assert after - before <= 3 * len(claimed)


def _fetched(conn: psycopg.Connection[Any], table: str = "runs") -> int:
    """Live rows of ``table`` fetched by index scans in this transaction so far (a row an
    index scan reads and filters out counts; dead entries passed over do not)."""
    row = conn.execute("SELECT idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = %s",
                       (table,)).fetchone()
    return int(row[0]) if row else 0


def _make_the_plans(conn: psycopg.Connection[Any], analyze: Sequence[str] = ()) -> ClaimedRun:
    """Claim and record one (bulk) run: the session's claim and record plans are made now,
    on the statistics of the moment (with ``analyze``'s tables analyzed once that run is
    queued). Autovacuum is off for runs and jobs, so that no ANALYZE in the middle of a test
    makes the functions plan again."""
    for table in ("runs", "jobs"):
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    queued_runs(conn, 1, priority="bulk")
    for table in analyze:
        conn.execute(f"ANALYZE {table}")
    (first,) = claim_runs(conn, owner="w", shares={"bulk": 1})
    assert record_successes(conn, [Success(first.run_id, first.lease_token, first.attempt)])
    return first


def test_a_claim_planned_while_runs_was_empty_still_reads_only_what_it_claims(
        conn: psycopg.Connection[Any]) -> None:
    """Regression (lag benchmark at 500 runs/s): plans made while runs was analyzed empty
    (a fresh install) reached the claimed runs through runs_tenant_status_ended, every run
    of the tenant, and kept doing so as the table grew: claims took longer every minute."""
    conn.execute("ANALYZE runs")                  # empty, and the planner knows it
    _make_the_plans(conn)
    queued_runs(conn, 600)                        # one tenant's runs pile up
    conn.execute("UPDATE runs SET status = 'succeeded', lease_token = NULL, "
                 "lease_expires_at = NULL WHERE run_id IN (SELECT run_id FROM runs "
                 "WHERE status = 'queued' LIMIT 300)")
    for _ in range(5):
        with conn.transaction():
            before = _fetched(conn)
            claimed = claim_runs(conn, owner="w", shares={"normal": 10})
            after = _fetched(conn)
            record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt)
                                    for r in claimed])
            recorded = _fetched(conn)
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
    first = _make_the_plans(conn)
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at) SELECT %s || ':' || g, r.job_id, r.tenant_id, 'normal', "
                 "now(), now(), now() FROM runs AS r, generate_series(1, 600) AS g "
                 "WHERE r.run_id = %s", (first.job_id, first.run_id))
    for _ in range(5):
        with conn.transaction():
            before, jobs_before = _fetched(conn), _fetched(conn, "jobs")
            claimed = claim_runs(conn, owner="w", shares={"normal": 10})
            after, jobs_after = _fetched(conn), _fetched(conn, "jobs")
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
    assert _status(conn, orphan[0]) == ("queued", 0, None)
    assert conn.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone() == (2,)



def test_outcome_with_a_stale_token_is_refused_and_changes_nothing(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, lease_seconds=5)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    later = run.db_now + timedelta(seconds=6)
    assert reap_abandoned_runs(conn, now=later) == {"queued": 1, "dead": 0}
    (again,) = claim_runs(conn, owner="w2", shares={"normal": 1}, now=later)
    assert again.run_id == run.run_id and again.attempt == 2
    with pytest.raises(LostLease):
        record_success(conn, run.run_id, run.lease_token, run.attempt)   # first holder, late
    assert _status(conn, run.run_id) == ("running", 2, "w2")
    record_success(conn, again.run_id, again.lease_token, again.attempt)
    assert _status(conn, run.run_id)[0] == "succeeded"


def test_lease_is_not_reaped_at_its_expiry_instant_only_after(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, lease_seconds=30)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    assert reap_abandoned_runs(conn, now=run.lease_expires_at) == {"queued": 0, "dead": 0}
    past = run.lease_expires_at + timedelta(seconds=1)
    assert reap_abandoned_runs(conn, now=past) == {"queued": 1, "dead": 0}


def test_reaping_the_last_attempt_dead_letters_it(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, lease_seconds=5, max_attempts=1)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    assert reap_abandoned_runs(conn, now=run.lease_expires_at + timedelta(seconds=1)) == {
        "queued": 0, "dead": 1}


def test_heartbeat_extends_only_leases_still_held(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 2, lease_seconds=10)
    a, b = claim_runs(conn, owner="w1", shares={"normal": 2})
    held = [HeldLease(a.run_id, a.lease_token, 10), HeldLease(b.run_id, uuid4(), 10)]
    renewed = extend_acquired_leases(conn, held, now=a.db_now + timedelta(seconds=5))
    assert set(renewed) == {a.run_id}
    expires = conn.execute("SELECT lease_expires_at FROM runs WHERE run_id = %s",
                           (a.run_id,)).fetchone()
    assert expires == (a.db_now + timedelta(seconds=15),)


def test_heartbeat_is_capped_by_the_maximum_lease(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, lease_seconds=60)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    extend_acquired_leases(conn, [HeldLease(run.run_id, run.lease_token, 60)],
                           max_lease_seconds=90, now=run.db_now + timedelta(seconds=50))
    (expires,) = conn.execute("SELECT lease_expires_at FROM runs").fetchone()  # type: ignore[misc]
    assert expires == run.db_now + timedelta(seconds=90)


def _lease_used(conn: psycopg.Connection[Any], run_id: str) -> timedelta:
    row = conn.execute("SELECT lease_used FROM runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    used: timedelta = row[0]
    return used


def test_the_lease_cap_counts_every_attempt_of_a_run(conn: psycopg.Connection[Any]) -> None:
    """12 h in all, not 12 h per attempt: a run whose calls keep hanging must not hold leases
    for max_attempts times the cap."""
    queued_runs(conn, 1, lease_seconds=60)
    (first,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    # The first attempt held its lease for 50 s, then failed for a retry.
    conn.execute("UPDATE runs SET started_at = started_at - interval '50 seconds'")
    record_retry(conn, first.run_id, first.lease_token, delay=0, error="503",
                 error_class="TemporaryError")
    assert timedelta(seconds=50) <= _lease_used(conn, first.run_id) < timedelta(seconds=55)
    conn.execute("UPDATE runs SET lease_used = interval '50 seconds'")   # exact, for below

    (second,) = claim_runs(conn, owner="w2", shares={"normal": 1})
    renewed = extend_acquired_leases(conn, [HeldLease(second.run_id, second.lease_token, 60)],
                                     max_lease_seconds=90,
                                     now=second.db_now + timedelta(seconds=30))
    assert second.run_id in renewed
    (expires,) = conn.execute("SELECT lease_expires_at FROM runs").fetchone()  # type: ignore[misc]
    assert expires == second.db_now + timedelta(seconds=40)     # 90 - 50 left, not 30 + 60

    # Past it, the reaper sends the run to the dead letter though attempts are left.
    assert reap_abandoned_runs(conn, max_lease_seconds=90,
                               now=second.db_now + timedelta(seconds=41)) == {
        "queued": 0, "dead": 1}
    row = conn.execute("SELECT status, attempt, error_class, last_error, lease_used "
                       "FROM runs").fetchone()
    assert row is not None
    status, attempt, error_class, last_error, used = row
    assert (status, attempt, error_class) == ("dead", 2, "LeaseCapReached")
    assert used == timedelta(seconds=90)
    assert last_error.startswith("lease time cap reached: leased 00:01:30 in all")

    # A replay gives the run a fresh budget of attempts and of lease time.
    replayed = replay(conn, DeadFilter(run_ids=[second.run_id])).replayed
    assert [r.run_id for r in replayed] == [second.run_id]
    assert _lease_used(conn, second.run_id) == timedelta(0)
    assert _status(conn, second.run_id)[:2] == ("queued", 0)


def test_a_retry_past_the_lease_cap_dead_letters_the_run(
        conn: psycopg.Connection[Any]) -> None:
    """A queued run always has lease time left: a temporary failure that ends the run's last
    second of lease sends it to the dead letter, as the reaper would."""
    queued_runs(conn, 2, lease_seconds=60)
    run, other = claim_runs(conn, owner="w1", shares={"normal": 2})
    conn.execute("UPDATE runs SET lease_used = interval '80 seconds', "
                 "started_at = started_at - interval '15 seconds' WHERE run_id = %s",
                 (run.run_id,))
    record_retry(conn, run.run_id, run.lease_token, delay=5, error="HTTP 503",
                 error_class="TemporaryError", max_lease_seconds=90)
    row = conn.execute("SELECT status, error_class, last_error, finished_at IS NOT NULL, "
                       "lease_token FROM runs WHERE run_id = %s", (run.run_id,)).fetchone()
    assert row is not None
    status, error_class, last_error, finished, token = row
    assert (status, error_class, finished, token) == ("dead", "LeaseCapReached", True, None)
    assert last_error.startswith("lease time cap reached: leased 00:01:35 in all")
    assert last_error.endswith("last error: HTTP 503")
    # With time left, the same failure queues the run again.
    record_retry(conn, other.run_id, other.lease_token, delay=5, error="HTTP 503",
                 error_class="TemporaryError", max_lease_seconds=90)
    assert _status(conn, other.run_id) == ("queued", 1, None)


def test_an_expired_lease_with_time_left_counts_and_requeues(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, lease_seconds=60)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    assert reap_abandoned_runs(conn, max_lease_seconds=90,
                               now=run.db_now + timedelta(seconds=61)) == {
        "queued": 1, "dead": 0}
    assert _lease_used(conn, run.run_id) == timedelta(seconds=60)
    assert _status(conn, run.run_id) == ("queued", 1, None)
    # A run released at shutdown made no call: its lease time is not counted.
    (again,) = claim_runs(conn, owner="w1", shares={"normal": 1},
                          now=run.db_now + timedelta(seconds=62))
    release_run(conn, again.run_id, again.lease_token)
    assert _lease_used(conn, run.run_id) == timedelta(seconds=60)


def test_retry_returns_the_run_to_the_queue_later(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    record_retry(conn, run.run_id, run.lease_token, delay=30, error="503", error_class="T")
    assert claim_runs(conn, owner="w1", shares={"normal": 1}) == []
    (again,) = claim_runs(conn, owner="w1", shares={"normal": 1},
                          now=run.db_now + timedelta(seconds=31))
    assert again.attempt == 2


def test_release_gives_the_attempt_back(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    release_run(conn, run.run_id, run.lease_token)
    assert _status(conn, run.run_id) == ("queued", 0, None)


def test_worker_cannot_take_a_run_before_the_scheduler_commits(db_url: str) -> None:
    """The source document's race: on this backend a worker never sees an uncommitted run,
    and once the tick commits the claim and the recorded outcome go through."""
    with connect(db_url) as scheduler, connect(db_url) as worker:
        bulk_due_jobs(scheduler, 1, due_in_seconds=-1)
        # The tick inside an outer transaction: its runs are written but not committed,
        # as when a scheduler's commit is slow.
        with scheduler.transaction():
            result = tick(scheduler, batch=10)
            assert result.inserted == 1
            assert claim_runs(worker, owner="fast", shares={"normal": 1}) == []
        (run,) = claim_runs(worker, owner="fast", shares={"normal": 1})
        record_success(worker, run.run_id, run.lease_token, run.attempt)
        assert _status(worker, run.run_id)[0] == "succeeded"


def test_a_late_success_is_recorded_if_nobody_took_the_run_over(
        conn: psycopg.Connection[Any]) -> None:
    """Lease expired and reaped, but not yet claimed again: the call happened, record it,
    so no second worker calls the target."""
    queued_runs(conn, 1, lease_seconds=5)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    reap_abandoned_runs(conn, now=run.db_now + timedelta(seconds=6))
    record_success(conn, run.run_id, run.lease_token, run.attempt)
    assert _status(conn, run.run_id) == ("succeeded", 1, None)
    assert claim_runs(conn, owner="w2", shares={"normal": 1}) == []     # nothing to repeat
