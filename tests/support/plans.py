"""What the plan tests share: make the session's plans on the statistics of the moment,
count the rows index scans fetched, and read a plan of the partitioned runs by the names
of its parent's indexes."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg

from crondepot.queue import ClaimedRun, Success, claim_runs, record_successes
from tests.support.jobs import queued_runs

# A partition of runs (migration 0040): a day, the default, or a converted database's history.
_PARTITION = r"runs_(?:p[0-9]{8}|default|history)"


def reads(*columns: str, table: str = "runs") -> str:
    """A query of ``columns`` of pg_stat_xact_user_tables (this transaction's scans so far)
    for ``table``, summed over its partitions: runs is partitioned (migration 0040), and a
    partitioned table has no statistics of its own."""
    summed = ", ".join(f"coalesce(sum(s.{c}), 0)::bigint" for c in columns)
    return (f"SELECT {summed} FROM pg_stat_xact_user_tables AS s "
            f"WHERE s.relid IN (SELECT relid FROM pg_partition_tree('{table}'::regclass))")


def parent_index(name: str) -> str:
    """The name of the index of runs that a partition's index is the copy or the counterpart
    of: runs_default_pkey is runs_pkey, runs_p20261005_queued is runs_queued (migration 0040
    names a partition's indexes <partition>_<the parent's name less "runs">)."""
    return re.sub(rf"^{_PARTITION}_", "runs_", name)


def of_runs(relation: str | None) -> bool:
    """Whether a plan's relation is runs or one of its partitions."""
    return relation is not None and re.fullmatch(rf"runs|{_PARTITION}", relation) is not None


def parent_names(text: str) -> str:
    """``text`` (a plan) with every partition's index named as the parent's."""
    return re.sub(rf"\b{_PARTITION}_", "runs_", text)


def filled_seq_scans(conn: psycopg.Connection[Any],
                     nodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan nodes that scan a partition of runs holding rows sequentially. A day not yet
    come, or the default, is often empty (no page by its last ANALYZE): there the planner
    rightly prefers a sequential scan, which reads nothing, to an index."""
    empty = {row[0] for row in conn.execute(
        "SELECT t.relid::regclass::text FROM pg_partition_tree('runs'::regclass) AS t "
        "JOIN pg_class AS c ON c.oid = t.relid WHERE t.isleaf AND c.relpages = 0")}
    return [node for node in nodes if node.get("Node Type") == "Seq Scan"
            and of_runs(node.get("Relation Name")) and node["Relation Name"] not in empty]


def fetched(conn: psycopg.Connection[Any], table: str = "runs") -> int:
    """Live rows of ``table`` fetched by index scans in this transaction so far (a row an
    index scan reads and filters out counts; dead entries passed over do not)."""
    row = conn.execute(reads("idx_tup_fetch", table=table)).fetchone()
    return int(row[0]) if row else 0


def make_the_plans(conn: psycopg.Connection[Any], analyze: Sequence[str] = ()) -> ClaimedRun:
    """Claim and record one (bulk) run: the session's claim and record plans are made now,
    on the statistics of the moment (with ``analyze``'s tables analyzed once that run is
    queued). Autovacuum is off for runs and jobs, so that no ANALYZE in the middle of a test
    makes the functions plan again."""
    leaves = [row[0] for row in conn.execute(
        "SELECT relid::regclass::text FROM pg_partition_tree('runs'::regclass) WHERE isleaf")]
    for table in (*leaves, "jobs"):       # (runs' partitions: the parent has no storage)
        conn.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    queued_runs(conn, 1, priority="bulk")
    for table in analyze:
        conn.execute(f"ANALYZE {table}")
    (first,) = claim_runs(conn, owner="w", shares={"bulk": 1})
    assert record_successes(conn, [Success(first.run_id, first.lease_token, first.attempt)])
    return first
