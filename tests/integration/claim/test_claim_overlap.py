"""The claim's overlap rules (functions/claim_overlap.sql): allow, skip, buffer_one and
replace (buffer_one's waiting, and the running run asked to give way), in one claim,
across claims, and two workers claiming the same job's runs at the same instant."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.queue import (
    LostLease,
    claim_runs,
    extend_acquired_leases,
    reap_abandoned_runs,
    record_replaced,
    record_success,
)
from crondepot.queue.lease import HeldLease
from tests.support.jobs import queued_runs, tenant


def _job(conn: psycopg.Connection[Any], overlap: str, runs: int, *,
         key: str | None = None) -> tuple[int, list[str]]:
    """A job with ``overlap`` and ``runs`` queued runs, ready, a second apart (oldest first,
    the last one ready now); their ids, oldest first."""
    tenant_id = tenant(conn)
    (job_id,) = conn.execute(
        "INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, overlap, active) "
        "VALUES (%s, %s, '* * * * *', 'UTC', 'normal', "
        "'{\"type\": \"python\", \"handler\": \"test.record\"}', %s, false) RETURNING id",
        (tenant_id, key or f"overlap-{overlap}-{runs}", overlap)).fetchone() or (0,)
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "                  available_at, overlap) "
        "SELECT %(job)s || ':' || g, %(job)s, %(tenant)s, 'normal', t, t, t, "
        "       (SELECT overlap FROM jobs WHERE id = %(job)s) "
        "FROM generate_series(1, %(n)s) AS g, "
        "     LATERAL (SELECT now() - make_interval(secs => %(n)s - g)) AS x(t)",
        {"job": job_id, "tenant": tenant_id, "n": runs})
    return job_id, [f"{job_id}:{g}" for g in range(1, runs + 1)]


def _states(conn: psycopg.Connection[Any], job_id: int) -> dict[str, tuple[str, str | None]]:
    return {run_id: (status, reason) for run_id, status, reason in conn.execute(
        "SELECT run_id, status, skip_reason FROM runs WHERE job_id = %s", (job_id,))}


def _claim(conn: psycopg.Connection[Any], n: int = 10, owner: str = "w") -> list[Any]:
    return claim_runs(conn, owner=owner, shares={"normal": n})


def test_allow_leases_every_run_of_a_job(conn: psycopg.Connection[Any]) -> None:
    _job_id, ids = _job(conn, "allow", 3)
    assert sorted(r.run_id for r in _claim(conn)) == sorted(ids)


def test_skip_leases_the_oldest_and_skips_the_rest(conn: psycopg.Connection[Any]) -> None:
    job_id, ids = _job(conn, "skip", 3)
    assert [r.run_id for r in _claim(conn)] == [ids[0]]
    assert _states(conn, job_id) == {ids[0]: ("running", None), ids[1]: ("skipped", "overlap"),
                                     ids[2]: ("skipped", "overlap")}
    attempts = conn.execute("SELECT attempt FROM runs WHERE run_id = %s", (ids[1],)).fetchone()
    assert attempts == (0,)          # no attempt counted
    # While it runs, a new fire is skipped too; once it ends, the next one is leased.
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at, overlap) SELECT %s, job_id, tenant_id, priority, now(), now(), "
                 "now(), overlap FROM runs WHERE run_id = %s", (f"{job_id}:9", ids[0]))
    assert _claim(conn) == []
    assert _states(conn, job_id)[f"{job_id}:9"] == ("skipped", "overlap")


def test_buffer_one_keeps_one_waiting(conn: psycopg.Connection[Any]) -> None:
    job_id, ids = _job(conn, "buffer_one", 4)
    (first,) = _claim(conn)
    assert first.run_id == ids[0]
    assert _states(conn, job_id) == {ids[0]: ("running", None), ids[1]: ("queued", None),
                                     ids[2]: ("skipped", "overlap"),
                                     ids[3]: ("skipped", "overlap")}
    # The one waiting stays queued, claim after claim, while the first runs; a new fire
    # is dropped (the newer one), not the one waiting.
    assert _claim(conn) == []
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at, overlap) SELECT %s, job_id, tenant_id, priority, now(), now(), "
                 "now(), overlap FROM runs WHERE run_id = %s", (f"{job_id}:9", ids[0]))
    assert _claim(conn) == []
    assert _states(conn, job_id)[ids[1]] == ("queued", None)
    assert _states(conn, job_id)[f"{job_id}:9"] == ("skipped", "overlap")
    # The first ends: the waiting one is leased by the next claim.
    record_success(conn, first.run_id, first.lease_token, first.attempt)
    assert [r.run_id for r in _claim(conn)] == [ids[1]]


def _asked(conn: psycopg.Connection[Any], run_id: str) -> bool:
    row = conn.execute("SELECT replace_requested_at IS NOT NULL FROM runs WHERE run_id = %s",
                       (run_id,)).fetchone()
    return row == (True,)


def test_replace_asks_the_running_run_to_give_way(conn: psycopg.Connection[Any]) -> None:
    job_id, ids = _job(conn, "replace", 3)
    (first,) = _claim(conn)
    assert first.run_id == ids[0]
    # as buffer_one: one waits, the newer is dropped
    assert _states(conn, job_id)[ids[1]] == ("queued", None)
    assert _states(conn, job_id)[ids[2]] == ("skipped", "overlap")
    # The claim that leased it did not ask it (it was not running yet); the next one,
    # which finds the waiting run behind it, does, and the lease renewal tells its worker.
    assert not _asked(conn, ids[0])
    held = [HeldLease(first.run_id, first.lease_token, first.lease_seconds)]
    assert not extend_acquired_leases(conn, held)[first.run_id].replace_requested
    assert _claim(conn) == []
    assert _asked(conn, ids[0]) and not _asked(conn, ids[1])
    assert extend_acquired_leases(conn, held)[first.run_id].replace_requested
    # Its worker gives up the call and records it: skipped 'replaced', the waiting run next.
    record_replaced(conn, first.run_id, first.lease_token, error="async handler cancelled")
    assert _states(conn, job_id)[ids[0]] == ("skipped", "replaced")
    assert [r.run_id for r in _claim(conn)] == [ids[1]]
    # fenced by the token: a second write finds the run no longer its
    with pytest.raises(LostLease):
        record_replaced(conn, first.run_id, first.lease_token, error="again")


def test_allow_and_buffer_one_never_ask(conn: psycopg.Connection[Any]) -> None:
    for overlap in ("allow", "buffer_one"):
        _job_id, ids = _job(conn, overlap, 2)
        _claim(conn)
        _claim(conn)
        assert not any(_asked(conn, run_id) for run_id in ids), overlap


def test_waiting_runs_do_not_starve_a_small_claim(conn: psycopg.Connection[Any]) -> None:
    # Thirty buffered runs are the oldest ready runs of their tenant: a claim of one must
    # still find the other jobs' runs behind them (claim_pick reads past them).
    waiting = []
    for i in range(30):
        _, ids = _job(conn, "buffer_one", 2, key=f"buffered-{i}")
        waiting.append(ids[1])
        assert [r.run_id for r in _claim(conn, 1)] == [ids[0]]
    queued_runs(conn, 3)
    claimed = [_claim(conn, 1) for _ in range(3)]
    assert all(len(c) == 1 for c in claimed)
    assert not {c[0].run_id for c in claimed} & set(waiting)
    (still,) = conn.execute("SELECT count(*) FROM runs WHERE run_id = ANY(%s) "
                            "AND status = 'queued'", (waiting,)).fetchone() or (0,)
    assert still == 30


def test_a_lost_worker_releases_the_job(conn: psycopg.Connection[Any]) -> None:
    # The worker holding the running run dies: its lease expires, the reaper queues it
    # again, and the job runs on (the reaped run first, the waiting one after it).
    job_id, ids = _job(conn, "buffer_one", 2)
    (first,) = _claim(conn)
    later = first.db_now + timedelta(seconds=first.lease_seconds + 1)
    assert reap_abandoned_runs(conn, now=later)["queued"] == 1
    (again,) = claim_runs(conn, owner="w2", shares={"normal": 10}, now=later + timedelta(
        seconds=3600))
    assert again.run_id in ids
    assert _states(conn, job_id)[ids[1]][0] in ("queued", "running")


def test_an_edit_of_the_policy_reaches_the_queued_runs(conn: psycopg.Connection[Any],
                                                        tenant_id: int) -> None:
    from crondepot.job import store
    from tests.support.jobs import add_job

    job_id = add_job(conn, tenant_id, key="nightly-reconciliation", cron="0 2 * * *",
                     overlap="skip")
    job = store.get_job(conn, tenant_id, job_id)
    assert job.spec.overlap == "skip"
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at) VALUES (%s, %s, %s, 'normal', now(), now(), now())",
                 (f"{job_id}:1", job_id, tenant_id))
    store.update_job(conn, tenant_id, job_id, {"overlap": "buffer_one"}, version=job.version)
    assert store.get_job(conn, tenant_id, job_id).spec.overlap == "buffer_one"
    (overlap,) = conn.execute("SELECT overlap FROM runs WHERE run_id = %s",
                              (f"{job_id}:1",)).fetchone() or ("",)
    assert overlap == "buffer_one"


def test_the_index_refuses_a_second_lease(conn: psycopg.Connection[Any]) -> None:
    # The database's own guarantee, whatever a claim does.
    _job_id, ids = _job(conn, "skip", 2)
    _claim(conn, 1)
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("UPDATE runs SET status = 'running', lease_token = gen_random_uuid(), "
                     "lease_expires_at = now() + interval '1 minute' WHERE run_id = %s",
                     (ids[1],))


@pytest.mark.parametrize("per_job", [2, 4])
@pytest.mark.parametrize("overlap", ["skip", "buffer_one"])
def test_two_workers_at_the_same_instant_never_both_lease(db_url: str,
                                                           conn: psycopg.Connection[Any],
                                                           overlap: str, per_job: int) -> None:
    # Many jobs, two or four runs each, claimed by two connections released by one
    # barrier, one run at a time (so each worker's claim may pick any run of a job): never
    # two running runs of one job, whichever worker's claim commits first, and for
    # buffer_one never two waiting.
    jobs = [_job(conn, overlap, per_job, key=f"race-{overlap}-{i}") for i in range(40)]
    barrier = threading.Barrier(2)
    claimed: dict[str, list[str]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def worker(name: str) -> None:
        try:
            with connect(db_url) as own:
                barrier.wait()
                for _ in range(40 * per_job):
                    claimed[name] += [r.run_id for r in claim_runs(
                        own, owner=name, shares={"normal": 1})]
        except BaseException as exc:       # reported below, with the test's failure
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    running = conn.execute(
        "SELECT job_id, count(*) FROM runs WHERE status = 'running' GROUP BY job_id "
        "HAVING count(*) > 1").fetchall()
    assert running == []
    assert len(claimed["a"]) + len(claimed["b"]) == len(jobs)     # one lease per job
    for job_id, _ in jobs:
        states = sorted(s for s, _ in _states(conn, job_id).values())
        assert states == (["running"] + ["skipped"] * (per_job - 1) if overlap == "skip"
                          else ["queued", "running"] + ["skipped"] * (per_job - 2))


def test_a_rule_the_claim_read_as_absent_still_applies_to_its_take(
        conn: psycopg.Connection[Any]) -> None:
    """Regression (a CI run of test_overlap_processes): the claim asks whether any queued run
    has a rule in one statement and takes runs in a later one. A tick that committed a
    buffer_one job's runs between the two had them leased as `allow`, all at once, and
    runs_overlap_running failed the claim (the worker exited). A take told there are no
    rules, as that claim's was, still applies them to the runs it returned."""
    job_id, ids = _job(conn, "buffer_one", 3)
    row = conn.execute("SELECT tenant_id FROM jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    with conn.transaction():
        picked = conn.execute(
            "SELECT batch, passed FROM crondepot_claim_pick('normal', ARRAY[%s]::bigint[], 10, "
            "now(), '{}', '{}', false, '{}', '{}')", (row[0],)).fetchone()
    assert picked is not None
    assert picked[0] == [ids[0]]                        # one leased
    assert sorted(picked[1]) == sorted(ids[1:])         # one waits, one skipped
    assert _states(conn, job_id)[ids[2]] == ("skipped", "overlap")
