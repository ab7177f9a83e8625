"""The claim: weighted priorities, lending, one lease per run, what a worker's connection
reads, and nothing before the tick commits."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.queue import (
    WeightedOrder,
    claim_runs,
    record_success,
)
from crondepot.scheduler.tick import tick
from crondepot.worker.loop import _configure_connection
from tests.support.jobs import bulk_due_jobs, queued_runs
from tests.support.runs import run_state


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
    assert run_state(conn, run.run_id) == ("running", 1, "w1")


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
        assert run_state(worker, run.run_id)[0] == "succeeded"


def test_a_claim_on_the_one_tenant_path_skips_runs_another_claim_holds(db_url: str) -> None:
    """One tenant with runs ready (the single-tenant take, functions/claim_one_tenant.sql):
    a claim whose transaction is still open holds its runs locked, and a second worker's
    claim takes the others at once instead of waiting for that commit.

    Kills the mutant ``FOR UPDATE SKIP LOCKED`` → ``FOR UPDATE`` in claim_one_tenant.sql:
    the second claim then waits on the first one's row locks, and its lock_timeout fails it
    (LockNotAvailable) in two seconds instead of hanging the test."""
    with connect(db_url) as setup:
        queued_runs(setup, 6)
    with psycopg.connect(db_url) as one, connect(db_url) as two:
        first = claim_runs(one, owner="w1", shares={"normal": 2})      # not committed yet
        assert len(first) == 2
        two.execute("SET lock_timeout = '2s'")
        second = claim_runs(two, owner="w2", shares={"normal": 10})
        one.commit()
    assert len(second) == 4
    assert not {r.run_id for r in first} & {r.run_id for r in second}
