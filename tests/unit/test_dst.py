"""Zones and clock changes: gaps, repeated hours, odd offsets, and where ``after`` falls.

Every expected instant below was worked out by hand from the zone's published rule; the
``test_zone_data_*`` tests pin the rules themselves, so a tzdata change shows up there.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from itertools import islice
from zoneinfo import ZoneInfo

import pytest

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable import Fire, Timetable, next_fires, validate_zone
from crondepot.timetable.zone import Kind, place, wall_clock_start

NY = "America/New_York"
LORD_HOWE = "Australia/Lord_Howe"


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def fires(cron: str, tz: str, after: datetime, count: int) -> list[Fire]:
    return list(islice(Timetable(cron, tz).fires_after(after), count))


def instants(cron: str, tz: str, after: datetime, count: int) -> list[datetime]:
    return next_fires(cron, tz, after, count)


def notes(found: list[Fire]) -> list[str | None]:
    return [fire.note for fire in found]


# --- zone data the expectations rely on -------------------------------------------------


@pytest.mark.parametrize(
    ("tz", "instant", "before", "after"),
    [
        (NY, utc(2026, 3, 8, 7), timedelta(hours=-5), timedelta(hours=-4)),
        (NY, utc(2026, 11, 1, 6), timedelta(hours=-4), timedelta(hours=-5)),
        ("Europe/London", utc(2026, 3, 29, 1), timedelta(0), timedelta(hours=1)),
        ("Europe/London", utc(2026, 10, 25, 1), timedelta(hours=1), timedelta(0)),
        (LORD_HOWE, utc(2026, 4, 4, 15), timedelta(hours=11), timedelta(hours=10.5)),
        (LORD_HOWE, utc(2026, 10, 3, 15, 30), timedelta(hours=10.5), timedelta(hours=11)),
        ("America/Santiago", utc(2026, 4, 5, 3), timedelta(hours=-3), timedelta(hours=-4)),
        ("America/Santiago", utc(2026, 9, 6, 4), timedelta(hours=-4), timedelta(hours=-3)),
        ("Pacific/Chatham", utc(2026, 4, 4, 14), timedelta(hours=13.75), timedelta(hours=12.75)),
        ("Antarctica/Troll", utc(2026, 3, 29, 1), timedelta(0), timedelta(hours=2)),
        ("Antarctica/Troll", utc(2026, 10, 25, 1), timedelta(hours=2), timedelta(0)),
    ],
)  # fmt: skip
def test_zone_data_changes_where_the_tests_expect(
    tz: str, instant: datetime, before: timedelta, after: timedelta
) -> None:
    zone = ZoneInfo(tz)
    assert (instant - timedelta(seconds=1)).astimezone(zone).utcoffset() == before
    assert instant.astimezone(zone).utcoffset() == after


# --- validate_zone ------------------------------------------------------------------


def test_validate_zone_returns_the_zone() -> None:
    assert validate_zone("Asia/Kolkata") == ZoneInfo("Asia/Kolkata")
    assert validate_zone("UTC") is validate_zone("UTC")  # cached


@pytest.mark.parametrize(("tz", "hint"), [
    ("Europe/Berlinn", "; did you mean 'Europe/Berlin'?"),
    ("europe/london", "; did you mean 'Europe/London'?"),
    ("utc", "; did you mean 'UTC'?"),
    ("Amerca/New_York", "; did you mean 'America/New_York'?"),
    ("America/Sao_Paolo", "; did you mean 'America/Sao_Paulo'?"),
    ("Mars/Olympus", ""),
    ("Europe/" + "x" * 60, ""),
])
def test_a_near_miss_names_the_zone_meant(tz: str, hint: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        validate_zone(tz)
    assert str(caught.value) == f"tz: unknown time zone {tz!r}{hint}"


@pytest.mark.parametrize(
    ("tz", "message"),
    [
        ("Mars/Olympus", "tz: unknown time zone 'Mars/Olympus'"),
        ("", "tz: the time zone is empty"),
        ("   ", "tz: the time zone is empty"),
        ("../../etc/passwd", "tz: unknown time zone '../../etc/passwd'"),
        ("/etc/localtime", "tz: unknown time zone '/etc/localtime'"),
        ("Europe/", "tz: unknown time zone 'Europe/'"),
        (" UTC", "tz: unknown time zone ' UTC'"),
        (None, "tz: expected an IANA time zone name"),
        (5, "tz: expected an IANA time zone name like 'Europe/London', got int"),
    ],
)
def test_bad_zones_are_refused_naming_tz(tz: object, message: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        validate_zone(tz)
    assert caught.value.field == "tz"
    assert message in str(caught.value)
    with pytest.raises(InvalidSchedule) as caught:
        Timetable("0 9 * * *", tz)  # type: ignore[arg-type]
    assert caught.value.field == "tz"


# --- America/New_York: repeated hour (2026-11-01 01:00-02:00) ------------------------


def test_fixed_time_in_the_repeated_hour_fires_once() -> None:
    found = fires("30 1 * * *", NY, utc(2026, 10, 31, 12), 3)
    assert [fire.at for fire in found] == [
        utc(2026, 11, 1, 5, 30),
        utc(2026, 11, 2, 6, 30),
        utc(2026, 11, 3, 6, 30),
    ]
    assert notes(found) == ["repeated-once", None, None]
    assert found[0].local == datetime(2026, 11, 1, 1, 30, tzinfo=ZoneInfo(NY))
    assert found[0].local.utcoffset() == timedelta(hours=-4)  # the first pass


def test_wildcard_fires_in_both_passes_of_the_repeated_hour() -> None:
    found = Timetable("*/15 * * * *", NY).fires_between(
        utc(2026, 11, 1, 4, 59), utc(2026, 11, 1, 6, 45), 100
    )
    assert [fire.at for fire in found] == [
        utc(2026, 11, 1, 5, 0) + timedelta(minutes=15 * i) for i in range(8)
    ]
    walls = [fire.local.replace(tzinfo=None) for fire in found]
    first_pass = [datetime(2026, 11, 1, 1, 15 * i) for i in range(4)]
    assert walls == first_pass + first_pass
    assert notes(found) == [None] * 4 + ["second-pass"] * 4
    assert all(fire.scheduled_local == wall for fire, wall in zip(found, walls, strict=True))


def test_wildcard_minute_every_minute_of_the_repeated_hour_fires_in_both_passes() -> None:
    # cronie: "* 1 * * *" is a wildcard job (MIN_STAR), so the repeated hour runs it again.
    found = fires("* 1 * * *", NY, utc(2026, 11, 1, 4, 59), 121)
    assert [fire.at for fire in found[:120]] == [
        utc(2026, 11, 1, 5) + timedelta(minutes=i) for i in range(120)
    ]
    assert set(notes(found[:60])) == {None}
    assert set(notes(found[60:120])) == {"second-pass"}
    assert found[120].at == utc(2026, 11, 2, 6)


def test_fixed_time_every_listed_minute_of_the_repeated_hour_fires_on_the_first_pass_only() -> None:
    found = fires("0-59 1 * * *", NY, utc(2026, 11, 1, 4, 59), 61)
    assert [fire.at for fire in found[:60]] == [
        utc(2026, 11, 1, 5) + timedelta(minutes=i) for i in range(60)
    ]
    assert set(notes(found[:60])) == {"repeated-once"}
    assert found[60].at == utc(2026, 11, 2, 6)


def test_step_hour_job_fires_in_both_passes() -> None:
    found = fires("0 1-5/2 * * *", NY, utc(2026, 11, 1, 4), 4)
    assert [fire.at for fire in found] == [
        utc(2026, 11, 1, 5),  # 01:00 EDT
        utc(2026, 11, 1, 6),  # 01:00 EST
        utc(2026, 11, 1, 8),  # 03:00 EST
        utc(2026, 11, 1, 10),  # 05:00 EST
    ]
    assert notes(found) == [None, "second-pass", None, None]


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (utc(2026, 11, 1, 5, 10), [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]),  # 1st pass
        (utc(2026, 11, 1, 5, 30), [utc(2026, 11, 2, 6, 30)]),  # at the fire itself
        (utc(2026, 11, 1, 5, 40), [utc(2026, 11, 2, 6, 30)]),  # first pass, after the fire
        (utc(2026, 11, 1, 6, 10), [utc(2026, 11, 2, 6, 30)]),  # second pass, before 01:30
        (utc(2026, 11, 1, 6, 40), [utc(2026, 11, 2, 6, 30)]),  # second pass, after 01:30
    ],
)
def test_fixed_time_with_after_inside_the_repeated_hour(
    after: datetime, expected: list[datetime]
) -> None:
    assert instants("30 1 * * *", NY, after, len(expected)) == expected


@pytest.mark.parametrize(
    ("after", "first_expected"),
    [
        (utc(2026, 11, 1, 5, 40), utc(2026, 11, 1, 5, 45)),  # first pass at 01:40 EDT
        (utc(2026, 11, 1, 5, 45), utc(2026, 11, 1, 6, 0)),  # exactly on a first-pass fire
        (utc(2026, 11, 1, 6, 10), utc(2026, 11, 1, 6, 15)),  # second pass at 01:10 EST
        (utc(2026, 11, 1, 6, 0, 0, 1), utc(2026, 11, 1, 6, 15)),  # a microsecond in
    ],
)
def test_wildcard_with_after_inside_the_repeated_hour(
    after: datetime, first_expected: datetime
) -> None:
    found = instants("*/15 * * * *", NY, after, 8)
    assert found[0] == first_expected
    assert found == [first_expected + timedelta(minutes=15 * i) for i in range(8)]


def test_wall_clock_start_steps_back_one_shift_in_a_first_pass_only() -> None:
    zone = ZoneInfo(NY)
    first_pass = datetime(2026, 11, 1, 5, 40)  # 01:40 EDT, naive UTC
    assert wall_clock_start(zone, first_pass) == datetime(2026, 11, 1, 0, 40)
    second_pass = datetime(2026, 11, 1, 6, 40)  # 01:40 EST
    assert wall_clock_start(zone, second_pass) == datetime(2026, 11, 1, 1, 40)
    ordinary = datetime(2026, 6, 1, 12)
    assert wall_clock_start(zone, ordinary) == datetime(2026, 6, 1, 8)


# --- America/New_York: gap (2026-03-08 02:00-03:00) ----------------------------------


def test_fixed_time_in_the_gap_fires_at_the_change() -> None:
    found = fires("30 2 * * *", NY, utc(2026, 3, 7, 12), 2)
    assert [fire.at for fire in found] == [utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)]
    assert notes(found) == ["moved", None]
    assert found[0].local.replace(tzinfo=None) == datetime(2026, 3, 8, 3, 0)
    assert found[0].scheduled_local == datetime(2026, 3, 8, 2, 30)


@pytest.mark.parametrize(
    ("cron", "then"),
    [
        ("0,30 2 * * *", utc(2026, 3, 9, 6)),
        ("0 2,3 * * *", utc(2026, 3, 9, 6)),
        ("0-59 2 * * *", utc(2026, 3, 9, 6)),
        ("0 2,3,4 * * *", utc(2026, 3, 8, 8)),
    ],
)
def test_several_gap_times_and_the_change_instant_merge(cron: str, then: datetime) -> None:
    found = fires(cron, NY, utc(2026, 3, 7, 12), 2)
    assert [fire.at for fire in found] == [utc(2026, 3, 8, 7), then]
    assert found[0].note == "merged"
    assert found[0].scheduled_local == datetime(2026, 3, 8, 2, 0)


def test_wildcard_has_no_fire_in_the_gap() -> None:
    found = Timetable("*/15 * * * *", NY).fires_between(utc(2026, 3, 8, 6), utc(2026, 3, 8, 8), 100)
    assert [fire.at for fire in found] == [
        utc(2026, 3, 8, 6) + timedelta(minutes=15 * i) for i in range(1, 9)
    ]
    assert all(fire.local.hour != 2 for fire in found)
    assert set(notes(found)) == {None}


def test_wildcard_minute_fixed_hour_skips_to_its_next_real_time() -> None:
    assert instants("30 * * * *", NY, utc(2026, 3, 8, 6), 2) == [
        utc(2026, 3, 8, 6, 30),  # 01:30 EST
        utc(2026, 3, 8, 7, 30),  # 03:30 EDT; 02:30 did not happen
    ]
    assert instants("0 */2 * * *", NY, utc(2026, 3, 8, 4), 2) == [
        utc(2026, 3, 8, 5),  # 00:00 EST
        utc(2026, 3, 8, 8),  # 04:00 EDT; 02:00 did not happen
    ]


@pytest.mark.parametrize(
    ("after", "expected"),
    [
        (utc(2026, 3, 8, 6, 30), utc(2026, 3, 8, 7)),
        (utc(2026, 3, 8, 6, 59, 59), utc(2026, 3, 8, 7)),
        (utc(2026, 3, 8, 7), utc(2026, 3, 9, 6, 30)),  # at the change: the moved fire is past
        (utc(2026, 3, 8, 7, 0, 1), utc(2026, 3, 9, 6, 30)),
    ],
)
def test_after_just_around_the_gap(after: datetime, expected: datetime) -> None:
    assert instants("30 2 * * *", NY, after, 1) == [expected]


def test_after_in_another_zone_means_the_same_instant() -> None:
    in_utc = instants("30 1 * * *", NY, utc(2026, 11, 1, 5, 10), 3)
    kolkata = timezone(timedelta(hours=5, minutes=30))
    in_kolkata = instants("30 1 * * *", NY, datetime(2026, 11, 1, 10, 40, tzinfo=kolkata), 3)
    in_ny = datetime(2026, 11, 1, 1, 10, tzinfo=ZoneInfo(NY))
    assert in_utc == in_kolkata == instants("30 1 * * *", NY, in_ny, 3)


# --- Europe/London ---------------------------------------------------------------------


def test_london_spring_gap() -> None:
    found = fires("30 1 * * *", "Europe/London", utc(2026, 3, 28, 12), 2)
    assert [fire.at for fire in found] == [utc(2026, 3, 29, 1), utc(2026, 3, 30, 0, 30)]
    assert notes(found) == ["moved", None]


def test_london_autumn_repeat() -> None:
    found = fires("30 1 * * *", "Europe/London", utc(2026, 10, 24, 12), 2)
    assert [fire.at for fire in found] == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
    assert notes(found) == ["repeated-once", None]
    wild = fires("*/30 * * * *", "Europe/London", utc(2026, 10, 24, 23, 59), 5)
    assert [fire.at for fire in wild] == [
        utc(2026, 10, 25, 0),
        utc(2026, 10, 25, 0, 30),
        utc(2026, 10, 25, 1),
        utc(2026, 10, 25, 1, 30),
        utc(2026, 10, 25, 2),
    ]
    assert notes(wild) == [None, None, "second-pass", "second-pass", None]


# --- Australia/Lord_Howe: 30-minute shifts -----------------------------------------------


def test_lord_howe_repeat_of_thirty_minutes() -> None:
    found = fires("45 1 * * *", "Australia/Lord_Howe", utc(2026, 4, 4), 2)
    assert [fire.at for fire in found] == [utc(2026, 4, 4, 14, 45), utc(2026, 4, 5, 15, 15)]
    assert notes(found) == ["repeated-once", None]
    wild = fires("*/15 * * * *", "Australia/Lord_Howe", utc(2026, 4, 4, 14, 20), 5)
    assert [fire.at for fire in wild] == [
        utc(2026, 4, 4, 14, 30),  # 01:30 +11
        utc(2026, 4, 4, 14, 45),  # 01:45 +11
        utc(2026, 4, 4, 15, 0),  # 01:30 +10:30
        utc(2026, 4, 4, 15, 15),  # 01:45 +10:30
        utc(2026, 4, 4, 15, 30),  # 02:00 +10:30
    ]
    assert notes(wild) == [None, None, "second-pass", "second-pass", None]


def test_lord_howe_gap_of_thirty_minutes() -> None:
    moved = fires("15 2 * * *", "Australia/Lord_Howe", utc(2026, 10, 3), 2)
    assert [fire.at for fire in moved] == [utc(2026, 10, 3, 15, 30), utc(2026, 10, 4, 15, 15)]
    assert notes(moved) == ["moved", None]
    assert moved[0].local.replace(tzinfo=None) == datetime(2026, 10, 4, 2, 30)
    merged = fires("0,30 2 * * *", "Australia/Lord_Howe", utc(2026, 10, 3), 2)
    assert [fire.at for fire in merged] == [utc(2026, 10, 3, 15, 30), utc(2026, 10, 4, 15)]
    assert notes(merged) == ["merged", None]
    wild = instants("*/15 * * * *", "Australia/Lord_Howe", utc(2026, 10, 3, 15), 3)
    assert wild == [utc(2026, 10, 3, 15, 15), utc(2026, 10, 3, 15, 30), utc(2026, 10, 3, 15, 45)]


def test_the_change_instant_is_exact_to_the_second() -> None:
    zone = ZoneInfo("Australia/Lord_Howe")
    placement = place(zone, datetime(2026, 10, 4, 2, 15))
    assert placement.kind is Kind.SKIPPED
    assert placement.first == datetime(2026, 10, 3, 15, 30)
    repeated = place(zone, datetime(2026, 4, 5, 1, 45))
    assert repeated.kind is Kind.REPEATED
    assert (repeated.first, repeated.second) == (
        datetime(2026, 4, 4, 14, 45),
        datetime(2026, 4, 4, 15, 15),
    )


# --- other offsets and shifts ------------------------------------------------------------


def test_kolkata_has_no_dst_and_a_half_hour_offset() -> None:
    found = fires("0 9 * * *", "Asia/Kolkata", utc(2026, 6, 1), 2)
    assert [fire.at for fire in found] == [utc(2026, 6, 1, 3, 30), utc(2026, 6, 2, 3, 30)]
    assert notes(found) == [None, None]


def test_kathmandu_quarter_hour_offset() -> None:
    assert instants("0 9 * * *", "Asia/Kathmandu", utc(2026, 6, 1), 1) == [utc(2026, 6, 1, 3, 15)]
    assert instants("*/15 * * * *", "Asia/Kathmandu", utc(2026, 6, 1), 2) == [
        utc(2026, 6, 1, 0, 15),  # 06:00 +05:45
        utc(2026, 6, 1, 0, 30),
    ]


def test_santiago_changes_at_midnight() -> None:
    gap = fires("0 0 * * *", "America/Santiago", utc(2026, 9, 5, 12), 2)
    assert [fire.at for fire in gap] == [utc(2026, 9, 6, 4), utc(2026, 9, 7, 3)]
    assert notes(gap) == ["moved", None]
    repeat = fires("30 23 * * *", "America/Santiago", utc(2026, 4, 4, 12), 2)
    assert [fire.at for fire in repeat] == [utc(2026, 4, 5, 2, 30), utc(2026, 4, 6, 3, 30)]
    assert notes(repeat) == ["repeated-once", None]


def test_chatham_forty_five_minute_offsets() -> None:
    found = fires("0 3 * * *", "Pacific/Chatham", utc(2026, 4, 4), 2)
    assert [fire.at for fire in found] == [utc(2026, 4, 4, 13, 15), utc(2026, 4, 5, 14, 15)]
    assert notes(found) == ["repeated-once", None]


def test_troll_two_hour_gap_and_repeat() -> None:
    troll = "Antarctica/Troll"
    moved = fires("30 1 * * *", troll, utc(2026, 3, 28, 12), 2)
    assert [(fire.at, fire.note) for fire in moved] == [
        (utc(2026, 3, 29, 1), "moved"),
        (utc(2026, 3, 29, 23, 30), None),  # 01:30 +02 on the 30th
    ]
    merged = fires("0 1,2,3 * * *", troll, utc(2026, 3, 28, 12), 1)
    assert [(fire.at, fire.note) for fire in merged] == [(utc(2026, 3, 29, 1), "merged")]
    wild = fires("*/30 * * * *", troll, utc(2026, 10, 24, 22, 59), 9)
    assert [fire.at for fire in wild] == [
        utc(2026, 10, 24, 23) + timedelta(minutes=30 * i) for i in range(9)
    ]
    assert notes(wild) == [None] * 4 + ["second-pass"] * 4 + [None]
    once = fires("30 2 * * *", troll, utc(2026, 10, 24, 12), 2)
    assert [(fire.at, fire.note) for fire in once] == [
        (utc(2026, 10, 25, 0, 30), "repeated-once"),
        (utc(2026, 10, 26, 2, 30), None),
    ]


def test_a_whole_skipped_day_collapses_into_one_fire() -> None:
    # Pacific/Apia skipped 2011-12-30 entirely, jumping from -10:00 to +14:00.
    found = fires("0 9 * * *", "Pacific/Apia", utc(2011, 12, 29, 12), 3)
    assert [(fire.at, fire.note) for fire in found] == [
        (utc(2011, 12, 29, 19), None),  # 09:00 -10 on the 29th
        (utc(2011, 12, 30, 10), "moved"),  # the 30th's 09:00 never happened
        (utc(2011, 12, 30, 19), None),  # 09:00 +14 on the 31st
    ]
    merged = fires("0 9,17 * * *", "Pacific/Apia", utc(2011, 12, 30, 4), 1)
    assert [(fire.at, fire.note) for fire in merged] == [(utc(2011, 12, 30, 10), "merged")]
    wild = instants("0 */6 * * *", "Pacific/Apia", utc(2011, 12, 30, 1), 3)
    assert wild == [utc(2011, 12, 30, 4), utc(2011, 12, 30, 10), utc(2011, 12, 30, 16)]


def test_leap_day_fires_on_leap_years_only() -> None:
    assert instants("0 0 29 2 *", "UTC", utc(2026, 1, 1), 3) == [
        utc(2028, 2, 29),
        utc(2032, 2, 29),
        utc(2036, 2, 29),
    ]
    found = fires("0 0 29 2 *", NY, utc(2026, 1, 1), 1)
    assert found[0].local.replace(tzinfo=None) == datetime(2028, 2, 29)
    assert found[0].at == utc(2028, 2, 29, 5)
    # 2100 is not a leap year: 2096 is followed by 2104.
    assert instants("0 0 29 2 *", "UTC", utc(2097, 1, 1), 1) == [utc(2104, 2, 29)]


# --- the end of time and loop bounds ----------------------------------------------------


def test_the_stream_ends_at_the_end_of_the_calendar() -> None:
    assert instants("0 0 * * *", "UTC", utc(9999, 12, 30, 12), 5) == [utc(9999, 12, 31)]
    assert instants("0 0 29 2 *", "UTC", utc(9997, 1, 1), 5) == []


# --- API shape ------------------------------------------------------------------------


def test_fire_is_a_frozen_keyword_only_record() -> None:
    fire = fires("0 9 * * *", "Asia/Kolkata", utc(2026, 6, 1), 1)[0]
    assert fire.at.tzinfo is UTC
    assert fire.local.tzinfo == ZoneInfo("Asia/Kolkata")
    assert fire.local == fire.at
    with pytest.raises(dataclasses.FrozenInstanceError):
        fire.note = "moved"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Fire(fire.at, fire.local, fire.scheduled_local, None)  # type: ignore[call-arg]


def test_next_fires_returns_aware_utc() -> None:
    found = next_fires("0 9 * * *", "Asia/Kolkata", utc(2026, 6, 1), 3)
    assert all(moment.tzinfo is UTC for moment in found)


def test_next_fires_argument_checks() -> None:
    with pytest.raises(ValueError, match="after must be an aware datetime"):
        next_fires("0 9 * * *", "UTC", datetime(2026, 1, 1), 1)
    with pytest.raises(ValueError, match="count must be 0 or more, got -1"):
        next_fires("0 9 * * *", "UTC", utc(2026, 1, 1), -1)
    with pytest.raises(TypeError, match="count must be an int"):
        next_fires("0 9 * * *", "UTC", utc(2026, 1, 1), 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="after must be a datetime"):
        next_fires("0 9 * * *", "UTC", "2026-01-01", 1)  # type: ignore[arg-type]
    assert next_fires("0 9 * * *", "UTC", utc(2026, 1, 1), 0) == []
    with pytest.raises(ValueError, match="after must be an aware"):
        next_fires("0 9 * * *", "UTC", datetime(2026, 1, 1), 0)


def test_fires_after_checks_after_at_the_call() -> None:
    table = Timetable("0 9 * * *", "UTC")
    with pytest.raises(ValueError, match="naive"):
        table.fires_after(datetime(2026, 1, 1))


def test_fires_between_is_half_open_and_bounded() -> None:
    table = Timetable("0 * * * *", "UTC")
    found = table.fires_between(utc(2026, 1, 1, 0), utc(2026, 1, 1, 5), 100)
    assert [fire.at for fire in found] == [utc(2026, 1, 1, hour) for hour in range(1, 6)]
    limited = table.fires_between(utc(2026, 1, 1, 0), utc(2026, 1, 1, 5), 2)
    assert [fire.at for fire in limited] == [utc(2026, 1, 1, 1), utc(2026, 1, 1, 2)]
    assert table.fires_between(utc(2026, 1, 1, 5), utc(2026, 1, 1, 5), 10) == []
    assert table.fires_between(utc(2026, 1, 1, 5), utc(2026, 1, 1, 1), 10) == []
    assert table.fires_between(utc(2026, 1, 1, 0), utc(2026, 1, 1, 5), 0) == []
    with pytest.raises(ValueError, match="until must be an aware"):
        table.fires_between(utc(2026, 1, 1), datetime(2026, 1, 2), 1)
    with pytest.raises(ValueError, match="limit must be 0 or more"):
        table.fires_between(utc(2026, 1, 1), utc(2026, 1, 2), -1)


def test_fires_between_for_catch_up_across_a_change() -> None:
    table = Timetable("30 2 * * *", NY)
    found = table.fires_between(utc(2026, 3, 6), utc(2026, 3, 10), 10)
    assert [(fire.at, fire.note) for fire in found] == [
        (utc(2026, 3, 6, 7, 30), None),
        (utc(2026, 3, 7, 7, 30), None),
        (utc(2026, 3, 8, 7), "moved"),
        (utc(2026, 3, 9, 6, 30), None),
    ]


def test_timetable_repr_names_the_schedule() -> None:
    assert repr(Timetable("@daily", "UTC")) == "Timetable('@daily', 'UTC', expanded='0 0 * * *')"


# --- cronie's wildcard jobs: a minute field beginning with '*' ------------------------


def test_wildcard_minute_with_a_fixed_hour_has_no_fire_in_a_skipped_hour() -> None:
    # New York skips 02:00-02:59 on 2026-03-08. cronie (cron.c, the "DST begins" case)
    # moves only fixed-time jobs (neither MIN_STAR nor HR_STAR) to the change; "* 2 * * *"
    # is a wildcard job, so nothing of that hour runs, and its next fire is the next day.
    table = Timetable("* 2 * * *", NY)
    assert not table.fixed_time
    found = fires("* 2 * * *", NY, utc(2026, 3, 8, 6), 2)
    assert [f.at for f in found] == [utc(2026, 3, 9, 6), utc(2026, 3, 9, 6, 1)]
    assert notes(found) == [None, None]


def test_stepped_minute_with_a_fixed_hour_is_a_wildcard_job_too() -> None:
    assert not Timetable("*/15 2 * * *", NY).fixed_time
    assert Timetable("0/15 2 * * *", NY).fixed_time    # cronie: no leading '*', fixed-time
    found = fires("*/15 2 * * *", NY, utc(2026, 3, 8, 6), 1)
    assert found[0].at == utc(2026, 3, 9, 6)


def test_wildcard_minute_with_a_fixed_hour_fires_in_both_passes_of_a_repeated_hour() -> None:
    # New York repeats 01:00-01:59 on 2026-11-01 (05:00-05:59 and 06:00-06:59 UTC); cronie's
    # "DST ends" case runs wildcard jobs again, fixed-time ones not.
    found = fires("30 1 * * *", NY, utc(2026, 11, 1, 4), 2)
    assert notes(found) == ["repeated-once", None]
    found = fires("*/30 1 * * *", NY, utc(2026, 11, 1, 4), 4)
    assert [f.at for f in found] == [utc(2026, 11, 1, 5), utc(2026, 11, 1, 5, 30),
                                     utc(2026, 11, 1, 6), utc(2026, 11, 1, 6, 30)]
    assert notes(found) == [None, None, "second-pass", "second-pass"]


def test_fixed_minute_and_hour_still_moves_to_the_change() -> None:
    found = fires("30 2 * * *", NY, utc(2026, 3, 8, 6), 1)
    assert found[0].at == utc(2026, 3, 8, 7) and found[0].note == "moved"
