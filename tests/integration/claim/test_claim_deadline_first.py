"""Deadline first within a rate limit (issue 34, item 5; docs/worker.md, "Deadline first
within a rate limit"): among a tenant's runs of one limit that have a misfire deadline, the
claim gives the limit's turns to the earliest deadlines, so a saturated gateway lets fewer
pass their deadline. The turns themselves (per priority, per tenant, per limit, and those of
runs with no limit or no deadline) are the queue order's, as before.

A run whose runs.rate_limit is NULL keeps its queue turn: the same scenario with the limit
left off the runs is the claim's previous order (oldest first), the baseline counted here.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from crondepot.job.store import update_job
from crondepot.limits.buckets import set_limit
from crondepot.queue import claim_runs
from crondepot.scheduler.tick import tick
from tests.support.jobs import add_job, grant_limit, tenant
from tests.support.plans import reads

T0 = datetime(2026, 3, 2, 3, 30, tzinfo=UTC)          # 09:00 in Asia/Kolkata
READY = T0 - timedelta(seconds=10)


@dataclass(frozen=True)
class Run:
    run_id: str
    tenant_id: int
    rate_limit: str | None
    available_at: datetime
    deadline_at: datetime | None


def _jobs(conn: psycopg.Connection[Any], tenant_id: int) -> int:
    (job_id,) = conn.execute(  # type: ignore[misc]
        "INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, active) "
        "VALUES (%s, 'k' || %s, '0 9 * * *', 'UTC', 'normal', "
        "'{\"type\": \"python\", \"handler\": \"test.noop\"}', false) RETURNING id",
        (tenant_id, random.random())).fetchone()
    return int(job_id)


def _queue(conn: psycopg.Connection[Any], tenant_id: int,
           specs: list[tuple[str | None, float | None]], *, start: int = 0) -> list[Run]:
    """One queued run per (limit, deadline seconds after T0) of ``specs``, ready in that
    order, a millisecond apart, from ``start`` ms after READY (all ready by T0)."""
    job_id = _jobs(conn, tenant_id)
    runs = [Run(f"{job_id}:{start + i}", tenant_id, limit,
                READY + timedelta(milliseconds=start + i),
                None if deadline is None else T0 + timedelta(seconds=deadline))
            for i, (limit, deadline) in enumerate(specs)]
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "available_at, deadline_at, rate_limit) "
        "SELECT r.id, %s, %s, 'normal', r.at, r.at, r.at, r.deadline, r.lim "
        "FROM unnest(%s::text[], %s::timestamptz[], %s::timestamptz[], %s::text[]) "
        "AS r(id, at, deadline, lim)",
        (job_id, tenant_id, [r.run_id for r in runs], [r.available_at for r in runs],
         [r.deadline_at for r in runs], [r.rate_limit for r in runs]))
    return runs


def _drain(conn: psycopg.Connection[Any], per_second: int, seconds: int) -> list[list[str]]:
    """A gateway that takes ``per_second`` runs a second: one claim of that many each
    second from T0 (the database clock injected). Returns each claim's run ids."""
    return [[r.run_id for r in claim_runs(conn, owner="w", shares={"normal": per_second},
                                          now=T0 + timedelta(seconds=k))]
            for k in range(seconds)]


def _missed(conn: psycopg.Connection[Any]) -> int:
    """Runs left queued past their deadline: the ones the workers' sweep records skipped."""
    (n,) = conn.execute(  # type: ignore[misc]
        "SELECT count(*) FROM runs WHERE status = 'queued' AND deadline_at < %s",
        (T0 + timedelta(hours=1),)).fetchone()
    return int(n)


def _burst(limit: str | None) -> list[tuple[str | None, float | None]]:
    # 9:00: 100 reminders with an evening deadline queued first, then 100 "within 12 s"
    # ones; a gateway of 10 a second needs 20 s for the 200.
    return [(limit, 30.0)] * 100 + [(limit, 12.0)] * 100


