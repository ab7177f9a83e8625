"""The chaos model of the schedule rules' jobs (calendar, delivery window, overlap skip)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from crondepot.job.spec import JobSpec
from crondepot.timetable import run_id
from crondepot_testkit import chaos_model


def _at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 1, 1, 23, minute, second, tzinfo=UTC)


def _job(rule: str, tz: str = "UTC", **fields: object) -> chaos_model.Job:
    spec = JobSpec.from_document({
        "key": f"{rule}-0", "cron": "* * * * *", "tz": tz,
        "target": {"type": "http", "url": "http://127.0.0.1:9/sms"}})
    return chaos_model.Job(11, spec, rule, "dedupe", _at(0), rule=rule,
                           **fields)  # type: ignore[arg-type]


def test_a_calendar_holding_the_local_date_skips_every_fire_and_owes_no_call() -> None:
    # 23:00 UTC on 1 January is 04:30 on the 2nd in Kolkata: the zone's date is what counts.
    kolkata = _job("calendar", "Asia/Kolkata", holidays=frozenset({date(2026, 1, 2)}))
    assert {f.state for f in chaos_model.job_fires(kolkata, _at(5))} == {"calendar"}
    assert chaos_model.expected_runs([kolkata], _at(6).timestamp()) == []
    utc = _job("calendar", "UTC", holidays=frozenset({date(2026, 1, 2)}))
    assert {f.state for f in chaos_model.job_fires(utc, _at(5))} == {"run"}


def test_fires_before_the_window_opens_are_due_at_the_opening_the_others_at_their_time() -> None:
    job = _job("window", opening=_at(3))
    fires = chaos_model.job_fires(job, _at(5))
    assert [(f.due, f.deferred) for f in fires] == [
        (_at(3).timestamp(), True)] * 3 + [(_at(3).timestamp(), False),
                                           (_at(4).timestamp(), False),
                                           (_at(5).timestamp(), False)]
    expected = chaos_model.expected_runs([job], _at(4).timestamp())
    assert [e.run_id for e in expected] == [run_id(11, _at(m)) for m in range(4)]
    assert all(e.may_skip is None for e in expected)


def test_an_overlap_skip_fire_is_owed_a_run_or_an_overlap_skip() -> None:
    job = _job("overlap")
    assert {f.state for f in chaos_model.job_fires(job, _at(2))} == {"run-or-overlap"}
    assert {e.may_skip for e in chaos_model.expected_runs([job], _at(3).timestamp())} == {
        "overlap"}


def test_calls_in_flight_at_once_are_found_and_back_to_back_calls_are_not() -> None:
    start = _at(0).timestamp()
    back_to_back = [("11:1", start, start + 70), ("11:3", start + 70, start + 140),
                    ("11:2", start + 60, start + 60)]     # a 503: answered at once, inside
    assert chaos_model.overlapping_calls(back_to_back) == [("11:1", "11:2")]
    assert chaos_model.overlapping_calls([c for c in back_to_back if c[0] != "11:2"]) == []
    assert chaos_model.overlapping_calls([("11:1", start, start + 70),
                                          ("11:1", start + 69, start + 69.5)]) == [
        ("11:1", "11:1")]


def test_calls_before_the_opening() -> None:
    opening = _at(3).timestamp()
    assert chaos_model.calls_before([("a", opening - 0.1), ("b", opening)], opening) == ["a"]
