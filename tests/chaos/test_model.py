"""The chaos report's model of a job's fires under the operator's edits and pauses."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from crondepot.job.spec import JobSpec
from crondepot.timetable import spread_offset
from crondepot_testkit import chaos_model


def _spec(cron: str = "* * * * *", spread: int = 50) -> JobSpec:
    return JobSpec.from_document({
        "key": "k-1", "cron": cron, "tz": "UTC", "spread": {"seconds": spread},
        "target": {"type": "http", "url": "http://127.0.0.1:9/sms"}})


def _at(minute: int, second: int = 0) -> datetime:
    return datetime(2026, 1, 1, 12, minute, second, tzinfo=UTC)


def _job(*changes: chaos_model.Change, spec: JobSpec | None = None) -> chaos_model.Job:
    return chaos_model.Job(7, spec or _spec(), "every-minute", "plain", _at(0), list(changes))


def test_a_pause_records_its_fires_at_the_resume_and_the_fires_before_it_run() -> None:
    spec = _spec()
    job = _job(chaos_model.Change("pause", _at(0, 30), spec, True, 2),
               chaos_model.Change("resume", _at(2, 10), spec, False, 3))
    fires = chaos_model.job_fires(job, _at(3))
    assert [(f.nominal, f.state) for f in fires] == [
        (_at(0), "run"), (_at(1), "paused"), (_at(2), "paused"), (_at(3), "run")]
    offset = spread_offset("k-1", 50)
    # written by the pause before its due time if the spread puts it after 12:00:30
    assert fires[0].early == (offset > 30)
    assert fires[2].early == (offset > 10)


def test_fires_after_a_pause_nobody_resumed_are_pending() -> None:
    job = _job(chaos_model.Change("pause", _at(1, 5), _spec(), True, 2))
    assert [f.state for f in chaos_model.job_fires(job, _at(4))] == [
        "run", "run", "pending", "pending", "pending"]
    assert [e.run_id for e in chaos_model.expected_runs([job], _at(5).timestamp())] == [
        "7:" + str(int(_at(0).timestamp())), "7:" + str(int(_at(1).timestamp()))]


def test_a_cron_edit_keeps_the_old_timetable_up_to_it_and_a_spread_edit_moves_due_times() -> None:
    spec = _spec()
    every_two = replace(spec, cron="*/2 * * * *")
    narrow = replace(every_two, spread_seconds=10)
    job = _job(chaos_model.Change("edit-cron", _at(1, 20), every_two, False, 2),
               chaos_model.Change("edit-spread", _at(4, 30), narrow, False, 3))
    fires = chaos_model.job_fires(job, _at(8))
    assert [f.nominal for f in fires] == [_at(0), _at(1), _at(2), _at(4), _at(6), _at(8)]
    wide, small = spread_offset("k-1", 50), spread_offset("k-1", 10)
    assert [f.due - f.nominal.timestamp() for f in fires] == [wide] * 4 + [small] * 2
    assert all(f.state == "run" for f in fires)


def test_an_edit_while_paused_records_the_paused_fires_and_stays_paused() -> None:
    spec = _spec()
    edited = replace(spec, payload={"v": 1})
    job = _job(chaos_model.Change("pause", _at(0, 30), spec, True, 2),
               chaos_model.Change("edit-payload", _at(2, 30), edited, True, 3),
               chaos_model.Change("resume", _at(3, 30), edited, False, 4))
    assert [f.state for f in chaos_model.job_fires(job, _at(5))] == [
        "run", "paused", "paused", "paused", "run", "run"]
    assert chaos_model.job_fires(job, _at(1) - timedelta(seconds=1))[-1].nominal == _at(0)


def test_the_first_fire_a_change_left_marks_when_it_took_effect() -> None:
    # The pause's transaction began at 12:00:59.990; it waited for the row lock (a tick held
    # it) and took effect after 12:01:00: that fire was settled (a run), 12:02 is the first
    # of the pause. Without next_fire the transaction's start is all the model knows.
    spec = _spec()
    began = _at(0, 59) + timedelta(milliseconds=990)
    late = _job(chaos_model.Change("pause", began, spec, True, 2, next_fire=_at(2)))
    assert [f.state for f in chaos_model.job_fires(late, _at(3))] == [
        "run", "run", "pending", "pending"]
    unknown = _job(chaos_model.Change("pause", began, spec, True, 2))
    assert [f.state for f in chaos_model.job_fires(unknown, _at(3))] == [
        "run", "pending", "pending", "pending"]
    # a cron edit's instant is the new timetable's start, recorded exactly
    every_two = replace(spec, cron="*/2 * * * *")
    edited = _job(chaos_model.Change("edit-cron", _at(1, 0) + timedelta(milliseconds=3), every_two,
                               False, 2, next_fire=_at(2)))
    assert [f.nominal for f in chaos_model.job_fires(edited, _at(4))] == [
        _at(0), _at(1), _at(2), _at(4)]
