"""Intervals (timetable/interval.py) and lists of crons (timetable/several.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable import (
    MAX_CRONS,
    Interval,
    Several,
    Timetable,
    every_seconds,
    every_text,
    expand_hash,
    schedule,
    timetable_of,
)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --- every ------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [
    ("1s", 1), ("90s", 90), ("15m", 900), ("4h", 14_400), ("1d", 86_400), ("3650d", 315_360_000),
])
def test_every_is_a_count_and_a_unit(text: str, seconds: int) -> None:
    assert every_seconds(text) == seconds


@pytest.mark.parametrize(("value", "message"), [
    ("0s", "at least 1 s"), ("1.5m", "whole number"), ("90x", "unit s, m, h or d"),
    ("", "got ''"), ("01s", "got '01s'"), (" 90s", "got ' 90s'"), ("90", "got '90'"),
    ("-5s", "got '-5s'"), ("90S", "got '90S'"), ("3651d", "at most 315360000 s"),
    (90, "got int"), (None, "got NoneType"),
])
def test_bad_every_is_refused_naming_every(value: object, message: str) -> None:
    with pytest.raises(InvalidSchedule) as refused:
        every_seconds(value)
    assert refused.value.field == "every" and message in str(refused.value)


@pytest.mark.parametrize(("seconds", "text"), [
    (90, "90s"), (120, "2m"), (5400, "90m"), (7200, "2h"), (86_400, "1d"), (90_000, "25h"),
])
def test_every_is_written_in_its_largest_whole_unit(seconds: int, text: str) -> None:
    assert every_text(seconds) == text and every_seconds(text) == seconds


# --- Interval ---------------------------------------------------------------------------


def test_an_interval_fires_at_the_anchor_plus_multiples_of_every() -> None:
    interval = Interval(90, utc(2026, 12, 6, 6, 0, 0), "Asia/Kolkata")
    assert interval.next_fires(utc(2026, 12, 6, 6, 0, 0), 3) == [
        utc(2026, 12, 6, 6, 1, 30), utc(2026, 12, 6, 6, 3, 0), utc(2026, 12, 6, 6, 4, 30)]
    # strictly after: a fire instant itself is not repeated
    assert interval.next_fires(utc(2026, 12, 6, 6, 3, 0), 1) == [utc(2026, 12, 6, 6, 4, 30)]


def test_an_anchor_in_the_future_still_fires_before_it() -> None:
    interval = Interval(3600, utc(2030, 1, 1, 0, 30), "UTC")
    assert interval.next_fires(utc(2026, 12, 6, 6, 0), 2) == [
        utc(2026, 12, 6, 6, 30), utc(2026, 12, 6, 7, 30)]


def test_an_interval_is_absolute_time_across_clock_changes() -> None:
    # London goes forward at 01:00 UTC on 2026-03-29 and back at 01:00 UTC on 2026-10-25.
    interval = Interval(3600, utc(2026, 3, 1), "Europe/London")
    fires = interval.fires_between(utc(2026, 3, 29, 0, 0), utc(2026, 3, 29, 3, 0), 9)
    assert [f.at for f in fires] == [utc(2026, 3, 29, h) for h in (1, 2, 3)]
    assert [f.local.hour for f in fires] == [2, 3, 4]       # 01:00 local never was
    assert all(f.note is None for f in fires)
    back = Interval(1800, utc(2026, 10, 1), "Europe/London").fires_between(
        utc(2026, 10, 24, 23, 59), utc(2026, 10, 25, 1, 30), 9)
    # the repeated 01:00-02:00 local hour: every half hour of it, both passes, once each
    assert [f.at for f in back] == [utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30),
                                    utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 1, 30)]
    assert [f.local.strftime("%H:%M") for f in back] == ["01:00", "01:30", "01:00", "01:30"]


def test_an_interval_reads_back_from_its_stored_text() -> None:
    interval = Interval(90, datetime(2026, 12, 6, 11, 30, tzinfo=UTC), "Asia/Kolkata")
    assert interval.cron == "@every 90s from 2026-12-06T11:30:00+00:00"
    again = timetable_of(interval.cron, "Asia/Kolkata")
    assert isinstance(again, Interval) and again.anchor == interval.anchor
    assert again.every_s == 90
    unanchored = timetable_of("@every 60s", "UTC")    # before the store anchors it: epoch
    assert unanchored.next_fires(utc(2026, 1, 1, 0, 0, 30), 1) == [utc(2026, 1, 1, 0, 1)]


@pytest.mark.parametrize("text", ["@every 0s from 2026-01-01T00:00:00+00:00", "@every 90m",
                                  "@every 90s from soon", "@every s"])
def test_a_bad_interval_text_is_refused(text: str) -> None:
    with pytest.raises(InvalidSchedule):
        timetable_of(text, "UTC")


def test_an_interval_in_a_window_is_cut_to_it() -> None:
    window = schedule("@every 3600s from 2026-01-01T00:00:00+00:00", "UTC",
                      start_at=utc(2026, 6, 1, 2, 30), end_at=utc(2026, 6, 1, 5, 0))
    assert window.next_fires(utc(2026, 1, 1), 10) == [
        utc(2026, 6, 1, 3), utc(2026, 6, 1, 4), utc(2026, 6, 1, 5)]


# --- Several ----------------------------------------------------------------------------


def test_several_crons_fire_at_the_union_once_per_instant() -> None:
    # 09:00 on weekdays and 10:00 on Saturdays, and 09:00 on Mondays again: one Monday fire
    several = Several(Timetable(c, "Asia/Kolkata")
                      for c in ("0 9 * * 1-5", "0 10 * * 6", "0 9 * * 1"))
    local = [f.local.strftime("%a %H:%M") for f in several.fires_between(
        utc(2026, 12, 6), utc(2026, 12, 14), 20)]
    assert local == ["Mon 09:00", "Tue 09:00", "Wed 09:00", "Thu 09:00", "Fri 09:00",
                     "Sat 10:00"]


def test_two_crons_moved_onto_one_change_instant_are_one_fire() -> None:
    # London skips 01:00-02:00 local on 2026-03-29: 01:30 (fixed time) moves to the change,
    # 01:00 UTC, where 02:00 BST also is: one fire, one run id.
    several = timetable_of("30 1 * * * | 0 2 * * *", "Europe/London")
    fires = several.fires_between(utc(2026, 3, 28, 12), utc(2026, 3, 29, 12), 9)
    assert [f.at for f in fires] == [utc(2026, 3, 29, 1)]
    assert fires[0].note == "moved"


def test_a_list_keeps_each_expressions_dst_rule() -> None:
    # "* 1 * * *" (wildcard) has no fire in the skipped hour; "30 1 * * *" is moved to it.
    several = timetable_of("*/20 1 * * * | 30 1 * * *", "Europe/London")
    fires = several.fires_between(utc(2026, 3, 28, 12), utc(2026, 3, 29, 12), 9)
    assert [f.at for f in fires] == [utc(2026, 3, 29, 1)]


def test_several_is_read_from_its_stored_text_with_h_per_key() -> None:
    text = "H 9 * * 1-5 | H 10 * * 6"
    several = timetable_of(text, "UTC", hash_key="bank42:1")
    assert isinstance(several, Several) and several.cron == text
    assert several.expanded == expand_hash(text, "bank42:1")
    assert several.expanded == " | ".join(
        Timetable(c, "UTC", hash_key="bank42:1").expanded for c in text.split(" | "))


def test_the_list_is_capped() -> None:
    with pytest.raises(InvalidSchedule, match=f"1 to {MAX_CRONS}"):
        Several([Timetable("0 9 * * *", "UTC")] * (MAX_CRONS + 1))
    with pytest.raises(InvalidSchedule, match="1 to"):
        Several([])


def test_fires_after_refuses_a_naive_instant() -> None:
    for table in (timetable_of("0 9 * * * | 0 10 * * *", "UTC"),
                  timetable_of("@every 60s", "UTC")):
        with pytest.raises(ValueError, match="aware"):
            table.fires_after(datetime(2026, 1, 1))
