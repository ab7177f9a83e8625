"""Schedules beyond cron in the job document (at, start_at, end_at, max_runs) and the
Schedule they make: what is accepted, what is refused (naming the field), and the window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.spec import JobSpec
from crondepot.job.store import job_document
from crondepot.scheduler.plan import DueJob, plan
from crondepot.timetable import Schedule, schedule

TARGET = {"type": "python", "handler": "sms.send"}


def doc(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"tz": "Asia/Kolkata", "target": TARGET}
    return {**base, **fields}


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --- accepted -------------------------------------------------------------------------


def test_at_is_read_as_an_instant_in_utc() -> None:
    spec = JobSpec.from_document(doc(at="2026-12-05T09:00:00+05:30"))
    assert spec.cron is None and spec.at == utc(2026, 12, 5, 3, 30)
    assert spec.schedule_text == "at 2026-12-05T03:30:00+00:00"


@pytest.mark.parametrize("text", ["2026-12-05T03:30:00Z", "2026-12-05t03:30:00z",
                                  "2026-12-05 03:30:00+00:00", "2026-12-05T03:30:00.000000Z",
                                  "2026-12-04T22:00:00-05:30"])
def test_rfc3339_spellings_of_one_instant(text: str) -> None:
    assert JobSpec.from_document(doc(at=text)).at == utc(2026, 12, 5, 3, 30)


def test_a_window_and_max_runs_round_trip_through_the_stored_document() -> None:
    spec = JobSpec.from_document(doc(cron="0 9 L * *", start_at="2026-01-01T00:00:00Z",
                                     end_at="2026-12-31T23:59:59+05:30", max_runs=12))
    stored = job_document(spec)
    assert "at" not in stored and stored["cron"] == "0 9 L * *"
    assert stored["start_at"] == "2026-01-01T00:00:00+00:00"
    assert stored["end_at"] == "2026-12-31T18:29:59+00:00" and stored["max_runs"] == 12
    assert JobSpec.from_document(stored) == spec
    at_doc = job_document(JobSpec.from_document(doc(at="2026-12-05T09:00:00+05:30")))
    assert "cron" not in at_doc and at_doc["at"] == "2026-12-05T03:30:00+00:00"


# --- refused, naming the field ----------------------------------------------------------


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({}, "cron", "give one of cron (a repeating schedule), every (an interval) or at (one run "
                 "at an instant): one of them is required"),
    ({"cron": "0 9 * * *", "at": "2026-12-05T09:00:00Z"}, "at", "not both"),
    ({"at": "2026-12-05"}, "at", "expected at to be an RFC 3339 date-time with an offset"),
    ({"at": "2026-12-05T09:00:00"}, "at", "with an offset"),
    ({"at": "2026-12-05T09:00Z"}, "at", "with an offset"),
    ({"at": "2026-02-30T09:00:00Z"}, "at", "is not a real date-time"),
    ({"at": "2026-12-05T24:00:00Z"}, "at", "is not a real date-time"),
    ({"at": "２０２６-12-05T09:00:00Z"}, "at", "RFC 3339"),
    ({"at": 1764900000}, "at", "expected at to be an RFC 3339 date-time string"),
    ({"at": None, "cron": "0 9 * * *"}, "at", "got null"),
    ({"cron": None, "at": "2026-12-05T09:00:00Z"}, "cron", "non-empty string, got null"),
    ({"at": ""}, "at", "RFC 3339"),
    ({"at": "9999-12-31T23:59:59-01:00"}, "at", "out of range"),
    ({"cron": "0 9 * * *", "start_at": "soon"}, "start_at", "RFC 3339"),
    ({"cron": "0 9 * * *", "end_at": True}, "end_at", "RFC 3339 date-time string"),
    ({"cron": "0 9 * * *", "start_at": "2026-02-01T00:00:00Z",
      "end_at": "2026-02-01T00:00:00Z"}, "end_at", "must be after start_at"),
    ({"at": "2026-12-05T09:00:00Z", "end_at": "2026-12-01T00:00:00Z"}, "at",
     "outside the window"),
    ({"cron": "0 9 * * *", "max_runs": 0}, "max_runs", "integer from 1 to 1000000, got 0"),
    ({"cron": "0 9 * * *", "max_runs": 1_000_001}, "max_runs", "got 1000001"),
    ({"cron": "0 9 * * *", "max_runs": "12"}, "max_runs", "to be an integer, got a string"),
    ({"cron": "0 9 * * *", "max_runs": True}, "max_runs", "to be an integer, got a boolean"),
    ({"cron": "0 9 32 * *"}, "cron", "day-of-month field"),
    ({"cron": "0 9 * * 1#6"}, "cron", "n in D#n must be 1 to 5"),
    ({"at": "2026-12-05T09:00:00Z", "tz": "Mars/Olympus"}, "tz", "unknown time zone"),
])
def test_bad_schedules_are_refused_naming_the_field(fields: dict[str, Any], field: str,
                                                     message: str) -> None:
    with pytest.raises(InvalidJob) as refused:
        JobSpec.from_document(doc(**fields))
    assert refused.value.field == field
    assert message in str(refused.value)


# --- the Schedule ---------------------------------------------------------------------------


def test_the_window_is_inclusive_at_both_ends() -> None:
    table = schedule("0 * * * *", "UTC", start_at=utc(2026, 1, 1, 10), end_at=utc(2026, 1, 1, 12))
    assert table.next_fires(utc(2026, 1, 1), 10) == [utc(2026, 1, 1, h) for h in (10, 11, 12)]
    assert table.end_reason == "end_at"
    assert table.next_fires(utc(2026, 1, 1, 12), 1) == []


def test_start_at_between_fires_starts_at_the_next_one() -> None:
    table = schedule("0 9 L * *", "Asia/Kolkata", start_at=utc(2026, 2, 1))
    assert table.next_fires(utc(2025, 1, 1), 2) == [utc(2026, 2, 28, 3, 30),
                                                    utc(2026, 3, 31, 3, 30)]


def test_an_at_schedule_has_one_fire_then_completes() -> None:
    at = utc(2026, 12, 5, 3, 30)
    table = Schedule(None, "Asia/Kolkata", at=at)
    (fire,) = table.fires_after(utc(2026, 1, 1))
    assert fire.at == at and fire.local.hour == 9 and fire.note is None
    assert table.next_fires(at, 1) == [] and table.next_fires(at - timedelta(seconds=1), 5) == [at]
    assert table.end_reason == "completed"


def _due(nominal: datetime) -> DueJob:
    return DueJob(id=7, next_nominal_at=nominal, spread_offset=timedelta(0), catchup="latest",
                  max_catchup=1000, misfire_policy="run_late", misfire_seconds=None,
                  misfire_until=None, tz="UTC")


def test_max_runs_counts_skipped_fires_and_ends_the_job() -> None:
    table = schedule("0 * * * *", "UTC")

    def next_fire(after: datetime) -> datetime | None:
        fires = table.next_fires(after, 1)
        return fires[0] if fires else None

    # five fires are due after an outage, catch-up latest: with 3 left, three are written
    # (two skipped, one queued) and the job ends there.
    result = plan(_due(utc(2026, 1, 1, 1)), utc(2026, 1, 1, 5, 30), next_fire, remaining=3)
    assert [r.nominal_at.hour for r in result.runs] == [1, 2, 3]
    assert [r.skip_reason for r in result.runs] == ["catchup_latest", "catchup_latest", None]
    assert result.ended == "max_runs" and result.next_nominal_at is None
    more = plan(_due(utc(2026, 1, 1, 1)), utc(2026, 1, 1, 5, 30), next_fire, remaining=9)
    assert len(more.runs) == 5 and more.ended is None


def test_a_plan_past_the_last_fire_says_why_the_job_ends() -> None:
    table = schedule("0 * * * *", "UTC", end_at=utc(2026, 1, 1, 2))

    def next_fire(after: datetime) -> datetime | None:
        fires = table.next_fires(after, 1)
        return fires[0] if fires else None

    result = plan(_due(utc(2026, 1, 1, 1)), utc(2026, 1, 1, 9), next_fire,
                  end_reason=table.end_reason)
    assert len(result.runs) == 2 and result.ended == "end_at"
