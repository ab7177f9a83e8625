"""Labels, bulk actions by filter and holds, against a real database.

Bulk pause/resume/cancel keep the ledger rule exactly as the single-job actions do (the
fires owed before the change are written first); a hold keeps a tenant's runs of a rate
limit or host queued without touching jobs, and another tenant's are never affected.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import psycopg
import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job import bulk
from crondepot.job.bulk import BulkFilter
from crondepot.job.store import JobFilter, get_job, list_jobs
from crondepot.limits import holds
from crondepot.limits.buckets import set_limit
from crondepot.queue.claim import claim_runs
from crondepot.timetable import spread_offset
from tests.integration.test_ledger import add, assert_clean, at, drain, rows, spread_key
from tests.support.jobs import grant_limit, tenant

SMS = {"type": "http", "url": "https://SMS.example.com/send"}
MAIL = {"type": "http", "url": "https://mail.example.com:8443/send"}


@pytest.fixture
def t(conn: psycopg.Connection[Any]) -> int:
    return tenant(conn)


def test_labels_are_stored_listed_and_filtered_by_containment(
        conn: psycopg.Connection[Any], t: int) -> None:
    a = add(conn, t, at(8), key="a", cron="0 9 * * *", labels={"bank": "42", "kind": "emi"})
    b = add(conn, t, at(8), key="b", cron="0 9 * * *", labels={"bank": "42"})
    add(conn, t, at(8), key="c", cron="0 9 * * *")
    assert get_job(conn, t, a).spec.labels == {"bank": "42", "kind": "emi"}
    assert [j.id for j in list_jobs(conn, t, JobFilter(labels={"bank": "42"}))] == [a, b]
    both = JobFilter(labels={"bank": "42", "kind": "emi"})
    assert [j.id for j in list_jobs(conn, t, both)] == [a]


def test_only_labelled_jobs_are_indexed_and_an_empty_selector_still_matches_all(
        conn: psycopg.Connection[Any], t: int) -> None:
    """jobs_labelled (migration 0039) holds labelled jobs only, so advancing an unlabelled
    job writes no GIN entry; the look-up still finds by label through it, and '{}' (which
    every job's labels contain) still names every job of the tenant."""
    a = add(conn, t, at(8), key="a", cron="0 9 * * *", labels={"bank": "42"})
    b = add(conn, t, at(8), key="b", cron="0 9 * * *")
    add(conn, tenant(conn, "bank7"), at(8), key="a", cron="0 9 * * *", labels={"bank": "42"})
    (predicate,) = conn.execute("SELECT pg_get_expr(indpred, indrelid) FROM pg_index "
                                "WHERE indexrelid = 'jobs_labelled'::regclass").fetchone()
    assert predicate == "(labels <> '{}'::jsonb)"

    def labelled(selector: str) -> list[int]:
        return sorted(r[0] for r in conn.execute(
            "SELECT crondepot_labelled_jobs(%s, %s::jsonb)", (t, selector)))

    assert labelled('{"bank": "42"}') == [a]
    assert labelled("{}") == [a, b]
    assert labelled('{"bank": "7"}') == []
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT j.id FROM jobs AS j WHERE j.labels @> %s::jsonb "
            "AND j.labels <> '{}'::jsonb", ('{"bank": "42"}',)))
    assert "jobs_labelled" in plan


@pytest.mark.parametrize(("labels", "field"), [
    ({"": "x"}, "labels."), ({"-bad": "x"}, "labels.-bad"), ({"k": 1}, "labels.k"),
    ({"k": "a=b"}, "labels.k"), ({f"k{i}": "v" for i in range(17)}, "labels"),
    ({"k": "x" * 64}, "labels.k")])
def test_bad_labels_are_refused_naming_the_field(labels: Any, field: str) -> None:
    from crondepot.job import JobSpec
    with pytest.raises(InvalidJob) as err:
        JobSpec.from_document({"cron": "* * * * *", "tz": "UTC", "labels": labels,
                               "target": {"type": "python", "handler": "x"}})
    assert err.value.field == field


def test_a_filter_needs_a_criterion_and_checks_each() -> None:
    with pytest.raises(InvalidJob, match="at least one criterion"):
        BulkFilter.checked()
    for bad, field in (({"priority": "high"}, "priority"), ({"host": "https://x/"}, "host"),
                       ({"rate_limit": "Bad Name"}, "rate_limit"), ({"key_prefix": ""},
                                                                   "key_prefix")):
        with pytest.raises(InvalidJob) as err:
            BulkFilter.checked(**bad)
        assert err.value.field == field


def test_bulk_pause_matches_every_criterion_and_leaves_another_tenant_alone(
        conn: psycopg.Connection[Any], t: int) -> None:
    other = tenant(conn, "bank7")
    mine = [add(conn, t, at(8), key=f"emi:{i}", cron="0 9 * * *", target=SMS,
                labels={"bank": "42"}) for i in range(5)]
    mail = add(conn, t, at(8), key="emi:mail", cron="0 9 * * *", target=MAIL,
               labels={"bank": "42"})
    theirs = [add(conn, other, at(8), key=f"emi:{i}", cron="0 9 * * *", target=SMS,
                  labels={"bank": "42"}) for i in range(3)]
    where = BulkFilter.checked(key_prefix="emi:", labels={"bank": "42"},
                               host="sms.example.com")
    seen = bulk.preview(conn, t, "pause", where, sample=2)
    assert (seen.count, seen.sample) == (5, ["emi:0", "emi:1"])
    assert all(not get_job(conn, t, j).paused for j in mine)      # a dry run changes nothing
    assert bulk.apply(conn, t, "pause", where, now=at(8, 30), batch=2) == 5
    assert all(get_job(conn, t, j).paused for j in mine)
    assert not get_job(conn, t, mail).paused
    assert not any(get_job(conn, other, j).paused for j in theirs)
    assert bulk.preview(conn, t, "pause", where).count == 0       # already paused
    assert bulk.apply(conn, t, "resume", where, now=at(8, 40)) == 5
    assert bulk.apply(conn, t, "cancel", BulkFilter.checked(priority="normal"),
                      now=at(8, 50)) == 6
    assert not any(get_job(conn, t, j).active for j in [*mine, mail])
    assert all(get_job(conn, other, j).active for j in theirs)


