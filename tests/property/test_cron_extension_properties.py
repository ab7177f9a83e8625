"""Quartz's day items (W, LW, L-n, nL, with L and D#n) over random years, against oracles.

Three references, none of them timetable/cron.py:

* a definition walk written here: every day of the month is tested against the items'
  meanings stated the plain way ("the Monday–Friday of the month nearest day n", "the
  largest Monday–Friday of the month", "the month's largest day with this weekday"), not
  by the implementation's Saturday/Sunday shifts;
* cronsim (healthchecks.io's cron), which reads L, LW, nL and D#n but not W or L-n;
* croniter's iteration, which reads nW (one item, as Ln for nL) but clamps a day the month
  lacks to its last day where Quartz has no fire, so it is asked only about days 1–28.

The zone test walks every UTC minute around real clock changes with the rules of
test_timetable_properties.brute_force, fed the definition walk's matcher.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import date, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable import Timetable
from crondepot.timetable.cron import parse_cron
from tests.property.test_timetable_properties import CHANGES, ZONES, brute_force

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WEEKDAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
YEARS = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2060, 12, 31))


# --- the definitions ------------------------------------------------------------------


def _month(day: date) -> list[date]:
    length = calendar.monthrange(day.year, day.month)[1]
    return [day.replace(day=d) for d in range(1, length + 1)]


def _cron_weekday(day: date) -> int:
    return day.isoweekday() % 7     # Sunday 0


def _business_days(day: date) -> list[int]:
    return [d.day for d in _month(day) if d.isoweekday() <= 5]


def dom_item_matches(item: str, day: date) -> bool:
    item = item.upper()
    length = len(_month(day))
    if item == "L":
        return day.day == length
    if item == "LW":
        return day.day == max(_business_days(day))
    if item.startswith("L-"):
        return day.day == length - int(item[2:])
    if item.endswith("W"):
        target = int(item[:-1])
        if target > length:
            return False
        return day.day == min(_business_days(day), key=lambda d: abs(d - target))
    return day.day == int(item)


def _weekday_value(text: str) -> int:
    lowered = text.lower()
    return (WEEKDAY_NAMES.index(lowered) if lowered in WEEKDAY_NAMES else int(text)) % 7


def dow_item_matches(item: str, day: date) -> bool:
    same = [d.day for d in _month(day) if _cron_weekday(d) == _cron_weekday(day)]
    if "#" in item:
        weekday, nth = item.split("#")
        return (_weekday_value(weekday) == _cron_weekday(day)
                and len(same) >= int(nth) and same[int(nth) - 1] == day.day)
    if item.upper().endswith("L"):
        return _weekday_value(item[:-1]) == _cron_weekday(day) and day.day == max(same)
    return _weekday_value(item) == _cron_weekday(day)


def definition_matcher(cron: str) -> Callable[[datetime], bool]:
    """The expression's wall minutes by the definitions above, for the forms the strategies
    draw: minutes and hours as explicit lists or ``*``, months a list or ``*``, day fields
    a list of items or ``*``; cronie's day rule (a field beginning with ``*`` is
    unrestricted, both restricted: either matches)."""
    minute, hour = cron.split()[:2]
    minutes, hours = _values(minute), _values(hour)
    day_matches = definition_days(cron)

    def matches(wall: datetime) -> bool:
        return ((minutes is None or wall.minute in minutes)
                and (hours is None or wall.hour in hours)
                and day_matches(wall.date()))

    return matches


def _values(text: str) -> set[int] | None:
    return None if text == "*" else {int(v) for v in text.split(",")}


def definition_days(cron: str) -> Callable[[date], bool]:
    """Whether the expression's month and day fields name a day."""
    _minute, _hour, dom, month, dow = cron.split()
    months = _values(month)

    def day_matches(day: date) -> bool:
        if months is not None and day.month not in months:
            return False
        in_month = dom == "*" or any(dom_item_matches(i, day) for i in dom.split(","))
        in_week = dow == "*" or any(dow_item_matches(i, day) for i in dow.split(","))
        if dom != "*" and dow != "*":
            return in_month or in_week
        return in_month and in_week

    return day_matches


