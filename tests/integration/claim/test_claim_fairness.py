"""Fair claims (docs/worker.md): within a priority, the claim shares its turns
across the tenants that have runs ready, by their weights, instead of taking the oldest
ready runs of any tenant. The weighted order between priorities, lending and the urgent-only
turns are checked across tenants by the model test in test_claim_lending.py."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from crondepot.queue import claim_runs
from crondepot.queue.claim import ClaimedRun
from tests.support.plans import reads
from tests.support.runs import due_runs


def by_tenant(runs: list[ClaimedRun]) -> Counter[int]:
    return Counter(run.tenant_id for run in runs)


def set_weight(conn: psycopg.Connection[Any], tenant_id: int, weight: int) -> None:
    conn.execute("UPDATE tenants SET claim_weight = %s WHERE id = %s", (weight, tenant_id))


def test_a_burst_of_one_tenant_does_not_hold_back_another(
        conn: psycopg.Connection[Any]) -> None:
    """Today's complaint: 10,000 runs of A queued an hour before B's 10, and a claim of 20
    took 20 of A's. Equal weights: B's 10 and A's oldest 10."""
    a = due_runs(conn, "bank-a", 10_000, age_seconds=3600)
    b = due_runs(conn, "bank-b", 10, age_seconds=5)
    claimed = claim_runs(conn, owner="w", shares={"normal": 20})
    assert by_tenant(claimed) == {a: 10, b: 10}
    oldest = conn.execute("SELECT run_id FROM runs WHERE tenant_id = %s "
                          "ORDER BY available_at LIMIT 10", (a,)).fetchall()
    assert {r.run_id for r in claimed if r.tenant_id == a} == {r for (r,) in oldest}
    # B is dry now: the next claim is all A's, oldest next.
    again = claim_runs(conn, owner="w", shares={"normal": 20})
    assert by_tenant(again) == {a: 20}


def test_a_tenant_short_of_its_share_leaves_the_rest_to_the_others(
        conn: psycopg.Connection[Any]) -> None:
    a = due_runs(conn, "bank-a", 100)
    b = due_runs(conn, "bank-b", 3)
    c = due_runs(conn, "bank-c", 100)
    claimed = claim_runs(conn, owner="w", shares={"normal": 20})
    counts = by_tenant(claimed)
    assert len(claimed) == 20 and counts[b] == 3
    assert abs(counts[a] - counts[c]) <= 1      # 8 or 9 each: 17 shared by two
    assert len({r.run_id for r in claimed}) == 20


def test_runs_not_yet_available_take_no_turns(conn: psycopg.Connection[Any]) -> None:
    a = due_runs(conn, "bank-a", 50)
    b = due_runs(conn, "bank-b", 50, age_seconds=-600)     # retries waiting for their backoff
    claimed = claim_runs(conn, owner="w", shares={"normal": 20})
    assert by_tenant(claimed) == {a: 20}
    # B's newest runs wait, its older ones are ready: B is ready (the listing reads each
    # tenant's newest run first, and looks further when that one waits).
    due_runs(conn, "bank-b", 4, age_seconds=30)
    claimed = claim_runs(conn, owner="w", shares={"normal": 20})
    assert by_tenant(claimed) == {a: 16, b: 4}


@pytest.mark.parametrize(("weights", "expected"), [((3, 1), (15, 5)), ((1, 4), (4, 16)),
                                                   ((1000, 1), (20, 0))])
def test_weights_share_the_turns(conn: psycopg.Connection[Any], weights: tuple[int, int],
                                 expected: tuple[int, int]) -> None:
    """Each claim gives every tenant its weighted share, to within one run (here exactly:
    15 and 5 of 20 for 3:1; 1000:1 leaves B a turn in about one claim in 50)."""
    a = due_runs(conn, "bank-a", 200, age_seconds=3600)
    b = due_runs(conn, "bank-b", 200)
    set_weight(conn, a, weights[0])
    set_weight(conn, b, weights[1])
    for _ in range(5):
        counts = by_tenant(claim_runs(conn, owner="w", shares={"normal": 20}))
        if weights == (1000, 1):
            assert counts[a] >= 19 and counts[a] + counts[b] == 20
        else:
            assert (counts[a], counts[b]) == expected


