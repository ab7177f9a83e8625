"""The claim's lending rules, checked against a model: for any ready runs per priority and any
turns, the claim function takes as many runs of each priority as the rules say.

The rules (docs/worker.md, "Claiming"): each priority takes its own turns first (urgent's
urgent-only turns included); a priority short of ready runs lends the lendable turns it could
not use to the next priority (urgent -> normal -> bulk -> urgent) that still has ready runs,
and what that one cannot supply goes on to the one after; a borrower that supplies part of
several loans settles them in lender order. The model below is that paragraph in Python; the
function's way of scanning (how many index scans, in which order) is free to change as long
as the counts it claims do not. The ready runs are spread over up to three tenants of any
weights: sharing a priority's turns among its tenants (fair claims, migration 0012) must
not change how many runs each priority gets.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crondepot.base.vocab import PRIORITIES
from tests.support.jobs import add_job, tenant


def model_claim(ready: list[int], limits: list[int], lendable: list[int]) -> list[int]:
    """Runs taken per priority (urgent, normal, bulk)."""
    got = [min(r, n) for r, n in zip(ready, limits, strict=True)]
    left = [r - g for r, g in zip(ready, got, strict=True)]
    dry = [g < n for g, n in zip(got, limits, strict=True)]
    # A lender's spare: its lendable turns that found no run (its own turns that may not be
    # lent are filled first).
    spare = [lend - max(0, g - (n - lend)) for lend, g, n in zip(lendable, got, limits,
                                                                  strict=True)]
    for _ in range(2):                      # first borrower, then the second
        lent_to: list[int | None] = [None, None, None]
        wanted = [0, 0, 0]
        for lender in range(3):
            if spare[lender] <= 0:
                continue
            for step in (1, 2):
                borrower = (lender + step) % 3
                if not dry[borrower]:
                    lent_to[lender] = borrower
                    wanted[borrower] += spare[lender]
                    break
        if not any(wanted):
            break
        for borrower in range(3):
            if not wanted[borrower]:
                continue
            found = min(left[borrower], wanted[borrower])
            left[borrower] -= found
            got[borrower] += found
            dry[borrower] = found < wanted[borrower]
            for lender in range(3):          # settle the loans, in lender order
                if lent_to[lender] == borrower:
                    used = min(spare[lender], found)
                    spare[lender] -= used
                    found -= used
    return got


def test_the_model_on_the_documented_cases() -> None:
    # Everything normal (the reminder service): every turn ends up on normal.
    assert model_claim([0, 50, 0], [12, 6, 2], [12, 6, 2]) == [0, 20, 0]
    # An urgent flood with no normal work: normal lends to bulk, bulk keeps its own.
    assert model_claim([50, 0, 50], [6, 3, 1], [6, 3, 1]) == [6, 0, 4]
    # Urgent-only turns are never lent.
    assert model_claim([0, 50, 0], [4, 0, 0], [0, 0, 0]) == [0, 0, 0]
    # A borrower short of runs passes the rest on: urgent -> normal (2 left) -> bulk.
    assert model_claim([0, 2, 50], [6, 0, 0], [6, 0, 0]) == [0, 2, 4]


@pytest.fixture
def claim_db(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    for name in ("bank42", "bank7", "shop9"):    # three tenants, a job each, for the runs below
        tenant_id = tenant(conn, name)
        add_job(conn, tenant_id, cron="0 9 * * *")
    return conn


def _claim_counts(conn: psycopg.Connection[Any], ready: list[int], limits: list[int],
                  lendable: list[int], tenants: int = 1,
                  weights: tuple[int, ...] = (1, 1, 1)) -> tuple[list[int], int]:
    """Counts claimed per priority, and the index scans of runs_queued the claim made; all in
    a transaction that is rolled back, so every example starts from an empty queue. The
    runs of each priority go to the first ``tenants`` tenants in turn."""
    with conn.transaction(force_rollback=True):
        conn.execute("UPDATE tenants SET claim_weight = w.weight "
                     "FROM unnest(%s::integer[]) WITH ORDINALITY AS w(weight, n) "
                     "WHERE tenants.id = (SELECT id FROM tenants ORDER BY id OFFSET w.n - 1 "
                     "LIMIT 1)", (list(weights),))
        conn.execute(
            """
            INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,
                              available_at)
            SELECT p.priority || ':' || g, j.id, j.tenant_id, p.priority,
                   now() - interval '1 hour', now() - interval '1 hour',
                   now() - make_interval(secs => g)
            FROM unnest(%(priorities)s::text[], %(ready)s::integer[]) AS p(priority, n),
                 generate_series(1, p.n) AS g,
                 LATERAL (SELECT id, tenant_id FROM jobs ORDER BY id
                          OFFSET g %% %(tenants)s LIMIT 1) AS j
            """, {"priorities": list(PRIORITIES), "ready": ready, "tenants": tenants})
        before = _queued_index_scans(conn)
        rows = conn.execute(
            "SELECT priority FROM crondepot_claim_runs('w', %s::integer[], %s::integer[])",
            (limits, lendable)).fetchall()
        scans = _queued_index_scans(conn) - before
    return [sum(1 for (p,) in rows if p == name) for name in PRIORITIES], scans


def _queued_index_scans(conn: psycopg.Connection[Any]) -> int:
    # This transaction's scans of the index (no pg_stat_xact_* view covers indexes), of
    # every partition's copy (runs is partitioned, migration 0040).
    row = conn.execute("SELECT coalesce(sum(pg_stat_get_xact_numscans(relid)), 0) "
                       "FROM pg_partition_tree('runs_queued'::regclass)").fetchone()
    assert row is not None
    return int(row[0])


turns = st.integers(min_value=0, max_value=8)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ready=st.lists(st.integers(min_value=0, max_value=12), min_size=3, max_size=3),
       shares=st.lists(turns, min_size=3, max_size=3),
       urgent_only=st.integers(min_value=0, max_value=4),
       lend=st.booleans(),
       tenants=st.integers(min_value=1, max_value=3),
       weights=st.tuples(*[st.sampled_from([1, 2, 5, 1000])] * 3))
def test_the_claim_takes_what_the_lending_rules_say(
        claim_db: psycopg.Connection[Any], ready: list[int], shares: list[int],
        urgent_only: int, lend: bool, tenants: int, weights: tuple[int, ...]) -> None:
    # What claim_runs sends: urgent's limit includes the urgent-only turns, never lendable.
    limits = [shares[0] + urgent_only, shares[1], shares[2]]
    lendable = shares if lend else [0, 0, 0]
    counts, _ = _claim_counts(claim_db, ready, limits, lendable, tenants, weights)
    assert counts == model_claim(ready, limits, lendable)


def test_one_busy_priority_is_scanned_once(claim_db: psycopg.Connection[Any]) -> None:
    """Everything normal, as a reminder service's morning is: urgent's and bulk's spare
    turns go to normal in normal's own scan, not in a second scan of the same index range.

    Three scans, as before fair claims, but not the same three: the listing of the
    (priority, tenant) pairs with runs ready takes two (it finds normal's one tenant, then
    that there is no other pair), urgent and bulk are known empty and not scanned, and
    normal's one scan takes all 20 turns (before: urgent, bulk and normal, one each)."""
    counts, scans = _claim_counts(claim_db, [0, 50, 0], [12, 6, 2], [12, 6, 2])
    assert counts == [0, 20, 0]
    assert scans == 3
    # With two tenants ready in normal: the listing's three (two pairs, then none) and one
    # scan per tenant, each taking its share of the 20.
    counts, scans = _claim_counts(claim_db, [0, 50, 0], [12, 6, 2], [12, 6, 2], tenants=2)
    assert counts == [0, 20, 0]
    assert scans == 5
