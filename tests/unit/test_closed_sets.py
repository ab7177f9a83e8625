"""Closed sets are defined once in Python (crondepot.base.vocab); the SQL
that must spell them too is held to the same lists here, from the current schema
(db/sql/schema.sql, itself checked against the migrations) and the claim function."""

from __future__ import annotations

import re
from importlib import resources

from crondepot.base.vocab import OUTCOMES, PRIORITIES, RUN_STATES
from crondepot.job import fields as F

SQL = resources.files("crondepot.db") / "sql"


def _check_values(constraint: str) -> tuple[str, ...]:
    text = (SQL / "schema.sql").read_text()
    found = re.search(rf"CONSTRAINT {constraint} CHECK \(\(\w+ = ANY \(ARRAY\[(.*?)\]\)\)\)",
                      text)
    assert found, constraint
    return tuple(re.findall(r"'([a-z_]+)'::text", found[1]))


def test_priorities_are_the_field_tables_and_the_tables_checks() -> None:
    assert PRIORITIES == ("urgent", "normal", "bulk")     # claim order: urgent first
    assert F.PRIORITY.choices == PRIORITIES
    assert _check_values("jobs_priority_check") == PRIORITIES
    assert _check_values("runs_priority_check") == PRIORITIES


def test_the_claim_function_walks_the_priorities_in_their_order() -> None:
    text = (SQL / "functions" / "claim_runs.sql").read_text()
    found = re.search(r"queues\s+constant text\[\] := ARRAY\[(.*?)\];", text)
    assert found
    assert tuple(re.findall(r"'([a-z]+)'", found[1])) == PRIORITIES


def test_run_states_are_the_runs_tables_check() -> None:
    assert _check_values("runs_status_check") == RUN_STATES
    assert set(OUTCOMES) < set(RUN_STATES)
