"""Intervals and lists of crons against oracles that share no code with them (hypothesis).

* An interval's fires are checked against plain integer arithmetic on Unix microseconds:
  the first multiple of ``every`` past ``after``, counted from the anchor, then every
  ``every`` seconds, in every zone (DST zones included: an interval is absolute time).
* A list of crons is checked against the union of its expressions' single timetables (each
  is itself held to cronsim, croniter and a brute-force DST walk in
  test_timetable_properties.py), with equal instants once, in every zone; and, in zones
  without clock changes, against the union of croniter's own iteration, an independent
  implementation.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import islice, pairwise
from zoneinfo import ZoneInfo

from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crondepot.timetable import Interval, Several, Timetable, schedule, timetable_of
from crondepot.timetable.cron import parse_cron
from tests.property.test_timetable_properties import (
    EXPRESSIONS,
    ZONES,
    _normalised,
    _table,
    zones_and_instants,
)

PROPERTY = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
COUNT = 40


def _micros(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _oracle_interval(anchor: datetime, every_s: int, after: datetime, count: int) -> list[int]:
    """The next ``count`` fires after ``after`` as Unix microseconds, by integer arithmetic."""
    step = every_s * 1_000_000
    a, t = _micros(anchor), _micros(after)
    k = (t - a) // step + 1           # Python's // floors: right for negative k too
    return [a + (k + i) * step for i in range(count)]


ANCHORS = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1),
                       timezones=st.just(UTC))
EVERY = st.one_of(st.integers(1, 120), st.integers(1, 10 * 86_400),
                  st.sampled_from([60, 90, 3600, 14_400, 86_400, 7 * 86_400]))


@PROPERTY
@given(anchor=ANCHORS, every_s=EVERY, placed=zones_and_instants())
def test_an_interval_fires_at_the_anchor_plus_whole_multiples_of_every(
        anchor: datetime, every_s: int, placed: tuple[str, datetime]) -> None:
    tz, after = placed
    interval = Interval(every_s, anchor, tz)
    fires = list(islice(interval.fires_after(after), COUNT))
    assert [_micros(f.at) for f in fires] == _oracle_interval(anchor, every_s, after, COUNT)
    for fire in fires:
        assert fire.at.tzinfo is UTC and fire.note is None
        # the same instant on the zone's clock (compared through UTC: PEP 495 makes a
        # second-pass local time unequal to any instant in another zone)
        assert fire.local.astimezone(UTC) == fire.at and str(fire.local.tzinfo) == tz


@PROPERTY
@given(anchor=ANCHORS, every_s=EVERY, placed=zones_and_instants())
def test_an_interval_read_back_from_its_stored_text_is_the_same(
        anchor: datetime, every_s: int, placed: tuple[str, datetime]) -> None:
    tz, after = placed
    interval = Interval(every_s, anchor, tz)
    again = timetable_of(interval.cron, tz)
    assert isinstance(again, Interval)
    assert again.next_fires(after, 5) == interval.next_fires(after, 5)


@st.composite
def cron_lists(draw: st.DrawFn) -> list[str]:
    return draw(st.lists(EXPRESSIONS, min_size=1, max_size=4))


def _union(tables: list[Timetable], after: datetime, count: int) -> list[datetime]:
    instants: set[datetime] = set()
    for table in tables:
        instants.update(table.next_fires(after, count))
    return sorted(instants)[:count]


@PROPERTY
@given(crons=cron_lists(), placed=zones_and_instants())
def test_a_list_of_crons_fires_at_the_union_of_its_expressions_once_each(
        crons: list[str], placed: tuple[str, datetime]) -> None:
    tz, after = placed
    tables = [_table(cron, tz) for cron in crons]
    several = Several(tables)
    fires = several.next_fires(after, COUNT)
    assert fires == _union(tables, after, COUNT)
    assert all(a < b for a, b in pairwise(fires))   # one fire per instant
    # the stored text reads back to the same timetable, through a Schedule as jobs read it
    assert schedule(several.cron, tz).next_fires(after, COUNT) == fires


def _croniter_union(crons: list[str], tz: str, after: datetime, count: int) -> list[datetime]:
    """The first ``count`` fires after ``after`` of the union, by croniter's iteration of
    each expression (as naive wall-clock times, read on a zone without clock changes)."""
    zone = ZoneInfo(tz)
    start = after.astimezone(zone).replace(tzinfo=None)
    instants: set[datetime] = set()
    for cron in crons:
        walk = croniter(_normalised(cron), start, day_or=parse_cron(cron).day_or)
        for _ in range(count):
            instants.add(walk.get_next(datetime).replace(tzinfo=zone).astimezone(UTC))
    return sorted(at for at in instants if at > after)[:count]


@PROPERTY
@given(crons=cron_lists(), tz=st.sampled_from(["UTC", "Asia/Kolkata", "Asia/Kathmandu"]),
       after=st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2030, 12, 31),
                          timezones=st.just(UTC)))
def test_a_list_of_crons_matches_the_union_of_croniter_without_clock_changes(
        crons: list[str], tz: str, after: datetime) -> None:
    tables = [_table(cron, tz) for cron in crons]
    assert Several(tables).next_fires(after, 10) == _croniter_union(crons, tz, after, 10)


def test_the_zones_include_clock_changes() -> None:
    assert {"America/New_York", "Europe/London", "Australia/Lord_Howe"} <= set(ZONES)
