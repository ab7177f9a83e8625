"""Delivery windows against their own definition, in zones with DST gaps, repeats and
half-hour offsets: the opening returned is the first instant inside the window after the
instant asked about (every instant between them is outside and has the same next opening),
and an instant inside is inside by the local clock."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from crondepot.timetable.delivery import DeliveryWindow

PROPERTY = settings(max_examples=300, deadline=None)
ZONES = ["Europe/London", "America/New_York", "Australia/Lord_Howe", "America/Santiago",
         "Asia/Kolkata", "UTC"]
_SECOND = timedelta(seconds=1)

times = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))
windows = st.builds(
    DeliveryWindow, start=times, end=times,
    days=st.frozensets(st.integers(0, 6), min_size=1),
    outside=st.sampled_from(["defer", "skip"])).filter(lambda w: w.start != w.end)
instants = st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2028, 12, 31),
                        timezones=st.just(UTC))
# Around clock changes of the zones above (give or take a day and a half), where random
# instants rarely fall: London and New York in both directions, Lord Howe's half hour,
# Santiago's midnight.
CHANGES = [datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC),
           datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC),
           datetime(2026, 4, 4, 15, tzinfo=UTC), datetime(2026, 10, 3, 15, 30, tzinfo=UTC),
           datetime(2026, 4, 5, 3, tzinfo=UTC), datetime(2026, 9, 6, 4, tzinfo=UTC)]
near_changes = st.builds(lambda at, minutes: at + timedelta(minutes=minutes),
                         st.sampled_from(CHANGES), st.integers(-36 * 60, 36 * 60))


def _inside_by_the_clock(window: DeliveryWindow, at: datetime, tz: str) -> bool:
    """The local wall-clock reading of ``at`` lies in a window that opened on a listed
    day (away from clock changes, where the reading repeats or skips)."""
    local = at.astimezone(ZoneInfo(tz)).replace(tzinfo=None)
    for back in (0, 1):
        day = local.date() - timedelta(days=back)
        if day.weekday() not in window.days:
            continue
        opens = datetime.combine(day, window.start)
        closes = datetime.combine(day + timedelta(days=1) if window.overnight else day,
                                  window.end)
        if opens <= local < closes:
            return True
    return False


def _near_a_change(at: datetime, tz: str) -> bool:
    zone = ZoneInfo(tz)
    return any(zone.utcoffset((at + timedelta(hours=h)).astimezone(zone).replace(
        tzinfo=None)) != zone.utcoffset(at.astimezone(zone).replace(tzinfo=None))
        for h in (-26, 26))


@PROPERTY
@given(window=windows, at=instants | near_changes, tz=st.sampled_from(ZONES),
       fraction=st.floats(0, 1))
def test_the_opening_is_the_first_instant_inside(window: DeliveryWindow, at: datetime,
                                                 tz: str, fraction: float) -> None:
    opening = window.opening(at, tz)
    if opening is None:
        return
    assert at < opening <= at + timedelta(days=8)
    assert window.opening(opening, tz) is None                # inside at the opening
    assert window.opening(opening - _SECOND, tz) == opening   # and not a second before
    between = at + (opening - at) * fraction
    if between < opening:
        assert window.opening(between, tz) == opening


@PROPERTY
@given(window=windows, at=instants, tz=st.sampled_from(ZONES))
def test_inside_agrees_with_the_local_clock_away_from_changes(
        window: DeliveryWindow, at: datetime, tz: str) -> None:
    if _near_a_change(at, tz):
        return
    assert (window.opening(at, tz) is None) == _inside_by_the_clock(window, at, tz)
