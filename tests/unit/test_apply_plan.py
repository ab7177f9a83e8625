"""The plan of an apply (job/apply.py), pure: the fires a change adds and removes, compared
by instant, with the notes DST gives them; the plan's JSON is stable; the document rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.cli.apply import print_plan
from crondepot.job.apply import (
    ApplyRefused,
    Change,
    Plan,
    Scope,
    fire_diff,
    read_documents,
)
from crondepot.job.spec import JobSpec
from crondepot.timetable import schedule

NY = "America/New_York"
AFTER = datetime(2026, 3, 6, 12, tzinfo=UTC)          # US clocks go forward on 8 March 2026
UNTIL = AFTER + timedelta(days=4)


def test_moving_a_fire_across_the_spring_gap_lists_both_sides_with_the_note() -> None:
    added, removed, cut = fire_diff(schedule("30 2 * * *", NY), schedule("0 4 * * *", NY),
                                    AFTER, UNTIL)
    assert not cut
    # 02:30 on 8 March does not exist: the old fire was moved to the change (07:00Z)
    assert [f.at.isoformat() for f in removed] == [
        "2026-03-07T07:30:00+00:00", "2026-03-08T07:00:00+00:00",
        "2026-03-09T06:30:00+00:00", "2026-03-10T06:30:00+00:00"]
    assert [f.note for f in removed] == [None, "moved", None, None]
    assert [f.at.isoformat() for f in added] == [
        "2026-03-07T09:00:00+00:00", "2026-03-08T08:00:00+00:00",
        "2026-03-09T08:00:00+00:00", "2026-03-10T08:00:00+00:00"]
    change = Change(key="bill:1", action="update", id=7, where="f.yaml:1", fields=["cron"],
                    added=added, removed=removed)
    doc = change.document()
    gap = [f for f in doc["removed"] if f["note"]]
    assert gap == [{"at": "2026-03-08T07:00:00Z", "local": "2026-03-08T03:00:00-04:00",
                    "note": "DST gap: scheduled 2026-03-08T02:30:00, fired at the change"}]


def test_fires_are_compared_by_instant() -> None:
    # the new 03:00 is the instant the gap moved the old 02:30 to: neither added nor removed
    added, removed, _ = fire_diff(schedule("30 2 * * *", NY), schedule("0 3 * * *", NY),
                                  AFTER, UNTIL)
    moment = datetime(2026, 3, 8, 7, tzinfo=UTC)
    assert moment not in {f.at for f in added} | {f.at for f in removed}
    assert len(added) == len(removed) == 3


def test_the_autumn_repeat_is_noted() -> None:
    after = datetime(2026, 10, 31, tzinfo=UTC)     # UK clocks go back on 25 Oct; US on 1 Nov
    added, removed, _ = fire_diff(None, schedule("30 1 * * *", NY), after,
                                  after + timedelta(days=2))
    assert removed == []
    assert [f.note for f in added] == [None, "repeated-once"]


def test_a_cancel_removes_every_fire_and_max_runs_bounds_them() -> None:
    _, removed, _ = fire_diff(schedule("0 * * * *", "UTC"), None, AFTER, UNTIL,
                              old_remaining=5)
    assert len(removed) == 5


def test_an_every_minute_job_is_counted_not_scanned_for_ever() -> None:
    added, _, cut = fire_diff(None, schedule("* * * * *", "UTC"), AFTER,
                              AFTER + timedelta(days=60))
    assert cut and len(added) == 50_000


def _plan() -> Plan:
    added, removed, _ = fire_diff(schedule("30 2 * * *", NY), schedule("0 4 * * *", NY),
                                  AFTER, UNTIL)
    plan = Plan(tenant_id=1, scope=Scope("deploy", "reminders"), prune=True, dry_run=True,
                days=4)
    plan.changes = [
        Change(key="z", action="cancel", id=3, where=None, removed=removed, runs_cancelled=2),
        Change(key="a", action="update", id=2, where="x", fields=["tz", "cron"], added=added,
               removed=removed),
        Change(key="m", action="create", id=None, where="y", added=added)]
    plan.unchanged = 9
    return plan


def test_the_plan_document_is_sorted_and_counts_everything() -> None:
    doc = _plan().document()
    assert [c["key"] for c in doc["changes"]] == ["a", "m", "z"]
    assert doc["changes"][0]["fields"] == ["cron", "tz"]
    assert doc["counts"] == {"created": 1, "updated": 1, "cancelled": 1, "unchanged": 9,
                             "changes": 3, "runs_cancelled": 2, "fires_added": 8,
                             "fires_removed": 8}
    assert "generated" not in str(doc) and doc["scope"] == {"deploy": "reminders"}


def test_the_plan_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    print_plan(_plan(), "bank42")
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "tenant bank42, scope deploy=reminders, dry run: nothing changed"
    assert "~ update a (job 2): cron, tz" in out
    assert "- cancel z (job 3); 2 queued run(s) cancelled" in out
    assert "# DST gap: scheduled 2026-03-08T02:30:00, fired at the change" in out
    assert out.rstrip().endswith("fires over the next 4 days: +8 -8")


def doc(key: str | None = "k", **more: object) -> dict[str, object]:
    return {"key": key, "cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "sms.send"}, **more}


def test_the_scope_is_stamped_and_checked() -> None:
    (declared,) = read_documents([("f:1", "", doc(labels={"bank": "42"}))],
                                 Scope("deploy", "reminders"))
    assert declared.spec.labels == {"deploy": "reminders", "bank": "42"}
    assert declared.spec == JobSpec.from_document(doc(labels={"bank": "42",
                                                              "deploy": "reminders"}))


@pytest.mark.parametrize(("bad", "field", "says"), [
    (doc(None), "jobs[0].key", "needs a key"),
    (doc(active=False), "jobs[0].active", "prune"),
    (doc(labels={"deploy": "loans"}), "jobs[0].labels.deploy", "scope is deploy=reminders"),
    (doc(cron="0 9 * *"), "jobs[0].cron", "jobs[0] (key 'k')"),
    ([1], "jobs[0]", "expected a JSON object"),
])
def test_document_rules_name_the_place_and_field(bad: object, field: str, says: str) -> None:
    with pytest.raises(ApplyRefused) as refused:
        read_documents([("jobs[0]", "jobs[0]", bad)], Scope("deploy", "reminders"))
    assert refused.value.field == field
    assert says in str(refused.value)


@pytest.mark.parametrize("text", ["deploy", "=x", "bad key=x", "a=b c"])
def test_a_bad_scope_is_refused(text: str) -> None:
    with pytest.raises(InvalidJob):
        Scope.parse(text)
