"""Validation remembered for repeated targets and schedules never lets a bad one through."""

from __future__ import annotations

from typing import Any

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.spec import JobSpec

TARGET = {"type": "http", "url": "https://notify.example/v1", "timeout_s": 10, "dedupes": True}


def _doc(**changes: Any) -> dict[str, Any]:
    return {"key": "k", "cron": "0 9 * * *", "tz": "Asia/Kolkata", "target": dict(TARGET),
            **changes}


def test_a_remembered_target_is_a_fresh_copy_each_time() -> None:
    first, second = JobSpec.from_document(_doc()), JobSpec.from_document(_doc())
    assert first.target == second.target == TARGET
    assert first.target is not second.target


@pytest.mark.parametrize(("target", "field"), [
    ({**TARGET, "timeout_s": 0}, "target.timeout_s"),
    ({**TARGET, "url": "ftp://notify.example/"}, "target.url"),
    ({**TARGET, "url": ["https://notify.example/"]}, "target.url"),       # unhashable
    ({**TARGET, "dedupes": {"yes": True}}, "target.dedupes"),             # unhashable
    ({**TARGET, "extra": 1}, "target.extra"),
])
def test_a_bad_target_after_good_ones_is_still_refused(target: dict[str, Any],
                                                      field: str) -> None:
    JobSpec.from_document(_doc())
    with pytest.raises(InvalidJob) as caught:
        JobSpec.from_document(_doc(target=target))
    assert caught.value.field == field


@pytest.mark.parametrize(("name", "value"), [("dedupes", 1), ("dedupes", 0)])
def test_a_value_equal_to_a_remembered_one_but_of_another_type_is_refused(
        name: str, value: Any) -> None:
    JobSpec.from_document(_doc(target={**TARGET, name: bool(value)}))    # True == 1
    with pytest.raises(InvalidJob) as caught:
        JobSpec.from_document(_doc(target={**TARGET, name: value}))
    assert caught.value.field == f"target.{name}"


def test_a_remembered_target_keeps_the_type_it_was_given() -> None:
    JobSpec.from_document(_doc(target={**TARGET, "timeout_s": 10.0}))
    assert type(JobSpec.from_document(_doc()).target["timeout_s"]) is int


def test_a_known_cron_in_an_unknown_zone_is_refused() -> None:
    JobSpec.from_document(_doc())
    with pytest.raises(InvalidJob) as caught:
        JobSpec.from_document(_doc(tz="Asia/Nowhere"))
    assert caught.value.field == "tz"
    for _ in range(2):          # an invalid schedule is checked (and refused) every time
        with pytest.raises(InvalidJob) as caught:
            JobSpec.from_document(_doc(cron="0 0 30 2 *"))
        assert caught.value.field == "cron"


def test_hashed_schedules_are_checked_per_job() -> None:
    spec = JobSpec.from_document(_doc(cron="H 9 * * *", key="bank42:1:emi"))
    assert spec.cron == "H 9 * * *"
    with pytest.raises(InvalidJob):
        JobSpec.from_document(_doc(cron="H 99 * * *", key="bank42:2:emi"))