def test_bulk_pause_and_resume_inside_the_spread_window_keep_the_ledger(
        conn: psycopg.Connection[Any], t: int) -> None:
    key = spread_key(at_least=600)
    offset = timedelta(seconds=spread_offset(key, 1800))
    job_id = add(conn, t, at(8), key="emi", cron="0 9 * * *", labels={"bank": "42"},
                 spread={"seconds": 1800, "key": key})
    where = BulkFilter.checked(labels={"bank": "42"})
    drain(conn, at(9, 5))                     # 09:00 passed, due 09:00 + offset not yet
    assert bulk.apply(conn, t, "pause", where, now=at(9, 5)) == 1
    # Today's 09:00 is owed: written by the pause, due when it always was.
    assert rows(conn, job_id) == [(at(9), "queued", None, at(9) + offset)]
    drain(conn, at(9, 0, day=2))
    assert bulk.apply(conn, t, "resume", where, now=at(9, 5, day=2)) == 1
    assert [r[1:3] for r in rows(conn, job_id)] == [("queued", None), ("skipped", "paused"),
                                                  ("skipped", "paused")]
    drain(conn, at(9, 0, day=3))
    assert_clean(conn, at(9, 1, day=3))


def test_bulk_cancel_cancels_queued_runs_and_keeps_the_ledger(
        conn: psycopg.Connection[Any], t: int) -> None:
    job_id = add(conn, t, at(8), key="emi", cron="0 9 * * *", target=SMS)
    drain(conn, at(9, 1))
    assert bulk.apply(conn, t, "cancel", BulkFilter.checked(host="sms.example.com"),
                      now=at(9, 2)) == 1
    assert [r[1] for r in rows(conn, job_id)] == ["cancelled"]
    assert_clean(conn, at(9, 3))


def _claim(conn: psycopg.Connection[Any], now: Any) -> list[int]:
    return sorted(r.job_id for r in claim_runs(conn, owner="w", shares={"normal": 20},
                                               now=now))


def test_the_claim_skips_held_runs_and_takes_them_after_the_resume(
        conn: psycopg.Connection[Any], t: int) -> None:
    other = tenant(conn, "bank7")
    set_limit(conn, "sms-gateway", 100, 100)
    for tenant_id in (t, other):
        grant_limit(conn, tenant_id, "sms-gateway")
    limited = add(conn, t, at(8), key="l", cron="0 9 * * *", rate_limit="sms-gateway")
    hosted = add(conn, t, at(8), key="h", cron="0 9 * * *", target=SMS)
    free = add(conn, t, at(8), key="f", cron="0 9 * * *", target=MAIL)
    theirs = add(conn, other, at(8), key="l", cron="0 9 * * *", rate_limit="sms-gateway")
    drain(conn, at(9))
    assert holds.hold(conn, t, "rate_limit", "sms-gateway")
    assert not holds.hold(conn, t, "rate_limit", "sms-gateway")     # held already
    assert holds.hold(conn, t, "host", "SMS.example.com")
    listed = {(h.kind, h.name): h.queued for h in holds.list_holds(conn, t)}
    assert listed == {("rate_limit", "sms-gateway"): 1, ("host", "sms.example.com"): 1}
    assert _claim(conn, at(9, 1)) == sorted([free, theirs])        # B's runs are not held
    assert _claim(conn, at(9, 1)) == []
    assert holds.release(conn, t, "rate_limit", "sms-gateway")
    assert _claim(conn, at(9, 2)) == [limited]
    assert holds.release(conn, t, "host", "sms.example.com")
    assert not holds.release(conn, t, "host", "sms.example.com")
    assert _claim(conn, at(9, 3)) == [hosted]
    assert holds.list_holds(conn, t) == []


def test_a_held_run_past_its_deadline_is_not_sent_after_the_resume(
        conn: psycopg.Connection[Any], t: int) -> None:
    job_id = add(conn, t, at(8), key="h", cron="0 9 * * *", target=SMS,
                 misfire={"policy": "skip_after", "seconds": 600})
    drain(conn, at(9))
    holds.hold(conn, t, "host", "sms.example.com")
    assert _claim(conn, at(9, 1)) == []
    holds.release(conn, t, "host", "sms.example.com")
    assert _claim(conn, at(9, 30)) == []               # past 09:10: never leased
    assert rows(conn, job_id)[0][1] == "queued"       # maintenance records it skipped


def test_bad_holds_are_refused_naming_the_field(conn: psycopg.Connection[Any], t: int) -> None:
    for kind, name, field in (("host", "https://x.example/", "host"),
                              ("rate_limit", "Bad Name", "name"), ("queue", "x", "kind")):
        with pytest.raises(InvalidJob) as err:
            holds.hold(conn, t, kind, name)
        assert err.value.field == field
    assert holds.list_holds(conn, t) == []
