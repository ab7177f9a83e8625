"""A job's retry policy in its document: retry {max_attempts, base_s, cap_s}, the deprecated
top-level max_attempts, one number under one name, and what a patch does to it (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.spec import JobSpec
from crondepot.job.store import job_document, merged_document

BASE: dict[str, Any] = {"key": "bank42:reminder", "cron": "0 9 * * *", "tz": "Asia/Kolkata",
                        "target": {"type": "python", "handler": "sms.send"}}


def spec(**changes: Any) -> JobSpec:
    return JobSpec.from_document({**BASE, **changes})


def refusal(**changes: Any) -> InvalidJob:
    with pytest.raises(InvalidJob) as refused:
        spec(**changes)
    return refused.value


def test_without_a_retry_object_a_job_has_today_s_curve() -> None:
    job = spec()
    assert (job.max_attempts, job.retry_base_s, job.retry_cap_s) == (6, 30, 600)
    assert job_document(job)["retry"] == {"max_attempts": 6, "base_s": 30, "cap_s": 600}
    assert spec(retry=None) == job


def test_a_retry_object_sets_the_curve_and_its_members_default_alone() -> None:
    job = spec(retry={"max_attempts": 3, "base_s": 1, "cap_s": 2})
    assert (job.max_attempts, job.retry_base_s, job.retry_cap_s) == (3, 1, 2)
    assert spec(retry={"base_s": 0.25}).retry_cap_s == 600
    assert spec(retry={"cap_s": 45}).max_attempts == 6


def test_the_deprecated_max_attempts_is_the_same_number() -> None:
    assert spec(max_attempts=4) == spec(retry={"max_attempts": 4})
    assert spec(max_attempts=4, retry={"base_s": 5}) == spec(retry={"max_attempts": 4,
                                                                    "base_s": 5})
    document = job_document(spec(max_attempts=4))
    assert "max_attempts" not in document and document["retry"]["max_attempts"] == 4


@pytest.mark.parametrize("retry", [{"max_attempts": 4}, {"max_attempts": 6, "base_s": 1},
                                   None])
def test_both_names_at_once_are_refused_even_when_equal(retry: Any) -> None:
    refused = refusal(max_attempts=6, retry=retry)
    assert refused.field == "max_attempts" and "not both" in str(refused)


@pytest.mark.parametrize(("retry", "field", "words"), [
    ({"base_s": 10, "cap_s": 1}, "retry.cap_s", "retry.cap_s to be a number ≥ retry.base_s "
                                                "(10), got 1"),
    ({"cap_s": 1}, "retry.cap_s", "≥ retry.base_s (30), got 1"),
    ({"base_s": 0}, "retry.base_s", "above 0 and at most 3600, got 0"),
    ({"base_s": -1}, "retry.base_s", "got -1"),
    ({"cap_s": 86_401}, "retry.cap_s", "at most 86400"),
    ({"base_s": "30"}, "retry.base_s", 'got "30"'),
    ({"base_s": True}, "retry.base_s", "got true"),
    ({"max_attempts": 0}, "retry.max_attempts", "from 1 to 100, got 0"),
    ({"max_attempts": 2.5}, "retry.max_attempts", "an integer"),
    ({"factor": 2}, "retry.factor", "unknown field 'factor' in retry"),
    ([1], "retry", "expected retry to be an object, got an array"),
])
def test_a_bad_curve_is_refused_naming_its_member(retry: Any, field: str, words: str) -> None:
    refused = refusal(retry=retry)
    assert refused.field == field and words in str(refused), str(refused)


STORED = job_document(spec(retry={"max_attempts": 3, "base_s": 1, "cap_s": 2}))


@pytest.mark.parametrize(("patch", "expected"), [
    ({"max_attempts": 5}, (5, 1, 2)),                        # the alias replaces the number
    ({"max_attempts": None}, (6, 1, 2)),                     # null: the default number
    ({"retry": {"base_s": 4, "cap_s": 8}}, (6, 4, 8)),       # retry is replaced whole
    ({"retry": {"base_s": 4, "cap_s": 8}, "max_attempts": 2}, (2, 4, 8)),
    ({"retry": None}, (6, 30, 600)),                         # null: today's curve
    ({"payload": {"n": 1}}, (3, 1, 2)),                      # not named: kept
])
def test_a_patch_naming_either_name_replaces_the_stored_number(
        patch: dict[str, Any], expected: tuple[int, float, float]) -> None:
    job = JobSpec.from_document(merged_document(STORED, patch))
    assert (job.max_attempts, job.retry_base_s, job.retry_cap_s) == expected


@pytest.mark.parametrize("patch", [{"max_attempts": 5, "retry": {"max_attempts": 5}},
                                   {"max_attempts": 5, "retry": None},
                                   {"max_attempts": None, "retry": {"max_attempts": 5}}])
def test_a_patch_naming_both_is_refused(patch: dict[str, Any]) -> None:
    with pytest.raises(InvalidJob) as refused:
        merged_document(STORED, patch)
    assert refused.value.field == "max_attempts"


def test_the_curve_in_one_line_for_people() -> None:
    assert spec().retry_text == ("6 attempts; waits up to 30, 60, 120, 240, 480 s (random "
                                 "from 0, cap 600 s)")
    assert spec(retry={"max_attempts": 3, "base_s": 1, "cap_s": 2}).retry_waits == [1, 2]
    assert spec(retry={"max_attempts": 1}).retry_text == "1 attempt; no retry"
    many = spec(retry={"max_attempts": 20, "base_s": 0.5, "cap_s": 3600})
    assert many.retry_text == ("20 attempts; waits up to 0.5, 1, 2, 4, 8, 16, … s (random "
                               "from 0, cap 3600 s)")


def test_a_base_above_the_default_cap_without_a_cap_is_refused_naming_the_default() -> None:
    """Found by schemathesis: retry {"base_s": 1350} (cap_s left out, 600 by default) was a
    KeyError, a 500; it is a 422 on retry.cap_s that says the default is what is too low."""
    refused = refusal(retry={"base_s": 1350})
    assert refused.field == "retry.cap_s"
    assert str(refused) == ("expected retry.cap_s to be a number ≥ retry.base_s (1350), got "
                            "its default, 600")


def test_an_unknown_field_that_is_a_near_miss_names_the_one_meant() -> None:
    assert str(refusal(retry={"cap": 3})).startswith(
        "unknown field 'cap' in retry (did you mean 'cap_s'?); allowed: ")
    top = refusal(max_attempt=3)
    assert top.field == "max_attempt"
    assert str(top).startswith("unknown field 'max_attempt' (did you mean 'max_attempts'?)")
    assert "did you mean" not in str(refusal(colour="blue"))
