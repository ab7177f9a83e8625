"""A tenant's stats (``GET /v1/stats``, crondepot.runs.reads.stats) count its own runs only:
queue depth per priority and start-lag samples, with another tenant's runs beside them."""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.queue import claim_runs
from crondepot.runs.reads import stats
from tests.support.runs import due_runs


def test_two_tenants_stats_count_only_their_own_queue_and_lag(
        conn: psycopg.Connection[Any]) -> None:
    """Kills two mutants of queries/stats.sql: the ``tenant_id`` filter dropped from
    ``tenant_queue_depth`` (a tenant's queue would count the other's runs), and from
    ``start_lag`` (its lag samples would include the other's first claims)."""
    # Started runs: bank-a's two waited about a minute, bank-b's three about ten. Each
    # tenant's are the only urgent runs queued when they are claimed.
    a = due_runs(conn, "bank-a", 2, priority="urgent", age_seconds=60)
    assert len(claim_runs(conn, owner="w", shares={"urgent": 10})) == 2
    b = due_runs(conn, "bank-b", 3, priority="urgent", age_seconds=600)
    assert len(claim_runs(conn, owner="w", shares={"urgent": 10})) == 3
    # Queued runs, a different mix per tenant: ready ones, and ones waiting for a retry.
    due_runs(conn, "bank-a", 4, priority="normal")
    due_runs(conn, "bank-a", 1, priority="normal", age_seconds=-600)
    due_runs(conn, "bank-b", 3, priority="normal")
    due_runs(conn, "bank-b", 2, priority="bulk")
    due_runs(conn, "bank-b", 5, priority="bulk", age_seconds=-600)

    mine, theirs = stats(conn, a), stats(conn, b)

    def depth(s: dict[str, Any]) -> dict[str, tuple[int, int]]:
        return {p: (q["ready"], q["waiting"]) for p, q in s["queue"].items()}

    assert depth(mine) == {"urgent": (0, 0), "normal": (4, 1), "bulk": (0, 0)}
    assert depth(theirs) == {"urgent": (0, 0), "normal": (3, 0), "bulk": (2, 5)}
    assert mine["lag"]["samples"] == 2 and theirs["lag"]["samples"] == 3
    assert 60 <= mine["lag"]["p50_seconds"] <= mine["lag"]["p99_seconds"] < 300
    assert 600 <= theirs["lag"]["p50_seconds"] <= theirs["lag"]["p99_seconds"] < 900