def test_a_saturated_limit_skips_fewer_runs_deadline_first(
        conn: psycopg.Connection[Any]) -> None:
    bank = tenant(conn)
    fifo_runs = _queue(conn, bank, _burst(None))
    fifo = _drain(conn, 10, 20)
    # Without a limit on the runs, the claim's previous order: oldest first (of those not
    # past their deadline).
    assert [set(claim) for claim in fifo[:13]] == [
        {r.run_id for r in fifo_runs[10 * k:10 * k + 10]} for k in range(13)]
    assert fifo[13:] == [[]] * 7
    fifo_missed = _missed(conn)
    assert fifo_missed == 70           # the "within 12 s" runs reached at 13 s .. 19 s

    conn.execute("DELETE FROM runs")
    runs = _queue(conn, bank, _burst("sms-gateway"))
    first = _drain(conn, 10, 20)
    assert _missed(conn) == 0 < fifo_missed
    urgent_ones = {r.run_id for r in runs if r.deadline_at == T0 + timedelta(seconds=12)}
    assert {i for claim in first[:10] for i in claim} == urgent_ones


def test_mixed_deadlines_skip_fewer_than_the_queue_order(conn: psycopg.Connection[Any]) -> None:
    rng = random.Random(34)
    specs: list[tuple[str | None, float | None]] = [
        ("sms-gateway", rng.choice([8.0, 15.0, 25.0, 40.0])) for _ in range(300)]
    bank = tenant(conn)
    missed = []
    for limit_on_runs in (False, True):
        conn.execute("DELETE FROM runs")
        _queue(conn, bank, [(lim if limit_on_runs else None, d) for lim, d in specs])
        _drain(conn, 7, 40)
        missed.append(_missed(conn))
    fifo_missed, edf_missed = missed
    assert edf_missed < fifo_missed, missed


def _model_claim(queue: list[Run], taken: set[str], clock: datetime, n: int) -> set[str]:
    """The rule, written plainly: the n oldest ready runs (none past its deadline); then per
    rate limit, its runs with a deadline among them give way to its ready runs with earlier
    deadlines."""
    ready = [r for r in queue if r.run_id not in taken and r.available_at <= clock
             and not (r.deadline_at is not None and r.deadline_at < clock)]
    batch = ready[:n]
    picked = {r.run_id for r in batch}
    for limit in {r.rate_limit for r in batch if r.rate_limit and r.deadline_at}:
        mine = [(r.deadline_at, 0, i, r.run_id) for i, r in enumerate(batch)
                if r.rate_limit == limit and r.deadline_at is not None]
        last = max(m[0] for m in mine)
        cands = sorted((r.deadline_at, 1, r.available_at, r.run_id) for r in ready
                       if r.run_id not in picked and r.rate_limit == limit
                       and r.deadline_at is not None and r.deadline_at < last)[:len(mine)]
        keep = sorted(mine + cands)[:len(mine)]     # type: ignore[operator]
        picked -= {m[3] for m in mine}
        picked |= {k[3] for k in keep}
    return picked


def test_each_claim_matches_the_rule_and_other_turns_keep_the_queue_order(
        conn: psycopg.Connection[Any]) -> None:
    # Runs of two limits, with and without deadlines, and runs of no limit, interleaved:
    # every claim takes exactly what the rule says, so the turns of `mail`, of no limit and
    # of runs without a deadline are the queue order's.
    rng = random.Random(5)
    specs: list[tuple[str | None, float | None]] = [
        (rng.choice(["sms-gateway", "sms-gateway", "mail", None]),
         rng.choice([None, 5.0, 9.0, 9.0, 20.0, 30.0])) for _ in range(240)]
    queue = _queue(conn, tenant(conn), specs)
    taken: set[str] = set()
    for k in range(40):
        clock = T0 + timedelta(seconds=k)
        want = _model_claim(queue, taken, clock, 7)
        got = {r.run_id for r in claim_runs(conn, owner="w", shares={"normal": 7}, now=clock)}
        assert got == want, k
        taken |= got