def test_claims_of_one_run_are_shared_too(conn: psycopg.Connection[Any]) -> None:
    """A claim smaller than the number of tenants cannot serve them all: who gets the turn
    is drawn per claim, so over many claims each tenant gets its weight's share. (A fixed
    order would hand every claim of one to the same tenant.)"""
    a = due_runs(conn, "bank-a", 400, age_seconds=3600)
    b = due_runs(conn, "bank-b", 400)
    c = due_runs(conn, "bank-c", 400)
    set_weight(conn, c, 2)
    counts: Counter[int] = Counter()
    for _ in range(400):
        counts += by_tenant(claim_runs(conn, owner="w", shares={"normal": 1}))
    # Expected 100, 100 and 200; a binomial draw is that far off about once in 10^7.
    assert 55 <= counts[a] <= 145 and 55 <= counts[b] <= 145 and 140 <= counts[c] <= 260


def test_each_priority_is_shared_on_its_own(conn: psycopg.Connection[Any]) -> None:
    """The weighted order between priorities comes first (6:3:1 of the claim's turns), then
    each priority's turns are shared among the tenants with runs ready in it."""
    a = due_runs(conn, "bank-a", 100, priority="urgent", age_seconds=3600)
    due_runs(conn, "bank-a", 100, priority="normal", age_seconds=3600)
    b = due_runs(conn, "bank-b", 100, priority="normal")
    due_runs(conn, "bank-b", 100, priority="bulk")
    claimed = claim_runs(conn, owner="w", shares={"urgent": 6, "normal": 4, "bulk": 2})
    per = Counter((r.priority, r.tenant_id) for r in claimed)
    assert per == {("urgent", a): 6, ("normal", a): 2, ("normal", b): 2, ("bulk", b): 2}


def test_urgent_only_turns_are_shared_and_never_lent(conn: psycopg.Connection[Any]) -> None:
    a = due_runs(conn, "bank-a", 50, priority="urgent", age_seconds=3600)
    b = due_runs(conn, "bank-b", 50, priority="urgent")
    due_runs(conn, "bank-c", 50, priority="normal")
    claimed = claim_runs(conn, owner="w", shares={}, urgent_only=4)
    assert by_tenant(claimed) == {a: 2, b: 2}
    conn.execute("UPDATE runs SET status = 'cancelled' WHERE priority = 'urgent' "
                 "AND status = 'queued'")
    assert claim_runs(conn, owner="w", shares={}, urgent_only=4) == []


def test_lent_turns_are_shared_across_the_borrowers_tenants(
        conn: psycopg.Connection[Any]) -> None:
    # Urgent and bulk are empty: their turns go to normal, and normal's 20 are shared.
    a = due_runs(conn, "bank-a", 100, age_seconds=3600)
    b = due_runs(conn, "bank-b", 100)
    claimed = claim_runs(conn, owner="w", shares={"urgent": 12, "normal": 6, "bulk": 2})
    assert by_tenant(claimed) == {a: 10, b: 10}
    # Normal's own scan is short (urgent lends it too much): the rest passes on to bulk's
    # tenants in the lending round, shared as well.
    conn.execute("UPDATE runs SET status = 'cancelled' WHERE status = 'queued'")
    a_n = due_runs(conn, "bank-a", 2, age_seconds=30)
    c = due_runs(conn, "bank-c", 50, priority="bulk", age_seconds=30)
    d = due_runs(conn, "bank-d", 50, priority="bulk")
    claimed = claim_runs(conn, owner="w", shares={"urgent": 10})
    assert a_n == a and by_tenant(claimed) == {a: 2, c: 4, d: 4}