def walk(cron: str, start: datetime, until: datetime) -> list[datetime]:
    """Every matching wall minute in [start, until], one day at a time, then every minute
    of each matching day."""
    matches, day_matches = definition_matcher(cron), definition_days(cron)
    found: list[datetime] = []
    day = start.date()
    while day <= until.date():
        if day_matches(day):
            midnight = datetime(day.year, day.month, day.day)
            for offset in range(24 * 60):
                wall = midnight + timedelta(minutes=offset)
                if start <= wall <= until and matches(wall):
                    found.append(wall)
        day += timedelta(days=1)
    return found


# --- strategies -----------------------------------------------------------------------

_NUMBER_LIST = st.lists(st.integers(0, 59), min_size=1, max_size=2, unique=True)

DOM_ITEMS = st.one_of(
    st.integers(1, 31).map(str),
    st.integers(1, 31).map(lambda n: f"{n}W"),
    st.just("L"),
    st.just("LW"),
    st.integers(1, 30).map(lambda n: f"L-{n}"),
)
DOW_ITEMS = st.one_of(
    st.integers(0, 7).map(str),
    st.integers(0, 7).map(lambda n: f"{n}L"),
    st.sampled_from(WEEKDAY_NAMES).map(lambda name: f"{name}L"),
    st.builds(lambda d, n: f"{d}#{n}", st.integers(0, 7), st.integers(1, 5)),
)


def _list(items: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(items, min_size=1, max_size=3, unique=True).map(",".join)


def _star_or(restricted: st.SearchStrategy[str], star_weight: int) -> st.SearchStrategy[str]:
    return st.integers(0, star_weight).flatmap(lambda k: restricted if k == 0 else st.just("*"))


EXPRESSIONS = st.tuples(
    _NUMBER_LIST.map(lambda v: ",".join(map(str, v))),
    _star_or(st.lists(st.integers(0, 23), min_size=1, max_size=2, unique=True).map(
        lambda v: ",".join(map(str, v))), 0),
    _star_or(_list(DOM_ITEMS), 1),
    _star_or(st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True).map(
        lambda v: ",".join(map(str, v))), 2),
    _star_or(_list(DOW_ITEMS), 1),
).filter(lambda f: f[2] != "*" or f[4] != "*").map(" ".join)


def _spec_or_skip(cron: str) -> None:
    try:
        parse_cron(cron)
    except InvalidSchedule as refused:
        assert "never" in str(refused), refused     # the only refusal these forms provoke
        assume(False)


# --- properties -----------------------------------------------------------------------


@PROPERTY
@given(cron=EXPRESSIONS, start=YEARS)
def test_next_fires_equal_the_definition_walk(cron: str, start: datetime) -> None:
    _spec_or_skip(cron)
    start = start.replace(second=0, microsecond=0)
    ours = list(islice(parse_cron(cron).matches_from(start), 12))
    assert len(ours) == 12
    assert ours == walk(cron, start, ours[-1])


@PROPERTY
@given(cron=EXPRESSIONS, when=YEARS)
def test_matching_a_minute_equals_the_definition(cron: str, when: datetime) -> None:
    _spec_or_skip(cron)
    spec, matches = parse_cron(cron), definition_matcher(cron)
    day = when.date()
    for wall in (datetime(day.year, day.month, d.day, when.hour, when.minute)
                 for d in _month(day)):
        assert spec.matches(wall) == matches(wall), wall


CRONSIM_DOM = st.one_of(st.integers(1, 31).map(str), st.just("L"), st.just("LW"))
CRONSIM_DOW = st.one_of(
    st.integers(0, 7).map(str),
    st.integers(0, 7).map(lambda n: f"{n}L"),
    st.builds(lambda d, n: f"{d}#{n}", st.integers(0, 7), st.integers(1, 5)),
)
CRONSIM_EXPRESSIONS = st.tuples(
    st.just("0"), st.just("9"), _star_or(_list(CRONSIM_DOM), 1), st.just("*"),
    _star_or(_list(CRONSIM_DOW), 1),
).filter(lambda f: "L" in f[2] + f[4]).map(" ".join)


