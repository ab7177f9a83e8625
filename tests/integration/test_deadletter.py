"""The dead letter: listing with filters, replay with the same run id, dry runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg

from crondepot.deadletter import DeadFilter, list_dead, replay
from crondepot.queue import claim_runs, record_final_failure
from tests.support.jobs import queued_runs


def _kill(conn: psycopg.Connection[Any], count: int, error_class: str) -> list[str]:
    ids = []
    for run in claim_runs(conn, owner="w", shares={"normal": count}):
        record_final_failure(conn, run.run_id, run.lease_token, status="dead",
                             error=f"{error_class} happened", error_class=error_class)
        ids.append(run.run_id)
    return ids


def test_list_filters_by_error_job_and_time(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 5)
    timeouts = _kill(conn, 3, "OutcomeUnknown")
    gone = _kill(conn, 2, "TemporaryError")
    assert {r.run_id for r in list_dead(conn, DeadFilter())} == set(timeouts + gone)
    assert {r.run_id for r in list_dead(conn, DeadFilter(error="OutcomeUnknown"))} == set(
        timeouts)
    assert {r.run_id for r in list_dead(conn, DeadFilter(error="temporaryerror happ"))} == set(
        gone)
    job_id = int(timeouts[0].split(":")[0])
    assert [r.run_id for r in list_dead(conn, DeadFilter(job_id=job_id))] == [timeouts[0]]
    newest = max(r.finished_at for r in list_dead(conn, DeadFilter()))
    assert list_dead(conn, DeadFilter(since=newest + timedelta(seconds=1))) == []
    assert list_dead(conn, DeadFilter(tenant="nobody")) == []


def test_replay_keeps_the_run_id_and_resets_the_attempt_budget(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 3)
    dead = _kill(conn, 3, "TemporaryError")
    preview = replay(conn, DeadFilter(run_ids=dead[:2]), dry_run=True)
    assert {r.run_id for r in preview} == set(dead[:2])
    assert len(list_dead(conn, DeadFilter())) == 3              # a dry run changes nothing
    done = replay(conn, DeadFilter(run_ids=dead[:2]))
    assert {r.run_id for r in done} == set(dead[:2])
    rows = conn.execute("SELECT run_id, status, attempt, last_error FROM runs "
                        "WHERE run_id = ANY(%s) ORDER BY run_id", (dead[:2],)).fetchall()
    assert [(s, a, e) for _, s, a, e in rows] == [("queued", 0, None)] * 2
    again = claim_runs(conn, owner="w", shares={"normal": 5})
    assert {r.run_id for r in again} == set(dead[:2]) and {r.attempt for r in again} == {1}
    assert replay(conn, DeadFilter(run_ids=dead[:2])) == []     # no longer dead: nothing
