"""The chaos report's pure parts: expected runs from timetables, and naming a repeat's cause."""

from __future__ import annotations

from datetime import UTC, datetime

from crondepot.job.spec import JobSpec
from crondepot.timetable import run_id, spread_offset
from crondepot_testkit import chaos_model


def _spec(cron: str, spread: int = 0) -> JobSpec:
    doc = {"key": "k-1", "cron": cron, "tz": "UTC",
           "target": {"type": "http", "url": "http://127.0.0.1:9/sms"}}
    if spread:
        doc["spread"] = {"seconds": spread}
    return JobSpec.from_document(doc)


def test_expected_runs_keep_due_times_before_the_cutoff() -> None:
    spec = _spec("* * * * *", spread=50)
    first = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    offset = spread_offset("k-1", 50)
    cutoff = datetime(2026, 1, 1, 12, 3, tzinfo=UTC).timestamp()
    job = chaos_model.Job(7, spec, "every-minute", "plain", first)
    runs = chaos_model.expected_runs([job], cutoff)
    assert [r.run_id for r in runs] == [
        run_id(7, datetime(2026, 1, 1, 12, m, tzinfo=UTC)) for m in range(3)]
    assert all(r.due == r_nominal + offset for r, r_nominal in zip(
        runs, [first.timestamp() + 60 * m for m in range(3)], strict=True))


def test_a_repeat_is_attributed_to_the_fault_that_explains_it() -> None:
    kill = chaos_model.Fault(kind="kill-worker", at=1000.5, target="worker-2.g3")
    pause = chaos_model.Fault(kind="pause", at=2000.0, end=2025.0, target="worker-1.g1")
    faults = [kill, pause]
    assert chaos_model.attribute(1000.0, faults, {}, 8).startswith("worker kill -9")
    assert chaos_model.attribute(2001.0, faults, {}, 8).startswith("pause past the lease (by time)")
    assert chaos_model.attribute(2001.0, faults, {"lost-lease": "worker-1.1.log"}, 8).startswith(
        "pause past the lease: worker-1.1.log")
    assert chaos_model.attribute(1500.0, faults, {}, 8) == "UNEXPLAINED"
    # a kill long before the first 200 does not explain it
    assert chaos_model.attribute(1020.0, [kill], {}, 8) == "UNEXPLAINED"
