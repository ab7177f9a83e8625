"""Leases: fenced by their token, reaped only after expiry, extended by heartbeats up to
the cap that counts every attempt."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest

from crondepot.queue import (
    LostLease,
    claim_runs,
    extend_acquired_leases,
    reap_abandoned_runs,
    record_retry,
    record_success,
    release_run,
)
from crondepot.queue.lease import HeldLease
from crondepot.runs.deadletter import DeadFilter, replay
from tests.support.jobs import queued_runs
from tests.support.runs import run_state


def _lease_used(conn: psycopg.Connection[Any], run_id: str) -> timedelta:
    row = conn.execute("SELECT lease_used FROM runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    used: timedelta = row[0]
    return used


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
    assert run_state(conn, run.run_id) == ("running", 2, "w2")
    record_success(conn, again.run_id, again.lease_token, again.attempt)
    assert run_state(conn, run.run_id)[0] == "succeeded"


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
    assert run_state(conn, second.run_id)[:2] == ("queued", 0)


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
    assert run_state(conn, other.run_id) == ("queued", 1, None)


def test_an_expired_lease_with_time_left_counts_and_requeues(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, lease_seconds=60)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    assert reap_abandoned_runs(conn, max_lease_seconds=90,
                               now=run.db_now + timedelta(seconds=61)) == {
        "queued": 1, "dead": 0}
    assert _lease_used(conn, run.run_id) == timedelta(seconds=60)
    assert run_state(conn, run.run_id) == ("queued", 1, None)
    # A run released at shutdown made no call: its lease time is not counted.
    (again,) = claim_runs(conn, owner="w1", shares={"normal": 1},
                          now=run.db_now + timedelta(seconds=62))
    release_run(conn, again.run_id, again.lease_token)
    assert _lease_used(conn, run.run_id) == timedelta(seconds=60)
