"""Time zones: looking them up, and placing a local wall-clock time on the UTC line.

This module owns the mechanics of a zone's clock: whether a naive local time happens once,
twice (a repeated hour, when clocks go back) or never (a gap, when clocks go forward), and
the exact instant a change happens. It decides nothing about *firing*; ``dst.py`` applies
the cron rules to what this module reports. Instants here are naive datetimes in UTC, which
keeps comparisons exact and cheap; callers attach ``timezone.utc`` on the way out.

Only ``zoneinfo`` is consulted (IANA data from the system or the ``tzdata`` package); no
offset is ever assumed, so 30-minute (Australia/Lord_Howe) and 2-hour shifts, or a change
at midnight (America/Santiago), need no special case.
"""

from __future__ import annotations

import difflib
from datetime import datetime, timedelta
from enum import Enum
from functools import cache, lru_cache
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from crondepot.base.errors import InvalidSchedule

__all__ = ["Kind", "Placement", "change_instant", "place", "validate_zone", "wall_clock_start"]

_SECOND = timedelta(seconds=1)
# A clock change needs at most ~13 halvings of a 2-hour window; the bound only guards
# against a zone database that breaks the one-change-per-window assumption.
_MAX_HALVINGS = 64


@lru_cache(maxsize=1024)
def _load_zone(tz: str) -> ZoneInfo:
    # Cached so the scheduler's hot path never opens the zone database; only successes
    # are cached (lru_cache does not keep exceptions), and valid zones number ~600.
    return ZoneInfo(tz)


def validate_zone(tz: object) -> ZoneInfo:
    """The IANA zone named ``tz``; raises InvalidSchedule (field ``tz``) if there is none."""
    if not isinstance(tz, str):
        raise InvalidSchedule(
            f"tz: expected an IANA time zone name like 'Europe/London', got {type(tz).__name__}",
            field="tz",
        )
    if not tz.strip():
        raise InvalidSchedule(
            "tz: the time zone is empty; expected an IANA name like 'Asia/Kolkata'", field="tz"
        )
    try:
        return _load_zone(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        # ValueError: keys zoneinfo refuses outright (absolute or '..' paths);
        # OSError: a name that resolves to something that is not a zone file.
        raise InvalidSchedule(f"tz: unknown time zone {tz!r}{_did_you_mean(tz)}",
                              field="tz") from None


@cache
def _zones_by_area() -> dict[str, dict[str, str]]:
    """Every IANA zone name by its area ("europe", or "" for "UTC"), then by its lowercase
    spelling."""
    areas: dict[str, dict[str, str]] = {}
    for name in available_timezones():
        area = name.split("/", 1)[0].lower() if "/" in name else ""
        areas.setdefault(area, {})[name.lower()] = name
    return areas


def _did_you_mean(tz: str) -> str:
    """"; did you mean 'Europe/Berlin'?" for a near miss (a case slip, a typo), else "".

    Compared within the zone's area only (after correcting the area itself), so a refusal
    stays cheap (an import of many lines with a bad zone pays it per line), never a
    comparison with all ~600 names."""
    areas = _zones_by_area()
    key = tz.strip().lower()
    if len(key) > 40:       # longer than any zone name (32): no near miss, nothing to compare
        return ""
    area = key.split("/", 1)[0] if "/" in key else ""
    if area not in areas:
        fixed = difflib.get_close_matches(area, [a for a in areas if a], n=1, cutoff=0.75)
        if not fixed:
            return ""
        key = fixed[0] + key[len(area):]
        area = fixed[0]
    names = areas[area]
    close = [names[key]] if key in names else [
        names[m] for m in difflib.get_close_matches(key, list(names), n=1, cutoff=0.8)]
    return f"; did you mean {close[0]!r}?" if close else ""


class Kind(Enum):
    """How often a local wall-clock time happens."""

    ONCE = "once"
    REPEATED = "repeated"  # clocks went back: the time happens twice
    SKIPPED = "skipped"  # clocks went forward: the time never happens


class Placement(NamedTuple):
    """Where a local wall-clock time lands in UTC (naive UTC datetimes).

    ONCE: ``first`` is the instant. REPEATED: ``first`` and ``second`` are the two passes.
    SKIPPED: ``first`` is the change instant, the first real instant after the gap.
    """

    kind: Kind
    first: datetime
    second: datetime | None = None


def _offset_at(zone: ZoneInfo, instant: datetime) -> timedelta | None:
    """The zone's UTC offset at a naive UTC instant."""
    return zone.fromutc(instant.replace(tzinfo=zone)).utcoffset()


def change_instant(zone: ZoneInfo, before: datetime, after: datetime) -> datetime:
    """The first whole-second instant in ``(before, after]`` with a different UTC offset.

    ``before`` and ``after`` are naive UTC instants on either side of one clock change.
    Binary search over seconds: exact, and bounded by ``_MAX_HALVINGS``.
    """
    old = _offset_at(zone, before)
    low, high = before, after
    for _ in range(_MAX_HALVINGS):
        if high - low <= _SECOND:
            break
        middle = low + (high - low) // 2
        middle = middle.replace(microsecond=0)
        if _offset_at(zone, middle) == old:
            low = middle
        else:
            high = middle
    return high


def place(zone: ZoneInfo, wall: datetime) -> Placement:
    """Where the naive local time ``wall`` happens in ``zone``.

    zoneinfo answers with ``fold``: fold=0 reads the time with the offset in force before a
    change, fold=1 with the offset after it. They agree for an ordinary time; for a repeated
    time fold=0 is the earlier real instant; for a skipped time the two readings cross (the
    fold=0 instant comes *after* the fold=1 one) and the change lies between them.
    """
    before = zone.utcoffset(wall)
    after = zone.utcoffset(wall.replace(fold=1))
    assert before is not None and after is not None  # a ZoneInfo always has an offset
    first = wall - before
    if before == after:
        return Placement(Kind.ONCE, first)
    second = wall - after
    if first < second:
        return Placement(Kind.REPEATED, first, second)
    return Placement(Kind.SKIPPED, change_instant(zone, second, first))


def wall_clock_start(zone: ZoneInfo, after: datetime) -> datetime:
    """The naive local time from which matches must be read to find every fire > ``after``.

    Usually ``after``'s own wall-clock time: local times read in order map to increasing
    instants, except that a repeated hour's second pass comes after its first. So when
    ``after`` (a naive UTC instant) lies in a first pass, the second pass of the earlier
    part of that hour is still to come, and the read starts one shift earlier; the caller
    drops whatever maps to ``after`` or before.
    """
    local = zone.fromutc(after.replace(tzinfo=zone))
    wall = local.replace(tzinfo=None)
    if local.fold == 1:
        return wall  # already in the second pass: nothing earlier on the wall is left
    first = zone.utcoffset(wall)
    second = zone.utcoffset(wall.replace(fold=1))
    assert first is not None and second is not None
    if first > second:
        return wall - (first - second)
    return wall
