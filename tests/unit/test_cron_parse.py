"""Cron expressions: the grammar, aliases, the day OR rule, H, and every refusal."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from hashlib import sha256
from itertools import islice

import pytest
from croniter import croniter

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable import Fire, Timetable, next_fires
from crondepot.timetable.cron import parse_cron

AFTER = datetime(2026, 1, 1, tzinfo=UTC)


def fire_days(cron: str, count: int, after: datetime = AFTER) -> list[date]:
    return [moment.date() for moment in next_fires(cron, "UTC", after, count)]


def local_walls(cron: str, tz: str, count: int, after: datetime = AFTER) -> list[datetime]:
    return [fire.local.replace(tzinfo=None) for fire in _take(Timetable(cron, tz), after, count)]


def _take(table: Timetable, after: datetime, count: int) -> list[Fire]:
    return list(islice(table.fires_after(after), count))


# --- what is accepted ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("cron", "expanded", "fixed_time"),
    [
        ("30 2 * * *", "30 2 * * *", True),
        ("0 9,17 * * *", "0 9,17 * * *", True),
        ("* 2 * * *", "* 2 * * *", False),   # cronie: a minute beginning with * is wildcard
        ("0 1-5 * * *", "0 1-5 * * *", True),
        ("*/15 * * * *", "*/15 * * * *", False),
        ("30 * * * *", "30 * * * *", False),
        ("0 */2 * * *", "0 */2 * * *", False),
        ("0 1-5/2 * * *", "0 1-5/2 * * *", False),
        ("  0   9\t* *  mon-fri ", "0 9 * * mon-fri", True),
        ("@daily", "0 0 * * *", True),
        ("@hourly", "0 * * * *", False),
    ],
)
def test_expanded_text_and_fixed_time(cron: str, expanded: str, fixed_time: bool) -> None:
    table = Timetable(cron, "UTC")
    assert table.cron == cron
    assert table.tz == "UTC"
    assert table.expanded == expanded
    assert table.fixed_time is fixed_time


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("@yearly", [datetime(2027, 1, 1), datetime(2028, 1, 1)]),
        ("@annually", [datetime(2027, 1, 1), datetime(2028, 1, 1)]),
        ("@monthly", [datetime(2026, 2, 1), datetime(2026, 3, 1)]),
        ("@weekly", [datetime(2026, 1, 4), datetime(2026, 1, 11)]),  # Sundays
        ("@daily", [datetime(2026, 1, 2), datetime(2026, 1, 3)]),
        ("@midnight", [datetime(2026, 1, 2), datetime(2026, 1, 3)]),
        ("@hourly", [datetime(2026, 1, 1, 1), datetime(2026, 1, 1, 2)]),
        ("@DAILY", [datetime(2026, 1, 2), datetime(2026, 1, 3)]),
    ],
)
def test_aliases_keep_their_vixie_meaning(alias: str, expected: list[datetime]) -> None:
    assert [m.replace(tzinfo=None) for m in next_fires(alias, "UTC", AFTER, 2)] == expected


def test_aliases_read_on_the_jobs_clock() -> None:
    assert next_fires("@daily", "Asia/Kolkata", AFTER, 1) == [
        datetime(2026, 1, 1, 18, 30, tzinfo=UTC)
    ]


def test_month_and_weekday_names_in_any_case() -> None:
    by_name = fire_days("0 0 1 JAN,Jul *", 3)
    assert (
        by_name
        == fire_days("0 0 1 1,7 *", 3)
        == [
            date(2026, 7, 1),
            date(2027, 1, 1),
            date(2027, 7, 1),
        ]
    )
    assert fire_days("0 12 * * Mon-FRI", 5) == fire_days("0 12 * * 1-5", 5)


def test_sunday_is_both_0_and_7() -> None:
    assert fire_days("0 0 * * 7", 3) == fire_days("0 0 * * 0", 3) == fire_days("0 0 * * sun", 3)
    assert all(day.isoweekday() == 7 for day in fire_days("0 0 * * 7", 3))
    assert fire_days("0 0 * * 5-7", 6) == fire_days("0 0 * * fri,sat,sun", 6)


def test_start_with_step_runs_to_the_end_of_the_field() -> None:
    walls = local_walls("10/20 9 * * *", "UTC", 3)
    assert [w.minute for w in walls] == [10, 30, 50]


def test_leading_zeros_are_read_as_the_number() -> None:
    walls = local_walls("00000000000000000007/0000000000030 9 * * *", "UTC", 2)
    assert [w.minute for w in walls] == [7, 37]


def test_an_equal_range_is_one_value_not_the_whole_field() -> None:
    # croniter reads "9-9" as every hour; crondepot reads it as 9.
    assert [w.hour for w in local_walls("0 9-9 * * *", "UTC", 3)] == [9, 9, 9]


def test_steps_lists_and_ranges_combine() -> None:
    walls = local_walls("0-10/5,30,50-52 8 * * *", "UTC", 7)
    assert [w.minute for w in walls] == [0, 5, 10, 30, 50, 51, 52]


@pytest.mark.parametrize(("cron", "same_as"), [
    ("*,5 * * * *", "* * * * *"),
    ("*/20,* * * * *", "* * * * *"),
    ("0 0 * jan,* *", "0 0 * * *"),
    ("0 0 * * *,1", "0 0 * * 0-6"),        # day-of-week restricted, as written: every day
    ("0 0 1,* * *", "0 0 1-31 * *"),
])
def test_a_star_in_a_list_is_the_whole_field_as_in_cronie(cron: str, same_as: str) -> None:
    spec, same = parse_cron(cron), parse_cron(same_as)
    assert (spec.minutes, spec.hours, spec.days, spec.months, spec.weekdays) == (
        same.minutes, same.hours, same.days, same.months, same.weekdays)
    assert fire_days(cron, 5) == fire_days(same_as, 5)


def test_a_step_as_wide_as_the_field_keeps_the_start() -> None:
    assert [w.minute for w in local_walls("*/60 * * * *", "UTC", 2)] == [0, 0]
    assert [w.minute for w in local_walls("10/60 * * * *", "UTC", 2)] == [10, 10]


# --- the day-of-month / day-of-week OR rule -------------------------------------------


def test_both_day_fields_restricted_means_either() -> None:
    days = fire_days("0 0 13 * fri", 8)
    assert all(day.day == 13 or day.isoweekday() == 5 for day in days)
    assert date(2026, 1, 2) in days  # a Friday that is not the 13th
    assert date(2026, 1, 13) in days  # a 13th that is not a Friday (Tuesday)


def test_croniter_default_agrees_on_the_or_rule() -> None:
    ours = [m.replace(tzinfo=None) for m in next_fires("0 0 13 * 5", "UTC", AFTER, 10)]
    theirs = croniter("0 0 13 * 5", datetime(2026, 1, 1), day_or=True)
    assert ours == [theirs.get_next(datetime) for _ in range(10)]


def test_a_day_field_beginning_with_star_is_unrestricted_as_in_cronie() -> None:
    # cronie's entry.c sets DOM_STAR from the field's first character, and find_jobs ANDs
    # the day sets when it is set: "*/2" with Monday is odd-numbered Mondays.
    days = fire_days("0 0 */2 * mon", 12)
    assert all(day.day % 2 == 1 and day.isoweekday() == 1 for day in days)
    assert days[:3] == [date(2026, 1, 5), date(2026, 1, 19), date(2026, 2, 9)]
    theirs = croniter("0 0 */2 * mon", datetime(2026, 1, 1), day_or=False)
    assert [datetime.combine(d, datetime.min.time()) for d in days] == [
        theirs.get_next(datetime) for _ in range(12)
    ]


def test_a_weekday_field_beginning_with_star_is_unrestricted_too() -> None:
    # "*/7" in day-of-week is Sunday (0 and 7), but it begins with '*': AND with the 13th.
    days = fire_days("0 0 13 * */7", 3)
    assert all(day.day == 13 and day.isoweekday() == 7 for day in days)


def test_an_and_of_the_day_fields_that_no_day_meets_is_refused() -> None:
    with pytest.raises(InvalidSchedule, match="would never fire") as caught:
        Timetable("0 0 31 2 */2", "UTC")
    assert caught.value.field == "day-of-month"


def test_one_restricted_day_field_alone_decides() -> None:
    assert all(day.isoweekday() == 1 for day in fire_days("0 0 * * mon", 5))
    assert all(day.day == 13 for day in fire_days("0 0 13 * *", 5))


def test_full_range_day_of_month_with_a_weekday_fires_every_day() -> None:
    # "1-31" is a restriction (it is not a bare "*"), so OR applies: every day.
    days = fire_days("0 0 1-31 * mon", 10)
    assert days == [date(2026, 1, 2) + timedelta(days=i) for i in range(10)]


# --- H ------------------------------------------------------------------------------


def _hash(key: str, field: str) -> int:
    return int.from_bytes(sha256(f"{key}\x00{field}".encode()).digest(), "big")


def test_h_is_the_documented_sha256_value() -> None:
    table = Timetable("H H * * *", "UTC", hash_key="job-42")
    minute, hour = _hash("job-42", "minute") % 60, _hash("job-42", "hour") % 24
    assert table.expanded == f"{minute} {hour} * * *"


def test_h_is_stable_for_one_key() -> None:
    first = Timetable("H H H * H", "UTC", hash_key="invoices").expanded
    assert Timetable("H H H * H", "UTC", hash_key="invoices").expanded == first
    assert Timetable("h h h * h", "UTC", hash_key="invoices").expanded == first


def test_h_spreads_different_keys() -> None:
    minutes = {Timetable("H 9 * * *", "UTC", hash_key=f"job-{i}").expanded for i in range(200)}
    assert len(minutes) > 40


def test_h_without_a_key_uses_the_empty_key() -> None:
    assert (
        Timetable("H * * * *", "UTC").expanded
        == Timetable("H * * * *", "UTC", hash_key="").expanded
    )


def test_h_range_stays_inside_it() -> None:
    for i in range(300):
        table = Timetable("H(0-29) 9 * * *", "UTC", hash_key=str(i))
        wall = _take(table, AFTER, 1)[0].local
        assert wall.hour == 9 and 0 <= wall.minute <= 29


def test_h_in_day_of_month_fires_every_month() -> None:
    for i in range(200):
        day = int(Timetable("0 0 H * *", "UTC", hash_key=str(i)).expanded.split()[2])
        assert 1 <= day <= 28


def test_h_in_every_field_stays_in_range() -> None:
    for i in range(200):
        minute, hour, day, month, weekday = (
            int(text) for text in Timetable("H H H H H", "UTC", hash_key=str(i)).expanded.split()
        )
        assert 0 <= minute <= 59 and 0 <= hour <= 23 and 1 <= day <= 28
        assert 1 <= month <= 12 and 0 <= weekday <= 6


def test_h_step_is_an_offset_then_every_n() -> None:
    for i in range(100):
        table = Timetable("H/15 * * * *", "UTC", hash_key=str(i))
        offset = _hash(str(i), "minute") % 15
        assert table.expanded == f"{offset}-59/15 * * * *"
        assert not table.fixed_time
        minutes = [f.local.minute for f in _take(table, AFTER - timedelta(seconds=1), 4)]
        assert minutes == [offset, offset + 15, offset + 30, offset + 45]


def test_h_range_with_step() -> None:
    table = Timetable("H(10-19)/5 * * * *", "UTC", hash_key="k")
    start = 10 + _hash("k", "minute") % 5
    assert table.expanded == f"{start}-19/5 * * * *"


def test_h_step_with_room_for_one_value_is_a_plain_number() -> None:
    table = Timetable("0 H/24 * * *", "UTC", hash_key="k")
    assert table.expanded == f"0 {_hash('k', 'hour') % 24} * * *"
    assert table.fixed_time


def test_h_mixes_with_plain_items() -> None:
    table = Timetable("H,30 9 * * *", "UTC", hash_key="k")
    assert table.expanded == f"{_hash('k', 'minute') % 60},30 9 * * *"


# --- refusals -----------------------------------------------------------------------


INVALID = [
    # out of range, every field
    ("61 * * * *", "minute", "minute field: 61 is out of range 0–59"),
    ("0 24 * * *", "hour", "hour field: 24 is out of range 0–23"),
    ("0 0 0 * *", "day-of-month", "day-of-month field: 0 is out of range 1–31"),
    ("0 0 32 * *", "day-of-month", "day-of-month field: 32 is out of range 1–31"),
    ("0 0 * 0 *", "month", "month field: 0 is out of range 1–12"),
    ("0 0 * 13 *", "month", "month field: 13 is out of range 1–12"),
    ("0 0 * * 8", "day-of-week", "day-of-week field: 8 is out of range 0–7"),
    ("0-60 * * * *", "minute", "minute field: 60 is out of range 0–59"),
    ("*/5 0-24 * * *", "hour", "hour field: 24 is out of range 0–23"),
    # not a number or name
    ("0 x * * *", "hour", "hour field: 'x' is not a number or name"),
    ("jan * * * *", "minute", "minute field: 'jan' is not a number or name"),
    ("0 0 * foo *", "month",
     "month field: 'foo' is not a number or name; expected 1–12 or jan–dec"),
    ("0 0 * mon *", "month", "month field: 'mon' is not a number or name"),
    ("0 0 * * jan", "day-of-week", "day-of-week field: 'jan' is not a number or name"),
    ("0 0 * * funday", "day-of-week", "expected 0–7 or sun–sat"),
    ("0 0 * january *", "month", "month field: 'january' is not a number or name"),
    # reversed ranges
    ("0 0 * 12-1 *", "month", "month field: range 12-1 is reversed"),
    ("0 0 * dec-jan *", "month", "month field: range dec-jan is reversed"),
    ("30-10 * * * *", "minute", "minute field: range 30-10 is reversed"),
    ("0 0 * * sat-sun", "day-of-week", "Sunday can also be written 7"),
    # steps
    ("*/0 * * * *", "minute", "minute field: step 0 is not allowed"),
    ("0 0 * * */0", "day-of-week", "day-of-week field: step 0 is not allowed"),
    ("0 0 1-10/0 * *", "day-of-month", "day-of-month field: step 0 is not allowed"),
    ("*/x * * * *", "minute", "minute field: step 'x' is not a number"),
    ("*/ * * * *", "minute", "minute field: step '' is not a number"),
    ("*/2/3 * * * *", "minute", "minute field: '*/2/3' has more than one '/'"),
    # a step wider than the field would name one value: */999… fired hourly
    ("*/999999999999999999999 * * * *", "minute",
     "minute field: step 999999999999999999999 is larger than the field's range 0–59; "
     "expected a step from 1 to 60"),
    ("*/61 * * * *", "minute", "minute field: step 61 is larger than the field's range 0–59"),
    ("0 */25 * * *", "hour", "hour field: step 25 is larger than the field's range 0–23"),
    ("0 0 1-10/32 * *", "day-of-month", "step 32 is larger than the field's range 1–31"),
    ("0 0 * 1/13 *", "month", "month field: step 13 is larger than the field's range 1–12"),
    ("0 0 * * */9", "day-of-week", "step 9 is larger than the field's range 0–7"),
    ("H/61 * * * *", "minute", "minute field: step 61 is larger than the field's range"),
    ("*/" + "9" * 5000 + " * * * *", "minute", "(5000 digits) is larger than the field's"),
    ("0 0 * * */00000000000000", "day-of-week", "day-of-week field: step 0 is not allowed"),
    # numbers too long for any field (int() would refuse beyond 4,300 digits)
    ("9" * 5000 + " * * * *", "minute", "minute field: 999999999999999999999999… (5000 "
                                        "digits) is out of range 0–59"),
    ("H(0-" + "9" * 5000 + ") * * * *", "minute", "is out of range 0–59"),
    # garbage
    ("5% * * * *", "minute", "minute field: '5%' is not a number or name"),
    ("0 9 * * mon;", "day-of-week", "day-of-week field: 'mon;' is not a number or name"),
    ("0 0 1,,2 * *", "day-of-month", "day-of-month field: empty list item"),
    ("0 0 1, * *", "day-of-month", "day-of-month field: empty list item"),
    ("0 0 -5 * *", "day-of-month", "day-of-month field: '-5' is not a valid range"),
    ("1-2-3 * * * *", "minute", "minute field: '1-2-3' is not a valid range"),
    ("** * * * *", "minute", "minute field: '**' is not a number or name"),
    ("0 ９ * * *", "hour", "hour field: '９' is not a number or name"),  # a full-width 9
    # the Quartz day items out of range, in the wrong field, or in a shape not read
    ("0 0 32W * *", "day-of-month", "day-of-month field: 32W is out of range 1–31"),
    ("0 0 0W * *", "day-of-month", "day-of-month field: 0W is out of range 1–31"),
    ("0 0 L-40 * *", "day-of-month", "day-of-month field: L-40 is out of range; L-n is n days "
                                     "before the month's last day, n from 1 to 30"),
    ("0 0 L-0 * *", "day-of-month", "day-of-month field: L-0 is out of range"),
    ("0 0 * * 8L", "day-of-week", "day-of-week field: 8L is out of range 0–7; nL is the last "
                                  "such weekday of the month, like 5L (the last Friday)"),
    ("0 0 * * xyzL", "day-of-week", "day-of-week field: 'xyzL' is not valid last-weekday syntax"),
    ("0 0 * * 5W", "day-of-week", "day-of-week field: '5W': W, LW and L-n are only allowed in "
                                  "the day-of-month field"),
    ("0 0 * * LW", "day-of-week", "day-of-week field: 'LW': W, LW and L-n are only allowed"),
    ("0 0 * * 1,L-3", "day-of-week", "day-of-week field: 'L-3': W, LW and L-n are only allowed"),
    ("0 0 5L * *", "day-of-month", "day-of-month field: '5L' (nL, the last such weekday of the "
                                   "month) is only allowed in the day-of-week field"),
    ("0 0 * * L", "day-of-week", "day-of-week field: 'L' alone is not supported (Quartz reads "
                                 "it as Saturday"),
    ("0 0 * * L5", "day-of-week", "day-of-week field: 'L5' is not valid last-weekday syntax; "
                                  "write 5L"),
    ("0 0 W * *", "day-of-month", "day-of-month field: 'W' is not supported; W is read after "
                                  "one day number (15W) or after L (LW)"),
    ("0 0 L-3W * *", "day-of-month", "day-of-month field: 'L-3W' is not supported"),
    ("0 0 1-5W * *", "day-of-month", "day-of-month field: '1-5W': L, LW, L-n and nW take no "
                                     "range or step"),
    ("0 0 15W/2 * *", "day-of-month", "'15W/2': L, LW, L-n and nW take no range or step"),
    ("0 0 LW/2 * *", "day-of-month", "'LW/2': L, LW, L-n and nW take no range or step"),
    ("0 0 * * 5L-6L", "day-of-week", "day-of-week field: '5L-6L': nL takes no range or step"),
    ("L 0 * * *", "minute", "minute field: 'L': L and W are only allowed in the day-of-month "
                            "and day-of-week fields"),
    ("0 0 * 5W *", "month", "month field: '5W': L and W are only allowed"),
    ("0 0 * jull *", "month", "month field: 'jull' is not a number or name"),   # not an L item
    ("0 0 31W 4,6,9,11 *", "day-of-month",
     "day-of-month field: 31W never occurs in months 4 (April), 6 (June), 9 (September), "
     "11 (November); this schedule would never fire"),
    ("0 0 30W,L-29 feb *", "day-of-month",
     "day-of-month field: 30W, L-29 never occur in month 2 (February)"),
    ("0 0 L-30 2 *", "day-of-month", "day-of-month field: L-30 never occurs in month 2"),
    ("0 0 1#2 * *", "day-of-month", "'#' (nth weekday of the month, in '1#2') is only allowed"),
    ("0 0 * * 1#6", "day-of-week", "day-of-week field: '1#6': n in D#n must be 1 to 5, got 6"),
    ("0 0 * * 1#0", "day-of-week", "n in D#n must be 1 to 5, got 0"),
    ("0 0 * * 8#1", "day-of-week", "day-of-week field: 8 is out of range 0–7"),
    ("0 0 * * 1#", "day-of-week", "'1#' is not valid nth-weekday syntax; expected D#n"),
    ("0 0 * * 1#2#3", "day-of-week", "'1#2#3' is not valid nth-weekday syntax"),
    ("0 0 * * #1", "day-of-week", "'#1' is not valid nth-weekday syntax"),
    ("0 0 L/2 * *", "day-of-month", "day-of-month field: 'L/2': L, LW, L-n and nW take no "
                                    "range or step"),
    ("0 0 ? * 1", "day-of-month", "day-of-month field: '?' is not supported; use '*'"),
    ("0 0 1 * ?", "day-of-week", "day-of-week field: '?' is not supported"),
    ("R * * * *", "minute", "minute field: 'R' (random syntax, R) is not supported; use H"),
    ("R(0-29)/5 * * * *", "minute", "'R(0-29)/5' (random syntax, R) is not supported"),
    ("0 0 1,W15 * *", "day-of-month", "day-of-month field: 'W15' is not valid nearest-weekday "
                                      "syntax; write 15W"),
    # malformed H
    ("H(5-1) * * * *", "minute", "minute field: range 5-1 in 'H(5-1)' is reversed"),
    ("H(0-99) * * * *", "minute", "minute field: 99 is out of range 0–59"),
    ("H/0 * * * *", "minute", "minute field: step 0 is not allowed"),
    ("0 Hx * * *", "hour", "hour field: 'Hx' is not valid H syntax"),
    ("H(1-2 * * * *", "minute", "is not valid H syntax; expected H, H(a-b), H/n or H(a-b)/n"),
    # the shape of the whole
    ("0 9 * *", "cron",
     "cron: expected 5 fields (minute hour day-of-month month day-of-week), got 4"),
    ("0 0 9 * * *", "cron",
     "cron: expected 5 fields (minute hour day-of-month month day-of-week), got 6"),
    ("0 0 9 * * * 2026", "cron", "got 7"),
    ("9", "cron", "got 1"),
    ("0\u00a09 * * *", "cron", "got 4"),  # a no-break space does not separate fields
    ("", "cron", "cron: the expression is empty"),
    ("   \t ", "cron", "cron: the expression is empty"),
    ("@reboot", "cron", "cron: @reboot is not supported"),
    ("@fortnightly", "cron", "cron: unknown alias '@fortnightly'; expected one of @yearly"),
    ("@daily 5", "cron", "cron: unknown alias '@daily 5'"),
    # never fires
    ("0 0 30 2 *", "day-of-month",
     "day-of-month field: 30 never occurs in month 2 (February); this schedule would never fire"),
    ("0 0 31 4,6,9,11 *", "day-of-month",
     "day-of-month field: 31 never occurs in months 4 (April), 6 (June), 9 (September), "
     "11 (November); this schedule would never fire"),
    ("0 0 30,31 feb *", "day-of-month", "day-of-month field: 30, 31 never occur in month 2"),
]  # fmt: skip


@pytest.mark.parametrize(("cron", "field", "message"), INVALID)
def test_invalid_expressions_name_the_field(cron: str, field: str, message: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        Timetable(cron, "UTC")
    assert caught.value.field == field
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize("cron", [None, 5, b"0 9 * * *", ["0", "9", "*", "*", "*"]])
def test_a_non_string_expression_is_refused(cron: object) -> None:
    with pytest.raises(InvalidSchedule, match="cron: expected a string") as caught:
        Timetable(cron, "UTC")  # type: ignore[arg-type]
    assert caught.value.field == "cron"


def test_the_function_raises_invalid_schedule_too() -> None:
    with pytest.raises(InvalidSchedule, match="minute field: 61"):
        next_fires("61 * * * *", "UTC", AFTER, 1)


@pytest.mark.parametrize(
    ("cron", "first"),
    [
        ("0 0 29 2 *", datetime(2028, 2, 29)),  # leap day: valid, fires in leap years
        ("0 0 30 2 mon", datetime(2026, 2, 2)),  # OR: the Mondays of February fire
        ("0 0 31 * *", datetime(2026, 1, 31)),
        ("0 0 30,31 2,3 *", datetime(2026, 3, 30)),
    ],
)
def test_schedules_that_fire_somewhere_are_accepted(cron: str, first: datetime) -> None:
    assert next_fires(cron, "UTC", AFTER, 1) == [first.replace(tzinfo=UTC)]


def test_parsing_is_cached() -> None:
    assert parse_cron("7 7 * * *") is parse_cron("7 7 * * *")
    assert parse_cron("H * * * *", hash_key="a") is not parse_cron("H * * * *", hash_key="b")


def test_a_bad_hash_key_type_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match="hash_key"):
        Timetable("H * * * *", "UTC", hash_key=7)  # type: ignore[arg-type]


def test_equal_ranges_mean_their_single_value() -> None:
    """croniter reads 9-9 as the whole field; crondepot must not fire hourly for it."""
    from datetime import UTC, datetime

    from crondepot.timetable import next_fires

    after = datetime(2026, 10, 1, tzinfo=UTC)
    assert [f.hour for f in next_fires("0 9-9 * * *", "UTC", after, 3)] == [9, 9, 9]
    assert [f.day for f in next_fires("0 9 1-1 * *", "UTC", after, 2)] == [1, 1]
    assert [f.weekday() for f in next_fires("0 9 * * mon-mon", "UTC", after, 2)] == [0, 0]


def test_uses_hash_spots_h_fields_in_either_case_but_not_in_names() -> None:
    from crondepot.timetable import uses_hash

    assert uses_hash("H 9 * * *") and uses_hash("h 9 * * *") and uses_hash("0 H(0-5) * * *")
    assert not uses_hash("0 9 * * THU") and not uses_hash("0 9 * * thu,sat")


# --- L and D#n ----------------------------------------------------------------------


def test_l_is_the_last_day_of_every_month() -> None:
    assert fire_days("0 9 L * *", 14) == [
        date(2026, 1, 31), date(2026, 2, 28), date(2026, 3, 31), date(2026, 4, 30),
        date(2026, 5, 31), date(2026, 6, 30), date(2026, 7, 31), date(2026, 8, 31),
        date(2026, 9, 30), date(2026, 10, 31), date(2026, 11, 30), date(2026, 12, 31),
        date(2027, 1, 31), date(2027, 2, 28)]


def test_l_in_february_of_a_leap_year_is_the_29th() -> None:
    assert fire_days("0 9 L 2 *", 3) == [date(2026, 2, 28), date(2027, 2, 28), date(2028, 2, 29)]


def test_l_mixes_with_plain_days_in_a_list() -> None:
    assert fire_days("0 9 15,l * *", 4) == [date(2026, 1, 15), date(2026, 1, 31),
                                           date(2026, 2, 15), date(2026, 2, 28)]


def test_l_with_a_weekday_follows_the_or_rule() -> None:
    days = fire_days("0 9 L * fri", 10)
    last = [d for d in days if (d + timedelta(days=1)).day == 1]
    assert all(d.isoweekday() == 5 or d in last for d in days)
    assert date(2026, 1, 31) in days and date(2026, 1, 2) in days


def test_nth_weekday_is_the_nth_such_day_of_the_month() -> None:
    assert fire_days("0 9 * * 1#1", 4) == [date(2026, 1, 5), date(2026, 2, 2),
                                          date(2026, 3, 2), date(2026, 4, 6)]
    assert fire_days("0 9 * * mon#2,fri#1", 4) == [date(2026, 1, 2), date(2026, 1, 12),
                                                  date(2026, 2, 6), date(2026, 2, 9)]


def test_a_fifth_weekday_fires_only_in_the_months_that_have_one() -> None:
    days = fire_days("30 10 * * fri#5", 4)
    assert days == [date(2026, 1, 30), date(2026, 5, 29), date(2026, 7, 31), date(2026, 10, 30)]


def test_sunday_as_7_in_nth_weekday() -> None:
    assert fire_days("0 0 * * 7#1", 3) == fire_days("0 0 * * 0#1", 3) == fire_days(
        "0 0 * * sun#1", 3)


def test_l_and_nth_weekday_agree_with_croniter() -> None:
    for cron in ("0 9 L * *", "0 9 * * 1#1", "15 8 * * 5#3", "0 9 L 2 *"):
        ours = [m.replace(tzinfo=None) for m in next_fires(cron, "UTC", AFTER, 24)]
        theirs = croniter(cron, datetime(2026, 1, 1))
        assert ours == [theirs.get_next(datetime) for _ in range(24)], cron


def test_a_step_from_a_weekday_runs_to_7_as_cronie_reads_it() -> None:
    # cronie's day-of-week is 0-7: "a/n" runs to 7 (Sunday). croniter's expansion stops at 6
    # (no Sunday in "1/1") and reads "7/1" as every day; found by the cronsim property test.
    assert parse_cron("0 9 * * 1/1").weekdays == frozenset(range(7))
    assert parse_cron("0 9 * * 7/1").weekdays == frozenset({0})
    assert parse_cron("0 9 * * 5/1").weekdays == frozenset({5, 6, 0})
    assert parse_cron("0 9 * * 0/3").weekdays == frozenset({0, 3, 6})


# --- W, LW, L-n and nL (Quartz's reading, CronExpression 2.5) -------------------------


def days_in(cron: str, start: date, end: date, tz: str = "UTC") -> list[date]:
    after = datetime(start.year, start.month, start.day, tzinfo=UTC) - timedelta(seconds=1)
    until = datetime(end.year, end.month, end.day, 23, 59, tzinfo=UTC)
    return [fire.scheduled_local.date() for fire in Timetable(cron, tz).fires_between(
        after, until, 1000)]


def test_w_on_a_weekday_is_that_day_and_moves_off_a_weekend() -> None:
    assert days_in("0 9 15W * *", date(2026, 1, 1), date(2026, 3, 31)) == [
        date(2026, 1, 15),    # a Thursday: itself
        date(2026, 2, 16),    # the 15th is a Sunday: Monday the 16th
        date(2026, 3, 16)]    # a Sunday again
    assert days_in("0 9 15W 8 *", date(2026, 8, 1), date(2026, 8, 31)) == [date(2026, 8, 14)]


def test_1w_never_jumps_back_into_the_previous_month() -> None:
    # 1 August 2026 is a Saturday: the nearest weekday in the month is Monday the 3rd
    assert days_in("0 9 1W * *", date(2026, 8, 1), date(2026, 8, 31)) == [date(2026, 8, 3)]
    # 1 February 2026 is a Sunday: Monday the 2nd
    assert days_in("0 9 1W * *", date(2026, 2, 1), date(2026, 2, 28)) == [date(2026, 2, 2)]


def test_a_w_day_the_month_lacks_does_not_fire_that_month() -> None:
    # Quartz 2.5 (findSmallestDay: "make sure we don't over-run a short month"): 31W has no
    # fire in a 30-day month or in February; croniter would clamp it to the 30th.
    days = days_in("0 9 31W * *", date(2026, 1, 1), date(2026, 12, 31))
    assert days == [date(2026, 1, 30),     # the 31st is a Saturday: Friday the 30th
                    date(2026, 3, 31),
                    date(2026, 5, 29),     # a Sunday on the last day: back to Friday the 29th
                    date(2026, 7, 31), date(2026, 8, 31),
                    date(2026, 10, 30),    # Saturday the 31st: Friday
                    date(2026, 12, 31)]
    with pytest.raises(InvalidSchedule, match="30W never occurs in month 2"):
        Timetable("0 9 30W 2 *", "UTC")


def test_lw_is_the_last_weekday_also_in_leap_februaries() -> None:
    assert days_in("0 9 LW 2 *", date(2020, 1, 1), date(2032, 12, 31)) == [
        date(2020, 2, 28),    # 29 February 2020 is a Saturday
        date(2021, 2, 26), date(2022, 2, 28), date(2023, 2, 28),
        date(2024, 2, 29),    # a Thursday
        date(2025, 2, 28), date(2026, 2, 27), date(2027, 2, 26),
        date(2028, 2, 29),    # a Tuesday
        date(2029, 2, 28), date(2030, 2, 28), date(2031, 2, 28),
        date(2032, 2, 27)]    # 29 February 2032 is a Sunday


def test_l_minus_n_counts_back_from_the_months_own_last_day() -> None:
    assert days_in("0 9 L-3 * *", date(2026, 1, 1), date(2026, 4, 30)) == [
        date(2026, 1, 28), date(2026, 2, 25), date(2026, 3, 28), date(2026, 4, 27)]
    assert days_in("0 9 L-3 2 *", date(2028, 1, 1), date(2028, 12, 31)) == [date(2028, 2, 26)]
    # L-28: the 3rd of a 31-day month, the 2nd of a 30-day one, the 1st of a leap
    # February, and no day of a 28-day February
    assert days_in("0 9 L-28 * *", date(2028, 1, 1), date(2028, 4, 30)) == [
        date(2028, 1, 3), date(2028, 2, 1), date(2028, 3, 3), date(2028, 4, 2)]
    assert days_in("0 9 L-28 2 *", date(2026, 1, 1), date(2032, 12, 31)) == [
        date(2028, 2, 1), date(2032, 2, 1)]
    assert days_in("0 9 L-30 * *", date(2026, 1, 1), date(2026, 4, 30)) == [
        date(2026, 1, 1), date(2026, 3, 1)]


def test_nl_is_the_last_such_weekday_with_four_or_five_in_the_month() -> None:
    # January 2026 has five Fridays (2 … 30), February four (6 … 27)
    assert days_in("0 9 * * 5L", date(2026, 1, 1), date(2026, 2, 28)) == [
        date(2026, 1, 30), date(2026, 2, 27)]
    assert days_in("0 9 * * friL", date(2026, 1, 1), date(2026, 2, 28)) == [
        date(2026, 1, 30), date(2026, 2, 27)]
    assert days_in("0 9 * * 7L", date(2026, 3, 1), date(2026, 3, 31)) == days_in(
        "0 9 * * 0L", date(2026, 3, 1), date(2026, 3, 31)) == [date(2026, 3, 29)]


def test_the_items_mix_in_lists_and_follow_the_or_rule() -> None:
    assert days_in("0 9 1W,15W,LW * *", date(2026, 2, 1), date(2026, 2, 28)) == [
        date(2026, 2, 2), date(2026, 2, 16), date(2026, 2, 27)]
    assert days_in("0 9 * * 1#1,5L", date(2026, 1, 1), date(2026, 1, 31)) == [
        date(2026, 1, 5), date(2026, 1, 30)]
    # both day fields restricted: either matches (the 15th's weekday, or any last Friday)
    assert days_in("0 9 15W * 5L", date(2026, 2, 1), date(2026, 2, 28)) == [
        date(2026, 2, 16), date(2026, 2, 27)]
    # a day-of-month beginning with '*' ANDs: odd days that are the month's last Friday
    assert days_in("0 9 */2 * 5L", date(2026, 1, 1), date(2026, 6, 30)) == [
        date(2026, 2, 27), date(2026, 3, 27), date(2026, 5, 29)]


def test_the_items_take_h_in_the_other_fields() -> None:
    table = Timetable("H H(8-10) LW * *", "UTC", hash_key="bank42:48214:statement")
    minute, hour, *rest = table.expanded.split()
    assert rest == ["LW", "*", "*"] and 0 <= int(minute) <= 59 and 8 <= int(hour) <= 10
    fire = table.next_fires(AFTER, 1)[0]
    assert (fire.date(), fire.hour, fire.minute) == (date(2026, 1, 30), int(hour), int(minute))


def test_the_items_follow_the_dst_rules_of_their_local_day() -> None:
    # The last Sunday of March and of October is when Europe/London changes its clock.
    walls = local_walls("30 1 * * 0L", "Europe/London", 3, datetime(2026, 3, 1, tzinfo=UTC))
    fires = _take(Timetable("30 1 * * 0L", "Europe/London"), datetime(2026, 3, 1, tzinfo=UTC), 8)
    assert fires[0].scheduled_local == datetime(2026, 3, 29, 1, 30)    # in the skipped hour:
    assert fires[0].note == "moved" and walls[0] == datetime(2026, 3, 29, 2, 0)   # moved on
    october = next(fire for fire in fires if fire.scheduled_local.month == 10)
    assert october.at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)   # a repeated hour: once
    assert [f.scheduled_local for f in fires].count(datetime(2026, 10, 25, 1, 30)) == 1
    # L-23 of March 2026 is Sunday the 8th, New York's change: 02:30 is moved to 03:00 EDT
    first = _take(Timetable("30 2 L-23 3 *", "America/New_York"), AFTER, 1)[0]
    assert first.note == "moved" and first.at == datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