def test_tenant_shares_are_kept(conn: psycopg.Connection[Any]) -> None:
    a, b = tenant(conn, "bank-a"), tenant(conn, "bank-b")
    conn.execute("UPDATE tenants SET claim_weight = 3 WHERE id = %s", (a,))
    # Each tenant's later runs have the earlier deadlines.
    runs_a = _queue(conn, a, [("sms-gateway", 60.0 - i) for i in range(40)])
    runs_b = _queue(conn, b, [("sms-gateway", 60.0 - i) for i in range(40)], start=100)
    for _ in range(3):
        got = claim_runs(conn, owner="w", shares={"normal": 20}, now=T0 + timedelta(seconds=1))
        ids = {r.run_id for r in got}
        assert sum(r.tenant_id == a for r in got) == 15
        assert sum(r.tenant_id == b for r in got) == 5
        conn.execute("UPDATE runs SET status = 'queued', lease_token = NULL, "
                     "lease_owner = NULL, lease_expires_at = NULL, attempt = 0, "
                     "started_at = NULL, first_claimed_at = NULL")
    assert ids == {r.run_id for r in runs_a[-15:]} | {r.run_id for r in runs_b[-5:]}


def test_equal_deadlines_keep_the_queue_order(conn: psycopg.Connection[Any]) -> None:
    # 480 k runs with one 20:00 deadline: nothing to reorder, oldest first as before.
    runs = _queue(conn, tenant(conn), [("sms-gateway", 3600.0)] * 50)
    got = claim_runs(conn, owner="w", shares={"normal": 10}, now=T0)
    assert {r.run_id for r in got} == {r.run_id for r in runs[:10]}


def test_runs_carry_their_jobs_rate_limit(conn: psycopg.Connection[Any]) -> None:
    bank = tenant(conn)
    set_limit(conn, "sms-gateway", 450, 50)
    grant_limit(conn, bank, "sms-gateway")
    limited = add_job(conn, bank, cron="* * * * *", rate_limit="sms-gateway",
                      misfire={"policy": "skip_after", "seconds": 600})
    free = add_job(conn, bank, cron="* * * * *")
    conn.execute("UPDATE jobs SET next_run_at = %s, next_nominal_at = %s", (T0, T0))
    tick(conn, batch=10, now=T0)

    def limits() -> dict[int, str | None]:
        return dict(conn.execute(  # type: ignore[arg-type]
            "SELECT job_id, rate_limit FROM runs WHERE status = 'queued'").fetchall())

    assert limits() == {limited: "sms-gateway", free: None}
    (version,) = conn.execute(  # type: ignore[misc]
        "SELECT version FROM jobs WHERE id = %s", (limited,)).fetchone()
    update_job(conn, bank, limited, {"rate_limit": None}, version=version, now=T0)
    assert limits() == {limited: None, free: None}


def test_deadline_first_reads_only_what_it_claims_on_a_grown_queue(
        conn: psycopg.Connection[Any]) -> None:
    # The plans are made on a tiny queue (taking the deadline-first path) and kept while
    # 20,000 runs pile up behind one limit, later ones with earlier deadlines (every claim
    # reorders), without an ANALYZE: every read stays an index scan, and the claim fetches
    # a few rows per run it takes, not the queue.
    bank = tenant(conn)
    _queue(conn, bank, [("sms-gateway", 60.0 - i) for i in range(24)])
    for k in range(12):     # past PL/pgSQL's switch to kept plans
        claim_runs(conn, owner="w", shares={"normal": 2}, now=T0 + timedelta(seconds=k))
    runs = _queue(conn, bank, [("sms-gateway", 3600.0 - i / 10) for i in range(20_000)],
                  start=50)
    counts = reads("seq_scan", "idx_tup_fetch")
    with conn.transaction():
        seq_before, fetched_before = conn.execute(counts).fetchone() or (0, 0)
        got = claim_runs(conn, owner="w", shares={"normal": 20}, now=T0 + timedelta(seconds=20))
        seq_after, fetched_after = conn.execute(counts).fetchone() or (0, 0)
    assert {r.run_id for r in got} == {r.run_id for r in runs[-20:]}
    assert seq_after == seq_before
    assert fetched_after - fetched_before < 200, fetched_after - fetched_before