@PROPERTY
@given(cron=CRONSIM_EXPRESSIONS, start=YEARS)
def test_lw_and_nl_days_equal_cronsims(cron: str, start: datetime) -> None:
    _spec_or_skip(cron)
    spec = parse_cron(cron)
    sim = CronSim(cron, datetime(2000, 1, 1))
    day = start.date()
    for _ in range(62):     # two months, every day
        assert spec.matches(datetime(day.year, day.month, day.day, 9, 0)) == bool(
            sim.match_day(day)), (cron, day)
        day += timedelta(days=1)


CRONITER_EXPRESSIONS = st.one_of(
    st.builds(lambda n, months: f"30 7 {n}W {months} *", st.integers(1, 28),
              st.sampled_from(["*", "1,2,3", "2", "6-9"])),
    st.builds(lambda d, months: f"30 7 * {months} {d}L", st.integers(0, 7),
              st.sampled_from(["*", "2", "1-6"])),
)


@PROPERTY
@given(cron=CRONITER_EXPRESSIONS, start=YEARS)
def test_w_and_nl_fires_equal_croniters(cron: str, start: datetime) -> None:
    ours = list(islice(parse_cron(cron).matches_from(start), 24))
    fields = cron.split()
    if fields[4].endswith("L"):     # croniter spells the last such weekday Ln
        fields[4] = f"L{fields[4][:-1]}"
    theirs = croniter(" ".join(fields), start - timedelta(microseconds=1))
    assert ours == [theirs.get_next(datetime) for _ in range(24)]


@st.composite
def items_on_a_change_day(draw: st.DrawFn) -> tuple[str, str, datetime]:
    """A zone, an instant near one of its clock changes, and an expression whose day item
    names the change's local day (in one of the forms), at hours around the change."""
    tz = draw(st.sampled_from([zone for zone in ZONES if CHANGES[zone]]))
    change = draw(st.sampled_from(CHANGES[tz]))
    local = change.astimezone(ZoneInfo(tz)).date()
    length = calendar.monthrange(local.year, local.month)[1]
    weekday = _cron_weekday(local)
    forms = [f"{weekday}#{(local.day - 1) // 7 + 1}"]
    if local.day + 7 > length:
        forms.append(f"{draw(st.sampled_from([weekday, WEEKDAY_NAMES[weekday]]))}L")
    dom_forms = [f"L-{length - local.day}" if local.day < length else "L"]
    if local.isoweekday() <= 5:
        dom_forms.append(f"{local.day}W")
    if local.day == max(_business_days(local)):
        dom_forms.append("LW")
    in_dom = draw(st.booleans())
    item = draw(st.sampled_from(dom_forms if in_dom else forms))
    minute = draw(st.sampled_from(["0", "30", "0,15,45"]))
    hour = draw(st.sampled_from(["0,1,2,3", "1,2", "2", "*", "22,23,0,1"]))
    day_fields = f"{item} * *" if in_dom else f"* * {item}"
    after = change + timedelta(seconds=draw(st.integers(-30 * 3600, 2 * 3600)))
    return tz, f"{minute} {hour} {day_fields}", after


@PROPERTY
@given(where=items_on_a_change_day())
def test_the_items_fire_by_the_dst_rules_on_a_change_day(where: tuple[str, str, datetime]) -> None:
    tz, cron, after = where
    until = after + timedelta(hours=36)
    actual = Timetable(cron, tz).fires_between(after, until, 10**6)
    expected = brute_force(cron, ZoneInfo(tz), after, until, definition_matcher(cron))
    assert {fire.at: (fire.note, fire.scheduled_local) for fire in actual} == expected
