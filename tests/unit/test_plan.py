"""Catch-up and misfire rules, as pure functions of (job, now)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from crondepot.scheduler.plan import DueJob, local_deadline, plan
from crondepot.timetable import Timetable

EVERY_MINUTE = Timetable("* * * * *", "UTC")


def _next(timetable: Timetable):  # type: ignore[no-untyped-def]
    def lookup(after: datetime) -> datetime | None:
        fires = timetable.next_fires(after, 1)
        return fires[0] if fires else None
    return lookup


def _job(**overrides: object) -> DueJob:
    fields: dict[str, object] = dict(
        id=1, next_nominal_at=datetime(2026, 10, 5, 8, 58, tzinfo=UTC),
        spread_offset=timedelta(0), catchup="all", max_catchup=1000,
        misfire_policy="run_late", misfire_seconds=None, misfire_until=None, tz="UTC")
    fields.update(overrides)
    return DueJob(**fields)  # type: ignore[arg-type]


def test_outage_of_49_minutes_writes_50_runs_in_one_pass() -> None:
    start = datetime(2026, 10, 5, 8, 58, tzinfo=UTC)
    now = start + timedelta(minutes=49, seconds=5)
    result = plan(_job(next_nominal_at=start), now, _next(EVERY_MINUTE))
    assert len(result.runs) == 50
    assert all(r.skip_reason is None for r in result.runs)
    assert result.runs[0].run_id == f"1:{int(start.timestamp())}"
    assert result.next_nominal_at == start + timedelta(minutes=50)


def test_outage_with_catchup_latest_writes_one_run_and_49_skipped() -> None:
    start = datetime(2026, 10, 5, 8, 58, tzinfo=UTC)
    result = plan(_job(next_nominal_at=start, catchup="latest"),
                  start + timedelta(minutes=49, seconds=5), _next(EVERY_MINUTE))
    queued = [r for r in result.runs if r.skip_reason is None]
    skipped = [r for r in result.runs if r.skip_reason == "catchup_latest"]
    assert len(queued) == 1 and len(skipped) == 49
    assert queued[0].nominal_at == start + timedelta(minutes=49)


def test_catchup_bound_keeps_the_most_recent_and_records_the_cut() -> None:
    start = datetime(2026, 10, 5, 0, 0, tzinfo=UTC)
    result = plan(_job(next_nominal_at=start, max_catchup=10),
                  start + timedelta(minutes=99, seconds=1), _next(EVERY_MINUTE))
    assert len(result.runs) == 100
    cut = [r for r in result.runs if r.skip_reason == "catchup_bound"]
    kept = [r for r in result.runs if r.skip_reason is None]
    assert len(cut) == 90 and len(kept) == 10
    assert kept[-1].nominal_at == start + timedelta(minutes=99)


def test_nothing_due_yet_writes_nothing() -> None:
    start = datetime(2026, 10, 5, 9, 0, tzinfo=UTC)
    result = plan(_job(next_nominal_at=start), start - timedelta(seconds=1), _next(EVERY_MINUTE))
    assert result.runs == [] and result.next_nominal_at == start


# The three reminder rules, in Asia/Kolkata (09:00 local = 03:30 UTC).
EMI = dict(misfire_policy="skip_after_local_time", misfire_until=time(20, 0), tz="Asia/Kolkata")
RENEWAL = dict(misfire_policy="skip_after_local_time", misfire_until=time(12, 0),
               tz="Asia/Kolkata")
NINE_IST = datetime(2026, 10, 5, 3, 30, tzinfo=UTC)
DAILY_NINE = Timetable("0 9 * * *", "Asia/Kolkata")


def _one(now: datetime, **rules: object) -> str | None:
    result = plan(_job(next_nominal_at=NINE_IST, **rules), now, _next(DAILY_NINE))
    assert len(result.runs) == 1
    return result.runs[0].skip_reason


def test_emi_reminder_runs_late_until_20_00_local_the_same_day() -> None:
    assert _one(NINE_IST + timedelta(minutes=49), **EMI) is None
    assert _one(datetime(2026, 10, 5, 14, 29, tzinfo=UTC), **EMI) is None      # 19:59 IST
    assert _one(datetime(2026, 10, 5, 14, 31, tzinfo=UTC), **EMI) == "misfire_local_deadline"


def test_bill_reminder_always_runs_late() -> None:
    result = plan(_job(next_nominal_at=NINE_IST, tz="Asia/Kolkata", catchup="all"),
                  NINE_IST + timedelta(days=2, hours=3), _next(DAILY_NINE))
    assert len(result.runs) == 3
    assert all(r.skip_reason is None for r in result.runs)


def test_renewal_offer_is_skipped_after_noon_local() -> None:
    assert _one(datetime(2026, 10, 5, 6, 29, tzinfo=UTC), **RENEWAL) is None   # 11:59 IST
    assert _one(datetime(2026, 10, 5, 6, 31, tzinfo=UTC), **RENEWAL) == "misfire_local_deadline"


def test_skip_after_seconds_is_measured_from_the_due_time() -> None:
    rules = dict(misfire_policy="skip_after", misfire_seconds=3600, tz="Asia/Kolkata")
    assert _one(NINE_IST + timedelta(seconds=3600), **rules) is None
    assert _one(NINE_IST + timedelta(seconds=3601), **rules) == "misfire_deadline"


def test_spread_moves_the_due_time_not_the_run_id() -> None:
    offset = timedelta(seconds=754)
    result = plan(_job(next_nominal_at=NINE_IST, spread_offset=offset, tz="Asia/Kolkata"),
                  NINE_IST + offset, _next(DAILY_NINE))
    (run,) = result.runs
    assert run.due_at == NINE_IST + offset
    assert run.run_id == f"1:{int(NINE_IST.timestamp())}"
    assert result.next_run_at == NINE_IST + timedelta(days=1) + offset


def test_spread_run_is_not_due_before_its_offset() -> None:
    offset = timedelta(seconds=754)
    result = plan(_job(next_nominal_at=NINE_IST, spread_offset=offset, tz="Asia/Kolkata"),
                  NINE_IST + offset - timedelta(seconds=1), _next(DAILY_NINE))
    assert result.runs == []


def test_local_deadline_for_an_evening_job_is_the_next_morning() -> None:
    nominal = datetime(2026, 10, 5, 15, 30, tzinfo=UTC)                      # 21:00 IST
    assert local_deadline(nominal, time(8, 0), "Asia/Kolkata") == datetime(
        2026, 10, 6, 2, 30, tzinfo=UTC)


def test_local_deadline_in_a_dst_gap_is_the_change_instant() -> None:
    nominal = datetime(2026, 3, 8, 5, 0, tzinfo=UTC)                          # 00:00 EST
    assert local_deadline(nominal, time(2, 30), "America/New_York") == datetime(
        2026, 3, 8, 7, 0, tzinfo=UTC)


def test_local_deadline_in_a_repeated_hour_is_the_later_pass() -> None:
    nominal = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)                         # 00:00 EDT
    assert local_deadline(nominal, time(1, 30), "America/New_York") == datetime(
        2026, 11, 1, 6, 30, tzinfo=UTC)
