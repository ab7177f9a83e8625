"""Schedules as code (job/apply.py) against real PostgreSQL: upsert by key, unchanged jobs
untouched, prune only in scope, dry run changes nothing, all or nothing, concurrent applies,
export -> apply a no-op, and the ledger kept (verify clean)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.base.errors import InvalidJob
from crondepot.db import connect
from crondepot.job.apply import (
    ApplyRefused,
    Scope,
    apply_set,
    export_document,
    export_jobs,
    read_documents,
)
from crondepot.job.store import get_job
from crondepot.scheduler.ledger import verify
from crondepot.tenancy.audit import list_audit

SCOPE = Scope("deploy", "reminders")


def doc(key: str, cron: str = "0 9 5 * *", tz: str = "Asia/Kolkata", **more: Any) -> dict[str, Any]:
    return {"key": key, "cron": cron, "tz": tz,
            "target": {"type": "python", "handler": "sms.send"},
            "payload": {"template": "emi"}, **more}


def apply(conn: psycopg.Connection[Any], tenant: int, docs: list[dict[str, Any]],
          scope: Scope | None = SCOPE, **kw: Any) -> Any:
    declared = read_documents(((f"jobs[{i}]", f"jobs[{i}]", d) for i, d in enumerate(docs)),
                              scope)
    return apply_set(conn, tenant, declared, scope=scope, **kw)


def job_rows(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute("SELECT id, key, cron, tz, active, version, labels FROM jobs "
                        "ORDER BY id").fetchall()


def test_creates_then_unchanged_then_updates(conn: psycopg.Connection[Any],
                                             tenant_id: int) -> None:
    plan = apply(conn, tenant_id, [doc("emi:1"), doc("bill:2", cron="30 10 * * 1")])
    assert plan.counts["created"] == 2 and plan.counts["changes"] == 2
    assert all(c.id is not None for c in plan.changes)
    assert plan.counts["fires_added"] >= 1          # bill:2 fires every Monday
    rows = job_rows(conn)
    assert all(r[6] == {"deploy": "reminders"} for r in rows)
    again = apply(conn, tenant_id, [doc("emi:1"), doc("bill:2", cron="30 10 * * 1")])
    assert again.counts["changes"] == 0 and again.unchanged == 2
    assert job_rows(conn) == rows                   # not even the version moved
    changed = apply(conn, tenant_id, [doc("emi:1", cron="0 10 5 * *"),
                                      doc("bill:2", cron="30 10 * * 1")])
    (update,) = changed.changes
    assert update.action == "update" and update.fields == ["cron"]
    job = get_job(conn, tenant_id, update.id)
    assert job.spec.cron == "0 10 5 * *" and job.version == 2
    assert job.timetable_since is not None


def test_a_field_left_out_goes_back_to_its_default(conn: psycopg.Connection[Any],
                                                   tenant_id: int) -> None:
    apply(conn, tenant_id, [doc("emi:1", priority="bulk", spread={"seconds": 600})])
    plan = apply(conn, tenant_id, [doc("emi:1")])
    assert sorted(plan.changes[0].fields) == ["priority", "spread"]
    job = get_job(conn, tenant_id, plan.changes[0].id)
    assert job.spec.priority == "normal" and job.spec.spread_seconds == 0


def test_prune_cancels_only_the_scopes_jobs(conn: psycopg.Connection[Any],
                                            tenant_id: int) -> None:
    apply(conn, tenant_id, [doc("emi:1"), doc("emi:2"), doc("emi:3")])
    apply(conn, tenant_id, [doc("other:1")], scope=Scope("deploy", "loans"))
    apply(conn, tenant_id, [doc("loose:1")], scope=None)
    plan = apply(conn, tenant_id, [doc("emi:1")], prune=True)
    assert sorted((c.key, c.action) for c in plan.changes) == [("emi:2", "cancel"),
                                                              ("emi:3", "cancel")]
    active = {r[1] for r in job_rows(conn) if r[4]}
    assert active == {"emi:1", "other:1", "loose:1"}


def test_prune_needs_a_scope(conn: psycopg.Connection[Any], tenant_id: int) -> None:
    with pytest.raises(InvalidJob, match="prune needs a scope"):
        apply(conn, tenant_id, [doc("emi:1")], scope=None, prune=True)


def test_a_key_outside_the_scope_is_refused(conn: psycopg.Connection[Any],
                                            tenant_id: int) -> None:
    apply(conn, tenant_id, [doc("emi:1")], scope=None)
    before = job_rows(conn)
    with pytest.raises(ApplyRefused, match="not in the scope deploy=reminders"):
        apply(conn, tenant_id, [doc("emi:2"), doc("emi:1")])
    assert job_rows(conn) == before             # emi:2 was not created either


def test_dry_run_changes_nothing_and_says_what_it_would(conn: psycopg.Connection[Any],
                                                        tenant_id: int) -> None:
    apply(conn, tenant_id, [doc("emi:1"), doc("emi:2")])
    before = job_rows(conn)
    audit_before = len(list_audit(conn, tenant_id, limit=1000))
    plan = apply(conn, tenant_id, [doc("emi:1", cron="0 11 * * *"), doc("emi:9")],
                 prune=True, dry_run=True)
    assert sorted((c.key, c.action) for c in plan.changes) == [
        ("emi:1", "update"), ("emi:2", "cancel"), ("emi:9", "create")]
    assert [c.id for c in plan.changes if c.action == "create"] == [None]
    assert job_rows(conn) == before
    assert len(list_audit(conn, tenant_id, limit=1000)) == audit_before
    real = apply(conn, tenant_id, [doc("emi:1", cron="0 11 * * *"), doc("emi:9")], prune=True)
    dry, done = plan.document(), real.document()
    for d in (dry, done):
        d["dry_run"] = None
        for change in d["changes"]:
            change["id"] = None if change["action"] == "create" else change["id"]
    assert dry == done


def test_all_or_nothing_a_refused_job_changes_nothing(conn: psycopg.Connection[Any],
                                                      tenant_id: int) -> None:
    apply(conn, tenant_id, [doc("emi:1"), doc("emi:2")])
    before = job_rows(conn)
    bad = doc("emi:3", target={"type": "python", "handler": "not.granted"})
    with pytest.raises(InvalidJob) as refused:       # NotGranted, its kind kept
        apply(conn, tenant_id, [doc("emi:1", cron="0 11 * * *"), bad], prune=True)
    assert refused.value.field.startswith("jobs[1]")
    assert "jobs[1]" in str(refused.value) and "emi:3" in str(refused.value)
    assert job_rows(conn) == before


def test_document_errors_name_the_index_and_field(conn: psycopg.Connection[Any],
                                                  tenant_id: int) -> None:
    with pytest.raises(ApplyRefused) as refused:
        apply(conn, tenant_id, [doc("emi:1"), doc("emi:2", tz="Mars/Olympus"),
                                {**doc("x"), "key": None}, doc("emi:1")])
    fields = [f for f, _ in refused.value.problems]
    assert fields == ["jobs[1].tz", "jobs[2].key", "jobs[3].key"]
    assert "given twice (first at jobs[0])" in refused.value.problems[2][1]
    assert job_rows(conn) == []


def test_a_label_of_the_scopes_name_must_match(conn: psycopg.Connection[Any],
                                               tenant_id: int) -> None:
    with pytest.raises(ApplyRefused, match=r"labels\.deploy"):
        apply(conn, tenant_id, [doc("emi:1", labels={"deploy": "loans"})])
    plan = apply(conn, tenant_id, [doc("emi:1", labels={"deploy": "reminders", "bank": "42"})])
    assert plan.counts["created"] == 1


def test_a_pruned_key_cannot_come_back(conn: psycopg.Connection[Any], tenant_id: int) -> None:
    apply(conn, tenant_id, [doc("emi:1"), doc("emi:2")])
    apply(conn, tenant_id, [doc("emi:1")], prune=True)
    with pytest.raises(ApplyRefused, match="was cancelled"):
        apply(conn, tenant_id, [doc("emi:1"), doc("emi:2")])


def test_prune_counts_the_queued_runs_it_cancels(conn: psycopg.Connection[Any],
                                                 tenant_id: int) -> None:
    plan = apply(conn, tenant_id, [doc("emi:1"), doc("emi:2")])
    gone = next(c.id for c in plan.changes if c.key == "emi:2")
    conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
                 "available_at) SELECT %(r)s, %(j)s, %(t)s, 'normal', now(), now(), now()",
                 {"r": f"{gone}:1", "j": gone, "t": tenant_id})
    pruned = apply(conn, tenant_id, [doc("emi:1")], prune=True)
    (cancel,) = pruned.changes
    assert cancel.runs_cancelled == 1
    status = conn.execute("SELECT status FROM runs WHERE job_id = %s", (gone,)).fetchone()
    assert status == ("cancelled",)


def test_one_audit_entry_per_apply_with_counts(conn: psycopg.Connection[Any],
                                               tenant_id: int) -> None:
    apply(conn, tenant_id, [doc("emi:1"), doc("emi:2")])
    apply(conn, tenant_id, [doc("emi:1")])                 # a no-op: no entry
    entries = list_audit(conn, tenant_id, action="job.apply")
    assert len(entries) == 1
    assert entries[0].subject == "scope:deploy=reminders"
    assert entries[0].after is not None and entries[0].after["created"] == 2


def test_update_settles_fires_before_the_change(conn: psycopg.Connection[Any],
                                                tenant_id: int) -> None:
    start = datetime(2026, 3, 1, tzinfo=UTC)
    apply(conn, tenant_id, [doc("emi:1", cron="0 * * * *", tz="UTC")], now=start)
    # three hours later, no scheduler ran: the change settles the three fires first
    apply(conn, tenant_id, [doc("emi:1", cron="30 * * * *", tz="UTC")],
          now=start + timedelta(hours=3, minutes=5))
    runs = conn.execute("SELECT count(*) FROM runs").fetchone()
    assert runs is not None and runs[0] == 3
    later = start + timedelta(hours=3, minutes=10)
    assert verify(conn, tenant_id=tenant_id, since=start, now=later).clean


def test_concurrent_applies_one_wins_the_other_no_ops(db_url: str, conn: psycopg.Connection[Any],
                                                      tenant_id: int) -> None:
    docs = [doc(f"emi:{i}") for i in range(50)]
    plans: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def one() -> None:
        try:
            with connect(db_url) as own:
                barrier.wait()
                plans.append(apply(own, tenant_id, docs, prune=True))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    created = sorted(p.counts["created"] for p in plans)
    assert created == [0, 50]
    assert sorted(p.unchanged for p in plans) == [0, 50]
    assert len(job_rows(conn)) == 50


def test_export_then_apply_is_a_no_op(conn: psycopg.Connection[Any], tenant_id: int) -> None:
    zones = ["Asia/Kolkata", "America/New_York", "Europe/London", "Australia/Sydney", "UTC"]
    docs = []
    for i in range(300):
        d = doc(f"mix:{i}", cron=["0 9 5 * *", "30 1 * * *", "0 9 L * *", "H 10 * * 1-5",
                                  "0 9 * * 1#1"][i % 5], tz=zones[i % len(zones)])
        if i % 3 == 0:
            d["misfire"] = {"policy": "skip_after", "seconds": 3600}
        if i % 4 == 0:
            d["spread"] = {"seconds": 900, "key": f"bank{i % 7}"}
        if i % 5 == 0:
            d["retry"] = {"max_attempts": 5, "base_s": 30.5, "cap_s": 600}
        if i % 6 == 0:
            d["start_at"] = "2026-01-01T00:00:00Z"
            d["end_at"] = "2099-01-01T00:00:00+05:30"
            d["max_runs"] = 24
        if i % 7 == 0:
            d["priority"] = "urgent" if i % 2 else "bulk"
            d["labels"] = {"bank": str(i % 9), "kind": "emi"}
            d["catchup"] = "latest"
            d["max_catchup"] = 3
        if i % 11 == 0:
            d["target"] = {"type": "http", "url": "https://sms.example.com/send",
                           "timeout_s": 10}
        if i % 13 == 0:
            d["misfire"] = {"policy": "skip_after_local_time", "until": "18:00"}
            d["alert_after_failures"] = 4
            d["pause_after_failures"] = 9
            d["lease_seconds"] = 120
        if i % 17 == 0:
            for name in ("cron", "start_at", "end_at", "max_runs"):
                d.pop(name, None)
            d["at"] = "2099-06-01T09:00:00+05:30"
        docs.append(d)
    assert apply(conn, tenant_id, docs).counts["created"] == 300
    exported = [export_document(job) for job in export_jobs(conn, tenant_id, SCOPE, batch=64)]
    assert len(exported) == 300
    plan = apply(conn, tenant_id, exported, prune=True)
    assert plan.counts["changes"] == 0 and plan.unchanged == 300
    assert verify(conn, tenant_id=tenant_id).clean


def test_concurrent_applies_of_different_files_leave_one_whole(
        db_url: str, conn: psycopg.Connection[Any], tenant_id: int) -> None:
    apply(conn, tenant_id, [doc(f"emi:{i}") for i in range(20)])
    first = [doc(f"emi:{i}", cron="0 10 5 * *") for i in range(15)]
    second = [doc(f"emi:{i}", cron="0 11 5 * *") for i in range(5, 25)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def one(docs: list[dict[str, Any]]) -> None:
        try:
            with connect(db_url) as own:
                barrier.wait()
                apply(own, tenant_id, docs, prune=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(d,)) for d in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    # If the second went first, it pruned emi:0-4 and the first is refused (a pruned key
    # cannot come back): a conflict, never a mix.
    assert len(errors) <= 1 and all(isinstance(e, ApplyRefused) for e in errors), errors
    active = {(r[1], r[2]) for r in job_rows(conn) if r[4]}
    assert active in ({(d["key"], d["cron"]) for d in first},
                      {(d["key"], d["cron"]) for d in second})
