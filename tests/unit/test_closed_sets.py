"""Closed sets are defined once in Python (crondepot.base.vocab); the SQL
that must spell them too is held to the same lists here, from the current schema
(db/sql/schema.sql, itself checked against the migrations) and the claim function.

Two sets have no CHECK to hold them to, and this says so rather than invent one:
``runs.skip_reason`` is free text (the scheduler and the queue's statements write it, from
SkipReason), and a target kind is ``jobs.target->>'type'`` inside a jsonb column the
job validator writes. The test below each of them holds the statements that write it."""

from __future__ import annotations

import re
from importlib import resources

from crondepot.base.vocab import (
    ATTEMPT_OUTCOMES,
    ATTEMPTED_STATES,
    CHANNEL_KINDS,
    END_REASONS,
    NOTICE_EVENTS,
    NOTICE_STATUSES,
    OUTCOMES,
    OVERLAPS,
    PRIORITIES,
    RECORDED_OUTCOMES,
    RUN_STATES,
    SKIP_REASONS,
    TARGET_KINDS,
)
from crondepot.job import fields as F
from crondepot.job.targets import TARGETS

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


def test_overlap_policies_are_the_field_tables_and_the_jobs_check() -> None:
    assert OVERLAPS == ("allow", "skip", "buffer_one", "replace")
    assert F.OVERLAP.choices == OVERLAPS
    assert F.OVERLAP.default == "allow"           # today's behaviour
    assert _check_values("jobs_overlap_check") == OVERLAPS


def test_run_states_are_the_runs_tables_check() -> None:
    assert _check_values("runs_status_check") == RUN_STATES
    assert set(OUTCOMES) < set(RUN_STATES)


def test_end_reasons_are_the_jobs_tables_check() -> None:
    assert _check_values("jobs_ended_reason_check") == END_REASONS


def test_notice_sets_are_the_notice_tables_checks() -> None:
    assert _check_values("notice_channels_kind_check") == CHANNEL_KINDS
    assert _check_values("notice_events_kind_check") == NOTICE_EVENTS
    assert _check_values("notice_messages_status_check") == NOTICE_STATUSES


def test_recorded_attempt_outcomes_are_the_run_attempts_check() -> None:
    assert _check_values("run_attempts_outcome_check") == RECORDED_OUTCOMES
    # the API shows the latest attempt as its run's state, an earlier one as recorded
    assert set(ATTEMPTED_STATES) < set(RUN_STATES)
    assert set(ATTEMPT_OUTCOMES) == set(ATTEMPTED_STATES) | set(RECORDED_OUTCOMES)


def _sql_texts() -> str:
    return "\n".join(path.read_text() for folder in ("queries", "functions")
                     for path in (SQL / folder).iterdir() if path.name.endswith(".sql"))


def test_every_skip_reason_the_sql_writes_is_one() -> None:
    # No CHECK on runs.skip_reason: the SQL's literals are held to the set instead.
    written = set(re.findall(r"skip_reason\s*=\s*(?:CASE WHEN [^']*THEN )?'([a-z_]+)'",
                             _sql_texts()))
    assert written == {"deadline_passed", "overlap", "replaced", "restored"}
    assert written <= set(SKIP_REASONS)


def test_every_target_kind_is_one_variant_of_the_job_document() -> None:
    # No CHECK on jobs.target (jsonb): the validator's variants are the set.
    assert tuple(variant.tag for variant in TARGETS.variants) == TARGET_KINDS
