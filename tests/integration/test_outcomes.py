"""Fenced outcomes of a claimed run: a retry, a release, a late success."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from crondepot.queue import (
    Success,
    claim_runs,
    reap_abandoned_runs,
    record_retry,
    record_success,
    record_successes,
    release_run,
)
from tests.support.jobs import queued_runs
from tests.support.runs import run_state


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
    assert run_state(conn, run.run_id) == ("queued", 0, None)


def test_a_late_success_is_recorded_if_nobody_took_the_run_over(
        conn: psycopg.Connection[Any]) -> None:
    """Lease expired and reaped, but not yet claimed again: the call happened, record it,
    so no second worker calls the target."""
    queued_runs(conn, 1, lease_seconds=5)
    (run,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    reap_abandoned_runs(conn, now=run.db_now + timedelta(seconds=6))
    record_success(conn, run.run_id, run.lease_token, run.attempt)
    assert run_state(conn, run.run_id) == ("succeeded", 1, None)
    assert claim_runs(conn, owner="w2", shares={"normal": 1}) == []     # nothing to repeat


def test_a_stale_success_does_not_override_a_later_attempts_queued_retry(
        conn: psycopg.Connection[Any]) -> None:
    """Attempt 1's lease expired and was reaped, attempt 2 was claimed and failed back to
    the queue for a retry. Attempt 1's success arriving now (its token, attempt 1) finds the
    run queued with no token, as in the accepted late-success case above, but the attempt
    has moved on: nothing is recorded and the retry stays queued.

    Kills the mutant that drops ``AND r.attempt = s.attempt`` from the queued branch of
    functions/record_successes.sql (the stale success would then mark the run succeeded)."""
    queued_runs(conn, 1, lease_seconds=5)
    (first,) = claim_runs(conn, owner="w1", shares={"normal": 1})
    reap_abandoned_runs(conn, now=first.db_now + timedelta(seconds=6))
    (second,) = claim_runs(conn, owner="w2", shares={"normal": 1},
                           now=first.db_now + timedelta(seconds=60))
    assert second.attempt == 2
    assert record_retry(conn, second.run_id, second.lease_token, delay=30, error="503",
                        error_class="T") == "queued"
    stale = Success(first.run_id, first.lease_token, first.attempt)
    assert record_successes(conn, [stale]) == set()
    assert run_state(conn, first.run_id) == ("queued", 2, None)
