"""The job document's every/anchor and cron lists: what is accepted, echoed and refused."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.spec import JobSpec
from crondepot.job.store import job_document, merged_document

TARGET = {"type": "python", "handler": "sms.send"}


def doc(**fields: Any) -> dict[str, Any]:
    return {"tz": "Asia/Kolkata", "target": TARGET, **fields}


def test_every_is_stored_in_seconds_and_anchored_by_the_store() -> None:
    spec = JobSpec.from_document(doc(every="4h"))
    assert spec.every_s == 14_400 and spec.anchor_at is None and spec.crons is None
    anchored = spec.anchored(datetime(2026, 12, 6, 6, 0, 12, 345_678, tzinfo=UTC))
    assert anchored.anchor_at == datetime(2026, 12, 6, 6, 0, 12, tzinfo=UTC)   # whole seconds
    assert anchored.cron == "@every 14400s from 2026-12-06T06:00:12+00:00"
    assert anchored.schedule_text == "every 4h from 2026-12-06T06:00:12+00:00"
    assert anchored.anchored(datetime(2030, 1, 1, tzinfo=UTC)) is anchored
    echoed = job_document(anchored)
    assert echoed["every"] == "4h" and echoed["anchor"] == "2026-12-06T06:00:12+00:00"
    assert "cron" not in echoed and "at" not in echoed
    assert JobSpec.from_document(echoed) == anchored


def test_an_anchor_is_kept_as_given_in_utc() -> None:
    spec = JobSpec.from_document(doc(every="90s", anchor="2026-12-06T11:30:00+05:30"))
    assert spec.anchor_at == datetime(2026, 12, 6, 6, 0, tzinfo=UTC)
    assert spec.cron == "@every 90s from 2026-12-06T06:00:00+00:00"


def test_a_list_of_crons_is_echoed_as_a_list() -> None:
    spec = JobSpec.from_document(doc(cron=["0 9 * * 1-5", " 0 10 * * 6 "]))
    assert spec.crons == ("0 9 * * 1-5", "0 10 * * 6")
    assert spec.cron == "0 9 * * 1-5 | 0 10 * * 6"
    assert job_document(spec)["cron"] == ["0 9 * * 1-5", "0 10 * * 6"]
    one = JobSpec.from_document(doc(cron=["0 9 * * *"]))      # a list of one stays a list
    assert one.cron == "0 9 * * *" and job_document(one)["cron"] == ["0 9 * * *"]
    assert JobSpec.from_document(doc(cron="0 9 * * *")).crons is None


def test_a_patch_from_an_interval_to_a_cron_drops_the_anchor_with_every() -> None:
    stored = job_document(JobSpec.from_document(doc(every="90s",
                                                    anchor="2026-12-06T06:00:00Z")))
    merged = merged_document(stored, {"every": None, "cron": ["0 9 * * *", "0 18 * * *"]})
    spec = JobSpec.from_document(merged)
    assert spec.every_s is None and spec.anchor_at is None and spec.crons is not None


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"every": "0s"}, "every", "at least 1 s"),
    ({"every": "1.5m"}, "every", "whole number"),
    ({"every": "90x"}, "every", "got '90x'"),
    ({"every": 90}, "every", "got int"),
    ({"every": None}, "every", "got null"),
    ({"every": "3651d"}, "every", "at most"),
    ({"cron": "0 9 * * *", "every": "90s"}, "every", "got cron and every, not both"),
    ({"every": "90s", "at": "2026-12-05T09:00:00Z"}, "at", "got every and at, not both"),
    ({"anchor": "2026-12-05T09:00:00Z", "cron": "0 9 * * *"}, "anchor", "anchor goes with every"),
    ({"every": "90s", "anchor": "tomorrow"}, "anchor", "RFC 3339"),
    ({"every": "90s", "anchor": "2026-12-05T09:00:00"}, "anchor", "with an offset"),
    ({"cron": []}, "cron", "a list of 1 to 20, got a list of 0"),
    ({"cron": ["0 9 * * *"] * 21}, "cron", "a list of 1 to 20, got a list of 21"),
    ({"cron": ["0 9 * * *", "0 9 32 * *"]}, "cron.1", "cron.1: day-of-month field"),
    ({"cron": ["0 9 * * *", 5]}, "cron.1", "non-empty string"),
    ({"cron": ["0 9 * * *", "  "]}, "cron.1", "non-empty string"),
    ({"cron": ["0 9 * * * | 0 10 * * *"]}, "cron.0", "'|' is not part of a cron"),
    ({"cron": "0 9 * * * | 0 10 * * *"}, "cron", ""),
    ({"cron": "@every 90s"}, "cron", ""),
    ({"cron": ["0 9 * * *"], "tz": "Mars/Olympus"}, "tz", "unknown time zone"),
])
def test_bad_intervals_and_lists_are_refused_naming_the_field(
        fields: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        JobSpec.from_document(doc(**fields))
    assert refused.value.field == field
    assert message in str(refused.value)
