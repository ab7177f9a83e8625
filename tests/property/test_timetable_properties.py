"""Timetable properties over random expressions, zones and instants (hypothesis).

Independent oracles keep the implementation honest: cronsim (another implementation of
cron's fields and day rule), croniter's naive ``get_next``, and a brute-force walk over every
UTC minute of a window that applies the DST rules as the design states them, one instant at
a time. None of them is the code under test: timetable/cron.py parses with croniter's field
expansion, which no test uses as its reference.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

from croniter import croniter
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from crondepot.base.errors import InvalidSchedule
from crondepot.timetable import Fire, Timetable, next_fires
from crondepot.timetable.cron import parse_cron
from crondepot.timetable.zone import Kind, place

ZONES = [
    "America/New_York",
    "Europe/London",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Pacific/Chatham",
    "UTC",
]
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)
PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _change_instants(tz: str) -> list[datetime]:
    """Every UTC-offset change of ``tz`` in 2024-2030, to the second."""
    zone, found = ZoneInfo(tz), list[datetime]()
    day = datetime(2024, 1, 1, tzinfo=UTC)
    offset = day.astimezone(zone).utcoffset()
    while day.year < 2031:
        following = day + timedelta(days=1)
        if following.astimezone(zone).utcoffset() != offset:
            low, high = day, following
            while high - low > SECOND:
                middle = low + (high - low) // 2
                if middle.astimezone(zone).utcoffset() == offset:
                    low = middle
                else:
                    high = middle
            found.append(high)
            offset = following.astimezone(zone).utcoffset()
        day = following
    return found


CHANGES = {tz: _change_instants(tz) for tz in ZONES}


# --- strategies -----------------------------------------------------------------------


def _item(
    low: int, high: int, numbers: st.SearchStrategy[int], names: tuple[str, ...]
) -> st.SearchStrategy[str]:
    pair = st.lists(st.integers(low, high), min_size=2, max_size=2, unique=True).map(sorted)
    step = st.integers(1, high - low + 1)
    value = numbers.map(str)
    if names:
        value = st.one_of(value, numbers.map(lambda n: names[n - low]))
    return st.one_of(
        value,
        step.map(lambda s: f"*/{s}"),
        pair.map(lambda p: f"{p[0]}-{p[1]}"),
        st.builds(lambda p, s: f"{p[0]}-{p[1]}/{s}", pair, step),
        st.builds(lambda v, s: f"{v}/{s}", numbers, step),
    )


def _field(
    index: int, names: tuple[str, ...] = (), bias: tuple[int, ...] = (), star_weight: int = 1
) -> st.SearchStrategy[str]:
    low, high = BOUNDS[index]
    numbers = st.integers(low, high)
    if bias:  # hours and minutes near the clock changes, so gaps and repeats get hit
        numbers = st.one_of(numbers, st.sampled_from(bias))
    restricted = st.lists(_item(low, high, numbers, names), min_size=1, max_size=3).map(",".join)
    return st.integers(0, star_weight).flatmap(lambda k: restricted if k == 0 else st.just("*"))


EXPRESSIONS = st.tuples(
    _field(0, bias=(0, 15, 30, 45)),
    _field(1, bias=(0, 1, 2, 3, 23)),
    _field(2, star_weight=3),
    _field(3, names=MONTHS, star_weight=3),
    st.one_of(_field(4, names=WEEKDAYS, star_weight=3), st.just("7")),
).map(" ".join)


@st.composite
def zones_and_instants(draw: st.DrawFn, before_change: int = 40 * 3600) -> tuple[str, datetime]:
    tz = draw(st.sampled_from(ZONES))
    near_a_change = draw(st.booleans())
    if CHANGES[tz] and near_a_change:
        change = draw(st.sampled_from(CHANGES[tz]))
        return tz, change + timedelta(seconds=draw(st.integers(-before_change, 4 * 3600)))
    after = draw(
        st.datetimes(
            min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31), timezones=st.just(UTC)
        )
    )
    return tz, after


def _table(cron: str, tz: str) -> Timetable:
    try:
        return Timetable(cron, tz)
    except InvalidSchedule as refused:
        assert "never" in str(refused), refused  # the only refusal the strategy can provoke
        assume(False)
        raise


# --- the reference matcher, built from cronsim -----------------------------------------


def reference_matcher(cron: str) -> Callable[[datetime], bool]:
    """Matches by cronsim (healthchecks.io's cron: an implementation independent of ours and
    of croniter): its minute, hour and month sets and its day rule, which, like cronie,
    counts a day field beginning with '*' as unrestricted."""
    try:
        sim = CronSim(cron, datetime(2000, 1, 1))
    except CronSimError:
        assume(False)       # a form cronsim does not read; ours is checked by the others
        raise
    minutes, hours, months = set(sim.minutes), set(sim.hours), set(sim.months)

    def matches(wall: datetime) -> bool:
        return (wall.minute in minutes and wall.hour in hours and wall.month in months
                and bool(sim.match_day(wall.date())))

    return matches


def brute_force(
    cron: str, zone: ZoneInfo, after: datetime, until: datetime,
    matches: Callable[[datetime], bool] | None = None,
) -> dict[datetime, tuple[str | None, datetime]]:
    """Every fire in (after, until], found by visiting each UTC minute and applying the rules;
    ``matches`` says which wall minutes the expression names (cronsim's reading by default)."""
    if matches is None:
        matches = reference_matcher(cron)
    minute_field, hour_field = cron.split()[:2]
    fixed = (not minute_field.startswith("*")
             and "*" not in hour_field and "/" not in hour_field)
    found: dict[datetime, tuple[str | None, datetime]] = {}
    moment = after.replace(second=0, microsecond=0) + MINUTE
    previous = (moment - MINUTE).astimezone(zone).utcoffset()
    while moment <= until:
        local = moment.astimezone(zone)
        offset, wall = local.utcoffset(), local.replace(tzinfo=None, fold=0)
        assert offset is not None and previous is not None
        if offset > previous and fixed:  # clocks went forward at this very minute
            _gap_fire(found, matches, moment, wall, wall - (offset - previous))
        if matches(wall) and moment not in found:
            note = _note(zone, local, fixed)
            if note != "skip":
                found[moment] = (note, wall)
        previous, moment = offset, moment + MINUTE
    return found


def _gap_fire(
    found: dict[datetime, tuple[str | None, datetime]],
    matches: Callable[[datetime], bool],
    moment: datetime,
    wall: datetime,
    gap_start: datetime,
) -> None:
    skipped = []
    cursor = gap_start
    while cursor < wall:
        if matches(cursor):
            skipped.append(cursor)
        cursor += MINUTE
    if skipped:
        together = len(skipped) + matches(wall)
        found[moment] = ("merged" if together > 1 else "moved", skipped[0])


def _note(zone: ZoneInfo, local: datetime, fixed: bool) -> str | None:
    wall = local.replace(tzinfo=None, fold=0)
    if zone.utcoffset(wall) == zone.utcoffset(wall.replace(fold=1)):
        return None
    if local.fold == 0:
        return "repeated-once" if fixed else None
    return "skip" if fixed else "second-pass"


# --- properties -------------------------------------------------------------------------


@PROPERTY
@given(cron=EXPRESSIONS, where=zones_and_instants())
def test_fires_follow_the_rules_over_many_fires(cron: str, where: tuple[str, datetime]) -> None:
    tz, after = where
    table, zone = _table(cron, tz), ZoneInfo(tz)
    matches = reference_matcher(cron)
    found = list(islice(table.fires_after(after), 25))
    assert found, "a validated expression always fires again"
    assert all(earlier.at < later.at for earlier, later in pairwise(found))
    assert found[0].at > after
    for fire in found:
        _check_fire(fire, zone, matches)
    if table.fixed_time:
        scheduled = [fire.scheduled_local for fire in found]
        assert len(scheduled) == len(set(scheduled)), "a fixed-time job fired twice"


def _check_fire(fire: Fire, zone: ZoneInfo, matches: Callable[[datetime], bool]) -> None:
    assert fire.at.tzinfo is UTC
    # Not ``fire.local == fire.at``: by PEP 495 a second-pass time never equals an instant
    # in another zone, so compare in UTC.
    assert fire.local.astimezone(UTC) == fire.at and fire.local.tzinfo is zone
    assert fire.scheduled_local.tzinfo is None
    assert matches(fire.scheduled_local)
    wall = fire.local.replace(tzinfo=None)
    if fire.note in ("moved", "merged"):
        assert place(zone, fire.scheduled_local).kind is Kind.SKIPPED
        assert wall > fire.scheduled_local
    else:
        assert fire.scheduled_local == wall


@PROPERTY
@given(cron=EXPRESSIONS, where=zones_and_instants(before_change=30 * 3600))
def test_fires_equal_a_minute_by_minute_walk(cron: str, where: tuple[str, datetime]) -> None:
    tz, after = where
    until = after + timedelta(hours=36)
    table = _table(cron, tz)
    actual = table.fires_between(after, until, 10**6)
    expected = brute_force(cron, ZoneInfo(tz), after, until)
    assert {fire.at: (fire.note, fire.scheduled_local) for fire in actual} == expected
    assert [fire.at for fire in actual] == sorted(expected)


@PROPERTY
@given(cron=EXPRESSIONS, where=zones_and_instants())
def test_asking_again_from_each_fire_gives_the_next(cron: str, where: tuple[str, datetime]) -> None:
    # The scheduler advances a job by asking for the next fire after the last one; that
    # must walk the same sequence, wherever the last fire sits around a clock change.
    tz, after = where
    table = _table(cron, tz)
    fires = table.next_fires(after, 8)
    assert fires == next_fires(cron, tz, after, 8)
    for earlier, later in pairwise(fires):
        assert table.next_fires(earlier, 1) == [later]
        assert table.next_fires(later - timedelta(microseconds=1), 1) == [later]


def _normalised(cron: str) -> str:
    """The expression as explicit lists, which croniter reads without its own quirks."""
    spec = parse_cron(cron)
    sets = (spec.minutes, spec.hours, sorted(spec.days), spec.months, sorted(spec.weekdays))
    return " ".join(
        "*" if text == "*" else ",".join(map(str, values))
        for text, values in zip(cron.split(), sets, strict=True)
    )


@PROPERTY
@given(
    cron=EXPRESSIONS,
    start=st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31)),
)
def test_naive_matches_equal_croniter(cron: str, start: datetime) -> None:
    try:
        spec = parse_cron(cron)
    except InvalidSchedule:
        assume(False)
        raise
    ours = list(islice(spec.matches_from(start), 15))
    theirs = croniter(_normalised(cron), start - timedelta(microseconds=1), day_or=spec.day_or)
    assert ours == [theirs.get_next(datetime) for _ in range(15)]


