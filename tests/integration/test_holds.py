"""Holds take their runs out of the claim's ready range (holds.py, migration 0018): a hold
moves the tenant's matching queued runs to available_at 'infinity' (their own ready time
kept), the rescuer moves runs queued later for a held job, the release puts back the runs
no other hold names, and a held run still obeys its misfire deadline. So a claim never walks
a held backlog (bench/claim_holds.py measures it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import psycopg
import pytest

from crondepot.db import Q
from crondepot.limits import holds
from crondepot.limits.buckets import set_limit
from crondepot.maintenance.config import MaintenanceConfig
from crondepot.maintenance.rescuer import rescue
from crondepot.queue.claim import claim_runs
from crondepot.queue.lease import skip_runs_past_deadline
from crondepot.queue.outcome import record_retry
from tests.integration.test_ledger import add, at, drain
from tests.support.jobs import grant_limit, tenant

SMS = {"type": "http", "url": "https://sms.example.com/send"}
MAIL = {"type": "http", "url": "https://mail.example.com/send"}


@pytest.fixture
def t(conn: psycopg.Connection[Any]) -> int:
    return tenant(conn)


def _claim(conn: psycopg.Connection[Any], now: datetime | None = None) -> list[int]:
    return sorted(r.job_id for r in claim_runs(conn, owner="w", shares={"normal": 50},
                                               now=now))


def _queued(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[str, Any]]:
    """(available_at as text, held_available_at) of the job's queued runs, oldest first."""
    return conn.execute("SELECT available_at::text, held_available_at FROM runs "
                        "WHERE job_id = %s AND status = 'queued' ORDER BY nominal_at",
                        (job_id,)).fetchall()


def _ready_times(conn: psycopg.Connection[Any], job_id: int) -> list[Any]:
    return [r[0] for r in conn.execute(
        "SELECT available_at FROM runs WHERE job_id = %s AND status = 'queued' "
        "ORDER BY nominal_at", (job_id,))]


def test_a_hold_moves_its_runs_out_and_the_release_puts_their_times_back(
        conn: psycopg.Connection[Any], t: int) -> None:
    sms = add(conn, t, at(8), key="sms", cron="*/5 9 * * *", target=SMS)
    mail = add(conn, t, at(8), key="mail", cron="*/5 9 * * *", target=MAIL)
    drain(conn, at(9, 20))
    before = _ready_times(conn, sms)
    assert len(before) == 5
    assert holds.hold(conn, t, "host", "sms.example.com")
    assert {a for a, _ in _queued(conn, sms)} == {"infinity"}
    assert [h for _, h in _queued(conn, sms)] == before       # own ready time kept
    assert {h for _, h in _queued(conn, mail)} == {None}        # another host: untouched
    assert [h.queued for h in holds.list_holds(conn, t)] == [5]
    # The API shows a held run's own ready time (psycopg cannot load 'infinity').
    run_id = conn.execute("SELECT run_id FROM runs WHERE job_id = %s LIMIT 1",
                          (sms,)).fetchone()[0]
    shown = conn.execute(Q.get_run, {"run_id": run_id, "tenant_id": t}).fetchone()
    assert shown is not None and shown[7] in before
    assert _claim(conn, at(10)) == [mail] * 5
    assert holds.release(conn, t, "host", "sms.example.com")
    assert _ready_times(conn, sms) == before
    assert {h for _, h in _queued(conn, sms)} == {None}
    assert _claim(conn, at(10)) == [sms] * 5


def test_runs_queued_for_a_held_job_later_are_swept_and_never_claimed(
        conn: psycopg.Connection[Any], t: int) -> None:
    sms = add(conn, t, at(8), key="sms", cron="*/5 9 * * *", target=SMS)
    drain(conn, at(9, 1))                                     # the 09:00 fire
    (retried,) = claim_runs(conn, owner="w", shares={"normal": 5}, now=at(9, 1))
    conn.commit()
    holds.hold(conn, t, "host", "sms.example.com")
    drain(conn, at(9, 6))                                     # a new fire: 09:05
    assert record_retry(conn, retried.run_id, retried.lease_token, delay=0,
                        error="503", error_class="HTTPError",
                        max_lease_seconds=10**8) == "queued"   # claimed "at 09:01"
    conn.commit()
    assert sorted(a for a, _ in _queued(conn, sms)) != ["infinity", "infinity"]
    assert [h.queued for h in holds.list_holds(conn, t)] == [2]   # counted before the sweep
    assert _claim(conn) == []                          # the claim's own check passes them
    rescue(conn, MaintenanceConfig(url=""))            # the leader's turn sweeps them
    assert [a for a, _ in _queued(conn, sms)] == ["infinity", "infinity"]
    assert all(h is not None for _, h in _queued(conn, sms))
    assert _claim(conn) == []
    assert holds.sweep(conn) == 0                       # nothing left to move
    holds.release(conn, t, "host", "sms.example.com")
    assert _claim(conn) == [sms, sms]


