"""The worker's writes to the database: successes recorded together and fenced, and no
write (a success, a failure, a rate-limit token) lost to a database that is briefly away."""

from __future__ import annotations

import threading
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from prometheus_client import REGISTRY
from psycopg_pool import ConnectionPool

from crondepot.db import connect, migrate
from crondepot.queue import Success, claim_runs, record_successes
from crondepot.worker.outcome_writer import NotRecorded, OutcomeWriter
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.processes import wait_until
from tests.support.jobs import queued_runs


class Outcomes:
    """What each submitted success was told: (recorded, error)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.told: dict[str, tuple[bool, BaseException | None]] = {}

    def callback(self, run_id: str) -> Any:
        def done(recorded: bool, error: BaseException | None) -> None:
            with self.lock:
                assert run_id not in self.told, "told twice"
                self.told[run_id] = (recorded, error)
        return done

    def count(self) -> int:
        with self.lock:
            return len(self.told)


def _batches() -> float:
    return REGISTRY.get_sample_value("crondepot_worker_outcome_batch_size_count") or 0.0


def _pool(url: str) -> ConnectionPool:
    return ConnectionPool(url, min_size=1, max_size=2, kwargs={"autocommit": True},
                          open=True)


def test_successes_are_recorded_together_and_a_lost_lease_is_reported(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    queued_runs(conn, 30)
    runs = claim_runs(conn, owner="w", shares={"normal": 30})
    stolen = runs[-1]      # taken over by another worker since: its token changed
    conn.execute("UPDATE runs SET lease_token = %s WHERE run_id = %s", (uuid4(), stolen.run_id))
    outcomes = Outcomes()
    with _pool(db_url) as pool:
        writer = OutcomeWriter(pool)
        writer.start()
        before = _batches()
        # Hold the first run's row so the first write waits; every success submitted
        # meanwhile must go out in one statement after it.
        with connect(db_url) as blocker, blocker.transaction():
            blocker.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE",
                            (runs[0].run_id,))
            first = runs[0]
            writer.submit(Success(first.run_id, first.lease_token, first.attempt),
                          outcomes.callback(first.run_id))
            threads = [threading.Thread(target=writer.submit, args=(
                Success(r.run_id, r.lease_token, r.attempt, {"n": i}),
                outcomes.callback(r.run_id))) for i, r in enumerate(runs[1:])]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert outcomes.count() == 0
        wait_until(lambda: outcomes.count() == 30, timeout=10, message="all told")
        writer.close()
    assert _batches() - before == 2
    assert outcomes.told[stolen.run_id] == (False, None)
    assert all(told == (True, None) for run_id, told in outcomes.told.items()
               if run_id != stolen.run_id)
    rows = dict(conn.execute("SELECT status, count(*) FROM runs GROUP BY status").fetchall())
    assert rows == {"succeeded": 29, "running": 1}
    assert conn.execute("SELECT result FROM runs WHERE run_id = %s",
                        (runs[1].run_id,)).fetchone() == ({"n": 0},)


def test_a_result_postgresql_cannot_store_does_not_fail_the_others_in_its_batch(
        conn: psycopg.Connection[Any]) -> None:
    """A handler may return anything. Before, one result the driver or the server refused
    failed the whole statement: every success in the batch went unrecorded and each run
    would have been called again after its lease."""
    queued_runs(conn, 5)
    runs = claim_runs(conn, owner="w", shares={"normal": 5})
    results: list[dict[str, Any] | None] = [
        {"ok": 1}, {"when": {1, 2}}, {"text": "a\x00b"}, {"big": 2**70, "nan": float("nan")},
        {"path": "C:\\u0000"}]   # a backslash, then "u0000": text, not a NUL
    recorded = record_successes(conn, [Success(r.run_id, r.lease_token, r.attempt, result)
                                       for r, result in zip(runs, results, strict=True)])
    assert recorded == {r.run_id for r in runs}
    stored = dict(conn.execute("SELECT run_id, result FROM runs").fetchall())
    assert stored[runs[0].run_id] == {"ok": 1}
    assert stored[runs[4].run_id] == {"path": "C:\\u0000"}
    for run in runs[1:4]:
        assert set(stored[run.run_id]) == {"unrecorded_result"}
        assert stored[run.run_id]["unrecorded_result"].startswith("not storable as JSON")


def test_a_count_that_raises_neither_stops_the_writer_nor_loses_a_success(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    """Review finding: the call's metrics are counted by the writer's thread; an error there
    must not end the thread (later successes would wait in hand for ever)."""
    queued_runs(conn, 3)
    runs = claim_runs(conn, owner="w", shares={"normal": 3})
    outcomes = Outcomes()
    counted: list[str] = []

    def broken() -> None:
        raise RuntimeError("a metric failed")

    with _pool(db_url) as pool:
        writer = OutcomeWriter(pool)
        writer.start()
        for i, run in enumerate(runs):
            writer.submit(Success(run.run_id, run.lease_token, run.attempt),
                          outcomes.callback(run.run_id),
                          count=broken if i == 0 else (lambda r=run: counted.append(r.run_id)))
        wait_until(lambda: outcomes.count() == 3, timeout=10, message="three told")
        writer.close()
    assert all(recorded for recorded, _ in outcomes.told.values())
    assert sorted(counted) == sorted(r.run_id for r in runs[1:])


def test_a_success_submitted_as_the_writer_closes_is_told_once(db_url: str) -> None:
    """Review finding: a slot that saw the writer open just before close() began put its
    success after close() had taken what was left; it was never told."""
    outcomes = Outcomes()
    with _pool(db_url) as pool:
        writer = OutcomeWriter(pool)
        writer.start()
        writer.close()
        writer._closing = False        # the slot read the flag before close() set it
        writer.submit(Success("1:1", uuid4(), 1), outcomes.callback("1:1"))
    recorded, error = outcomes.told["1:1"]
    assert not recorded and isinstance(error, NotRecorded)


def test_a_writer_that_cannot_reach_the_database_gives_up_only_when_closed(
        db_url: str, conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1)
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    outcomes = Outcomes()
    # A pool on a port nobody listens on: every write fails with OperationalError.
    pool = ConnectionPool("postgresql://postgres@127.0.0.1:9/none", min_size=0, max_size=1,
                          timeout=0.2, open=True)
    try:
        writer = OutcomeWriter(pool)
        writer.start()
        writer.submit(Success(run.run_id, run.lease_token, run.attempt),
                      outcomes.callback(run.run_id))
        threading.Event().wait(1.0)
        assert outcomes.count() == 0           # still trying, not forgotten
        writer.close(timeout=0.5)
    finally:
        pool.close()
    recorded, error = outcomes.told[run.run_id]
    assert not recorded and isinstance(error, NotRecorded)
    # Nothing written: the run comes back after its lease, like any interrupted run.
    assert conn.execute("SELECT status FROM runs").fetchone() == ("running",)


@pytest.mark.slow
def test_a_success_is_written_once_the_database_is_back(cluster: PrivateCluster) -> None:
    with connect(cluster.url) as conn:
        migrate(conn)
        queued_runs(conn, 1)
        (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    outcomes = Outcomes()
    with _pool(cluster.url) as pool:
        writer = OutcomeWriter(pool)
        writer.start()
        cluster.stop("immediate")
        writer.submit(Success(run.run_id, run.lease_token, run.attempt),
                      outcomes.callback(run.run_id))
        threading.Event().wait(1.5)
        assert outcomes.count() == 0
        cluster.start()
        wait_until(lambda: outcomes.count() == 1, timeout=60, message="recorded")
        writer.close()
    assert outcomes.told[run.run_id] == (True, None)
    with connect(cluster.url) as conn:
        assert conn.execute("SELECT status FROM runs").fetchone() == ("succeeded",)


def test_a_failure_write_outlives_a_dead_pooled_connection(
        conn: psycopg.Connection[Any], db_url: str) -> None:
    """A restart leaves dead connections in the pool; a "dead, outcome unknown" write that
    met one was lost, and the run came back after its lease for a second call."""
    from crondepot.job.guard import AddressGuard
    from crondepot.limits.buckets import RateLimiter
    from crondepot.queue import record_final_failure
    from crondepot.worker.execute import Executor
    from crondepot.worker.targets import WebhookTarget

    queued_runs(conn, 1)
    (run,) = claim_runs(conn, owner="w", shares={"normal": 1})
    with ConnectionPool(db_url, min_size=1, max_size=1, open=True,
                        kwargs={"autocommit": True, "application_name": "doomed"}) as pool:
        pool.wait()
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                     "WHERE application_name = 'doomed'")
        webhooks = WebhookTarget(AddressGuard.from_env())
        executor = Executor(pool, OutcomeWriter(pool), RateLimiter(pool), webhooks,
                            stopping=lambda: False)
        executor._record(run, lambda c: record_final_failure(
            c, run.run_id, run.lease_token, status="dead", error="outcome unknown",
            error_class="OutcomeUnknown"), "dead")
        webhooks.close()
    assert conn.execute("SELECT status, error_class FROM runs").fetchone() == (
        "dead", "OutcomeUnknown")


def test_a_rate_limit_token_outlives_a_dead_pooled_connection(db_url: str) -> None:
    """Regression (chaos run): after a database restart a slot waiting for a token met a
    dead pooled connection, and the run was dropped until its lease expired."""
    from crondepot.limits.buckets import RateLimiter, set_limit

    with connect(db_url) as conn:
        set_limit(conn, "sms-gateway", 100, 10)
    with ConnectionPool(db_url, min_size=1, max_size=1, open=True,
                        kwargs={"autocommit": True, "application_name": "doomed"}) as pool:
        pool.wait()
        with connect(db_url) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE application_name = 'doomed'")
        taken = RateLimiter(pool).acquire("sms-gateway", give_up=lambda: False)
    assert taken is not None