@PROPERTY
@given(
    cron=EXPRESSIONS,
    start=st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31)),
)
def test_our_field_sets_equal_cronsims(cron: str, start: datetime) -> None:
    try:
        spec = parse_cron(cron)
    except InvalidSchedule:
        assume(False)
        raise
    matches = reference_matcher(cron)
    for wall in islice(spec.matches_from(start), 15):
        assert matches(wall)
    assert spec.matches(start.replace(second=0, microsecond=0)) == matches(
        start.replace(second=0, microsecond=0)
    )


HASH_FIELDS = st.sampled_from(
    [(0, "minute", 0, 59), (1, "hour", 0, 23), (2, "day-of-month", 1, 28), (3, "month", 1, 12),
     (4, "day-of-week", 0, 6)]
)  # fmt: skip


@PROPERTY
@given(key=st.text(max_size=20), where=HASH_FIELDS, data=st.data())
def test_h_values_stay_in_their_range(
    key: str, where: tuple[int, str, int, int], data: st.DataObject
) -> None:
    index, _name, low, high = where
    fields = ["0", "0", "*", "*", "*"]
    pair = data.draw(st.lists(st.integers(low, high), min_size=2, max_size=2).map(sorted))
    step = data.draw(st.integers(1, high - low + 1))     # a step at most the field's range
    choice = data.draw(
        st.sampled_from(
            ["H", f"H({pair[0]}-{pair[1]})", f"H/{step}", f"H({pair[0]}-{pair[1]})/{step}"]
        )
    )
    fields[index] = choice
    cron = " ".join(fields)
    table = Timetable(cron, "UTC", hash_key=key)
    assert table.expanded == Timetable(cron, "UTC", hash_key=key).expanded
    assert "h" not in table.expanded.lower()
    values = set(
        getattr(
            parse_cron(cron, hash_key=key),
            ("minutes", "hours", "days", "months", "weekdays")[index],
        )
    )
    bottom, top = (pair[0], pair[1]) if "(" in choice else (low, high)
    assert values and all(bottom <= value <= top for value in values)
    if "/" in choice:
        assert min(values) < bottom + step