def test_a_run_past_its_deadline_is_passed_over_on_the_fair_path(
        conn: psycopg.Connection[Any]) -> None:
    from crondepot.queue.lease import skip_runs_past_deadline

    a = due_runs(conn, "bank-a", 5, deadline_in=-1)
    b = due_runs(conn, "bank-b", 5)
    claimed = claim_runs(conn, owner="w", shares={"normal": 10})
    assert by_tenant(claimed) == {b: 5}        # A's five are past their deadline: not leased

    def rows() -> list[tuple[Any, ...]]:
        return conn.execute("SELECT status, skip_reason, lease_token IS NULL, count(*) "
                            "FROM runs WHERE tenant_id = %s GROUP BY 1, 2, 3", (a,)).fetchall()

    assert rows() == [("queued", None, True, 5)]
    assert len(skip_runs_past_deadline(conn)) == 5     # the workers' sweep records them
    assert rows() == [("skipped", "deadline_passed", True, 5)]


def test_two_workers_claiming_at_once_never_take_the_same_run(db_url: str) -> None:
    """The fair take locks each tenant's share FOR UPDATE SKIP LOCKED, like the plain scan:
    two claims in open transactions at once get disjoint runs."""
    with psycopg.connect(db_url, autocommit=True) as setup:
        a = due_runs(setup, "bank-a", 30, age_seconds=3600)
        b = due_runs(setup, "bank-b", 30)
    with psycopg.connect(db_url) as one, psycopg.connect(db_url) as two:
        first = claim_runs(one, owner="w1", shares={"normal": 20})      # not committed yet
        second = claim_runs(two, owner="w2", shares={"normal": 30})
        one.commit()
        two.commit()
    # The second claim saw both tenants and took its 15 each past the first one's locks.
    assert by_tenant(first) == {a: 10, b: 10} and by_tenant(second) == {a: 15, b: 15}
    assert not {r.run_id for r in first} & {r.run_id for r in second}


def test_a_claim_at_a_given_instant_sees_the_tenants_ready_then(
        conn: psycopg.Connection[Any]) -> None:
    """Readiness is judged at the claim's instant (the database clock, or the one given)."""
    a = due_runs(conn, "bank-a", 5)
    b = due_runs(conn, "bank-b", 5, age_seconds=-120)
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    later = row[0] + timedelta(seconds=180)
    claimed = claim_runs(conn, owner="w", shares={"normal": 4}, now=later)
    assert by_tenant(claimed) == {a: 2, b: 2}


def test_the_fair_path_keeps_index_plans_on_a_grown_table(
        conn: psycopg.Connection[Any]) -> None:
    """As the one-tenant path does (test_claim_plans.py): plans are made while runs is small and
    kept after it has grown without an ANALYZE; the fair take, the listing and the weights
    must not turn into sequential scans of runs."""
    row = conn.execute("SELECT proconfig FROM pg_proc WHERE proname = 'crondepot_claim_fair'"
                       ).fetchone()
    assert row is not None
    assert set(row[0]) == {"enable_seqscan=off", "enable_sort=off", "enable_incremental_sort=off",
                           "plan_cache_mode=force_generic_plan"}
    due_runs(conn, "bank-a", 20, age_seconds=3600)
    due_runs(conn, "bank-b", 20)
    for _ in range(6):       # past PL/pgSQL's switch to kept plans, on the fair path
        claim_runs(conn, owner="w", shares={"normal": 2})
    due_runs(conn, "bank-a", 20_000, priority="bulk", age_seconds=7200)
    due_runs(conn, "bank-c", 20_000, priority="bulk")
    scans = reads("seq_scan", "idx_scan")
    with conn.transaction():
        seq_before, idx_before = conn.execute(scans).fetchone() or (0, 0)
        claimed = claim_runs(conn, owner="w", shares={"normal": 4, "bulk": 6})
        seq_after, idx_after = conn.execute(scans).fetchone() or (0, 0)
    assert Counter((r.priority, r.tenant_id) for r in claimed).total() == 10
    assert {r.priority for r in claimed} == {"normal", "bulk"}
    assert seq_after == seq_before and idx_after > idx_before
