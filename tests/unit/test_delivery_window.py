"""Delivery windows, as pure functions: where a fire lands against a window (overnight
windows, the days filter, DST gaps and repeats) and what the plan writes for it."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

from crondepot.scheduler.plan import DueJob, plan
from crondepot.timetable import Timetable
from crondepot.timetable.delivery import (
    DeliveryWindow,
    InvalidWindow,
    format_days,
    parse_days,
    parse_window,
    resolve,
)

SMS = parse_window({"from": "09:00", "to": "21:00", "days": "mon-sat"})
KOLKATA = "Asia/Kolkata"     # UTC+05:30, no DST


def _ist(*args: int) -> datetime:
    """A wall-clock time in Kolkata as an aware UTC instant."""
    return (datetime(*args) - timedelta(hours=5, minutes=30)).replace(tzinfo=UTC)


def test_a_time_inside_the_window_has_no_opening() -> None:
    assert SMS.opening(_ist(2026, 12, 7, 9, 0), KOLKATA) is None      # Monday, 09:00 sharp
    assert SMS.opening(_ist(2026, 12, 7, 20, 59), KOLKATA) is None


def test_the_closing_time_is_outside_and_defers_to_the_next_morning() -> None:
    assert SMS.opening(_ist(2026, 12, 7, 21, 0), KOLKATA) == _ist(2026, 12, 8, 9, 0)
    assert SMS.opening(_ist(2026, 12, 8, 6, 0), KOLKATA) == _ist(2026, 12, 8, 9, 0)


def test_days_filter_skips_sunday() -> None:
    # Saturday 22:00 waits until Monday 09:00: the window does not open on Sunday
    assert SMS.opening(_ist(2026, 12, 12, 22, 0), KOLKATA) == _ist(2026, 12, 14, 9, 0)
    assert SMS.opening(_ist(2026, 12, 13, 12, 0), KOLKATA) == _ist(2026, 12, 14, 9, 0)


def test_overnight_window_spans_midnight_and_days_name_the_opening_day() -> None:
    night = parse_window({"from": "22:00", "to": "06:00", "days": "fri"})
    assert night.overnight
    assert night.opening(_ist(2026, 12, 11, 23, 0), KOLKATA) is None     # Friday night
    assert night.opening(_ist(2026, 12, 12, 5, 59), KOLKATA) is None     # Saturday morning
    assert night.opening(_ist(2026, 12, 12, 6, 0), KOLKATA) == _ist(2026, 12, 18, 22, 0)
    assert night.opening(_ist(2026, 12, 11, 5, 0), KOLKATA) == _ist(2026, 12, 11, 22, 0)


def test_an_opening_in_a_dst_gap_is_the_change_instant() -> None:
    # Europe/London, 2026-03-29: 01:00 GMT jumps to 02:00 BST; 01:30 never happens
    window = parse_window({"from": "01:30", "to": "05:00"})
    before = datetime(2026, 3, 29, 0, 10, tzinfo=UTC)           # 00:10 GMT
    assert window.opening(before, "Europe/London") == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_an_opening_in_a_repeated_hour_is_its_first_pass() -> None:
    # Europe/London, 2026-10-25: 02:00 BST goes back to 01:00 GMT; 01:30 happens twice
    window = parse_window({"from": "01:30", "to": "05:00"})
    before = datetime(2026, 10, 24, 23, 0, tzinfo=UTC)          # 00:00 BST
    opens = window.opening(before, "Europe/London")
    assert opens == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)   # 01:30 BST, the first pass
    # the second pass of 01:30 is inside the same window, not a second opening
    assert window.opening(datetime(2026, 10, 25, 1, 30, tzinfo=UTC), "Europe/London") is None


def test_a_window_keeps_its_local_hours_across_a_dst_change() -> None:
    # New York: 09:00 local is 14:00 UTC in winter, 13:00 UTC after 2026-03-08
    window = parse_window({"from": "09:00", "to": "21:00"})
    late = datetime(2026, 3, 8, 3, 0, tzinfo=UTC)               # 22:00 EST on the 7th
    assert window.opening(late, "America/New_York") == datetime(2026, 3, 8, 13, 0, tzinfo=UTC)


@pytest.mark.parametrize(("text", "days"), [
    ("mon-sat", {0, 1, 2, 3, 4, 5}), ("mon,wed,fri", {0, 2, 4}), ("fri-mon", {4, 5, 6, 0}),
    ("sun", {6}), ("Mon-Fri", {0, 1, 2, 3, 4})])
def test_days_read_names_and_ranges(text: str, days: set[int]) -> None:
    assert parse_days(text) == frozenset(days)


def test_days_written_back_as_runs() -> None:
    assert format_days(frozenset({0, 1, 2, 3, 4, 5})) == "mon-sat"
    assert format_days(frozenset({0, 2, 4})) == "mon,wed,fri"


@pytest.mark.parametrize(("window", "field"), [
    ({"from": "25:00", "to": "21:00"}, "delivery_window.from"),
    ({"from": "09:00", "to": "9:00"}, "delivery_window.to"),
    ({"from": "09:00", "to": "09:00"}, "delivery_window.to"),
    ({"from": "09:00", "to": "21:00", "days": "funday"}, "delivery_window.days"),
    ({"from": "09:00", "to": "21:00", "days": "mon-"}, "delivery_window.days"),
    ({"from": "09:00", "to": "21:00", "days": None}, "delivery_window.days"),
    ({"from": "09:00", "to": "21:00", "outside": None}, "delivery_window.outside"),
    ({"from": "09:00", "to": "21:00", "outside": "later"}, "delivery_window.outside"),
    ({"from": "09:00", "to": "21:00", "until": "x"}, "delivery_window.until"),
    ({"to": "21:00"}, "delivery_window.from"),
    ("always", "delivery_window"),
])
def test_bad_windows_are_refused_naming_the_member(window: object, field: str) -> None:
    with pytest.raises(InvalidWindow) as caught:
        parse_window(window)
    assert caught.value.field == field


def test_a_jobs_own_window_wins_and_none_opts_out_of_the_tenants() -> None:
    tenant = {"from": "08:00", "to": "20:00"}
    assert resolve(None, tenant) == parse_window(tenant)
    assert resolve({"from": "09:00", "to": "21:00"}, tenant) == parse_window(
        {"from": "09:00", "to": "21:00"})
    assert resolve("none", tenant) is None
    assert resolve(None, None) is None


# --- the plan ------------------------------------------------------------------------------

DAILY_2130 = Timetable("30 21 * * *", KOLKATA)     # a reminder due at 21:30, after closing


def _next(after: datetime) -> datetime | None:
    fires = DAILY_2130.next_fires(after, 1)
    return fires[0] if fires else None


def _job(window: DeliveryWindow | None, **overrides: object) -> DueJob:
    fields: dict[str, object] = dict(
        id=7, next_nominal_at=_ist(2026, 12, 7, 21, 30), spread_offset=timedelta(0),
        catchup="all", max_catchup=1000, misfire_policy="run_late", misfire_seconds=None,
        misfire_until=None, tz=KOLKATA, window=window)
    fields.update(overrides)
    return DueJob(**fields)  # type: ignore[arg-type]


def test_defer_queues_the_fire_at_the_next_opening_with_its_nominal_run_id() -> None:
    nominal = _ist(2026, 12, 7, 21, 30)
    result = plan(_job(SMS), nominal + timedelta(seconds=1), _next)
    (run,) = result.runs
    assert run.skip_reason is None
    assert run.run_id == f"7:{int(nominal.timestamp())}"
    assert run.nominal_at == nominal and run.due_at == _ist(2026, 12, 8, 9, 0)
    assert run.deferred
    # the job itself moves on by its timetable, not by the window
    assert result.next_nominal_at == _ist(2026, 12, 8, 21, 30)


def test_spread_counts_in_the_due_time_the_window_judges() -> None:
    window = parse_window({"from": "09:00", "to": "21:45"})
    nominal = _ist(2026, 12, 7, 21, 30)
    inside = plan(_job(window, spread_offset=timedelta(minutes=10)),
                  nominal + timedelta(minutes=11), _next).runs[0]
    assert inside.due_at == nominal + timedelta(minutes=10)
    outside = plan(_job(window, spread_offset=timedelta(minutes=20)),
                   nominal + timedelta(minutes=21), _next).runs[0]
    assert outside.due_at == _ist(2026, 12, 8, 9, 0)


def test_skip_writes_the_fire_skipped_delivery_window() -> None:
    window = parse_window({"from": "09:00", "to": "21:00", "outside": "skip"})
    (run,) = plan(_job(window), _ist(2026, 12, 7, 21, 31), _next).runs
    assert run.skip_reason == "delivery_window"


def test_a_deadline_before_the_opening_ends_the_fire_skipped_by_the_misfire_rule() -> None:
    # "never after 23:00": the 21:30 reminder cannot wait for 09:00 tomorrow
    job = _job(SMS, misfire_policy="skip_after_local_time", misfire_until=time(23, 0))
    (run,) = plan(job, _ist(2026, 12, 7, 21, 31), _next).runs
    assert run.skip_reason == "misfire_local_deadline" and not run.deferred
    hours = _job(SMS, misfire_policy="skip_after", misfire_seconds=6 * 3600)
    assert plan(hours, _ist(2026, 12, 7, 21, 31), _next).runs[0].skip_reason == \
        "misfire_deadline"


def test_a_deadline_after_the_opening_is_kept_from_the_nominal_time() -> None:
    job = _job(SMS, misfire_policy="skip_after", misfire_seconds=14 * 3600)
    (run,) = plan(job, _ist(2026, 12, 7, 21, 31), _next).runs
    assert run.skip_reason is None and run.due_at == _ist(2026, 12, 8, 9, 0)
    assert run.deadline_at == _ist(2026, 12, 8, 11, 30)


def test_without_a_window_nothing_moves() -> None:
    (run,) = plan(_job(None), _ist(2026, 12, 7, 21, 31), _next).runs
    assert run.skip_reason is None and run.due_at == _ist(2026, 12, 7, 21, 30)
    assert not run.deferred
