"""Spread offsets and run ids: stable, exact, and the same whichever zone names the instant."""

from __future__ import annotations

import calendar
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone
from hashlib import sha256
from zoneinfo import ZoneInfo

import pytest

from crondepot.timetable import run_id, spread_offset

NOMINAL = datetime(2026, 10, 5, 3, 30, tzinfo=UTC)


# --- run_id -----------------------------------------------------------------------------


def test_run_id_is_job_and_unix_seconds() -> None:
    assert run_id(7, NOMINAL) == "7:1791171000"
    assert run_id(7, NOMINAL) == f"7:{calendar.timegm(NOMINAL.utctimetuple())}"


@pytest.mark.parametrize(
    "zone",
    [
        timezone(timedelta(hours=5, minutes=30)),
        timezone(timedelta(hours=-4)),
        timezone(timedelta(hours=12, minutes=45)),
        ZoneInfo("America/New_York"),
        ZoneInfo("Asia/Kathmandu"),
        ZoneInfo("Australia/Lord_Howe"),
    ],
)
def test_run_id_is_the_same_in_every_zone(zone: timezone | ZoneInfo) -> None:
    assert run_id(7, NOMINAL.astimezone(zone)) == "7:1791171000"


def test_run_id_tells_the_two_passes_of_a_repeated_hour_apart() -> None:
    zone = ZoneInfo("America/New_York")
    first = datetime(2026, 11, 1, 1, 30, tzinfo=zone)
    second = first.replace(fold=1)
    assert run_id(1, first) == f"1:{calendar.timegm((2026, 11, 1, 5, 30, 0))}"
    assert run_id(1, second) == f"1:{calendar.timegm((2026, 11, 1, 6, 30, 0))}"


def test_run_id_floors_fractions_of_a_second() -> None:
    assert run_id(3, NOMINAL + timedelta(microseconds=999_999)) == "3:1791171000"
    before_epoch = datetime(1969, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC)
    assert run_id(3, before_epoch) == "3:-1"


def test_run_id_far_from_the_epoch_stays_exact() -> None:
    late = datetime(2999, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert run_id(1, late) == f"1:{calendar.timegm(late.utctimetuple())}"


def test_run_id_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="nominal must be an aware datetime"):
        run_id(7, datetime(2026, 10, 5, 3, 30))


# --- spread_offset --------------------------------------------------------------------


def test_spread_is_the_documented_sha256_value() -> None:
    expected = int.from_bytes(sha256(b"invoice-reminders").digest(), "big") % 1800
    assert spread_offset("invoice-reminders", 1800) == expected


def test_spread_is_deterministic_and_in_range() -> None:
    for seconds in (1, 2, 59, 60, 1800, 86_400):
        for i in range(200):
            offset = spread_offset(f"job-{i}", seconds)
            assert 0 <= offset < seconds
            assert spread_offset(f"job-{i}", seconds) == offset


@pytest.mark.parametrize("seconds", [0, -1, -3600])
def test_no_spread_without_positive_seconds(seconds: int) -> None:
    assert spread_offset("anything", seconds) == 0


def test_spread_handles_any_text() -> None:
    assert 0 <= spread_offset("", 60) < 60
    assert 0 <= spread_offset("ключ-✓", 60) < 60
    assert spread_offset("a", 10**6) != spread_offset("b", 10**6)


def test_spread_fills_every_minute_evenly() -> None:
    # 480,000 jobs over 30 minutes: 16,000 a minute expected; a hash that clumps fails this.
    per_minute = Counter(spread_offset(str(i), 1800) // 60 for i in range(480_000))
    assert sorted(per_minute) == list(range(30))
    assert all(15_500 <= count <= 16_500 for count in per_minute.values()), per_minute