def test_a_held_run_past_its_deadline_is_recorded_skipped_never_sent(
        conn: psycopg.Connection[Any], t: int) -> None:
    sms = add(conn, t, at(8), key="sms", cron="0 9 * * *", target=SMS,
              misfire={"policy": "skip_after", "seconds": 600})
    drain(conn, at(9))
    holds.hold(conn, t, "host", "sms.example.com")
    assert [a for a, _ in _queued(conn, sms)] == ["infinity"]
    assert skip_runs_past_deadline(conn, now=at(9, 5)) == []
    (skipped,) = skip_runs_past_deadline(conn, now=at(9, 30))      # held, still skipped
    assert skipped[1] == sms
    status, reason, ready, kept = conn.execute(
        "SELECT status, skip_reason, available_at::text, held_available_at FROM runs "
        "WHERE job_id = %s", (sms,)).fetchone()
    assert (status, reason, kept) == ("skipped", "deadline_passed", None)
    assert ready != "infinity"                          # a run not queued is never moved out
    holds.release(conn, t, "host", "sms.example.com")
    assert _claim(conn, at(9, 30)) == []


def test_a_released_run_past_its_deadline_is_never_sent(
        conn: psycopg.Connection[Any], t: int) -> None:
    sms = add(conn, t, at(8), key="sms", cron="0 9 * * *", target=SMS,
              misfire={"policy": "skip_after", "seconds": 600})
    drain(conn, at(9))
    holds.hold(conn, t, "host", "sms.example.com")
    holds.release(conn, t, "host", "sms.example.com")
    assert _claim(conn, at(9, 30)) == []                # its time back, but late
    assert [s[1] for s in skip_runs_past_deadline(conn, now=at(9, 30))] == [sms]


def test_a_run_two_holds_name_stays_held_until_both_end(
        conn: psycopg.Connection[Any], t: int) -> None:
    set_limit(conn, "sms-gateway", 100, 100)
    grant_limit(conn, t, "sms-gateway")
    both = add(conn, t, at(8), key="both", cron="0 9 * * *", target=SMS,
               rate_limit="sms-gateway")
    only_host = add(conn, t, at(8), key="host", cron="0 9 * * *", target=SMS)
    drain(conn, at(9))
    holds.hold(conn, t, "rate_limit", "sms-gateway")
    holds.hold(conn, t, "host", "sms.example.com")
    holds.release(conn, t, "rate_limit", "sms-gateway")
    assert [a for a, _ in _queued(conn, both)] == ["infinity"]     # the host still holds it
    assert _claim(conn, at(10)) == []
    holds.hold(conn, t, "rate_limit", "sms-gateway")
    holds.release(conn, t, "host", "sms.example.com")
    assert [a for a, _ in _queued(conn, both)] == ["infinity"]     # the limit still does
    assert _claim(conn, at(10)) == [only_host]
    holds.release(conn, t, "rate_limit", "sms-gateway")
    assert [a for a, _ in _queued(conn, both)] == [str(at(9))[:19] + "+00"]
    assert _claim(conn, at(10)) == [both]


def test_cancelling_a_held_job_leaves_no_run_at_infinity(
        conn: psycopg.Connection[Any], t: int) -> None:
    from crondepot.job.store import cancel_job

    sms = add(conn, t, at(8), key="sms", cron="0 9 * * *", target=SMS)
    drain(conn, at(9))
    holds.hold(conn, t, "host", "sms.example.com")
    cancel_job(conn, t, sms)             # (writes the fires owed until now first)
    assert conn.execute("SELECT count(*) FROM runs WHERE available_at = 'infinity' "
                        "OR held_available_at IS NOT NULL").fetchone() == (0,)
    assert conn.execute("SELECT status, available_at::text, held_available_at FROM runs "
                        "WHERE job_id = %s AND nominal_at = %s", (sms, at(9))).fetchone() == (
        "cancelled", str(at(9))[:19] + "+00", None)


def test_the_sweep_leaves_runs_ready_beyond_its_horizon(
        conn: psycopg.Connection[Any], t: int) -> None:
    sms = add(conn, t, at(8), key="sms", cron="0 9 * * *", target=SMS)
    drain(conn, at(9))
    holds.hold(conn, t, "host", "sms.example.com")
    conn.execute("UPDATE runs SET available_at = now() + interval '1 hour', "
                 "held_available_at = NULL WHERE job_id = %s", (sms,))
    conn.commit()
    assert holds.sweep(conn) == 0                          # not ready soon: not moved yet
    assert holds.sweep(conn, horizon_seconds=2 * 3600) == 1
    assert [a for a, _ in _queued(conn, sms)] == ["infinity"]
