"""crondepot.Client and AsyncClient against the real API (served over HTTP, on a real
database): every method, its errors as typed exceptions, and paging. Each test runs with
both clients (the ``clients`` fixture)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot import client as C
from crondepot.db.clock import database_now
from crondepot.job import JobSpec
from crondepot.job.store import create_jobs
from crondepot.scheduler.tick import tick
from tests.support.api import EMI, granted_tenant, snapshot
from tests.support.client import Clients
from tests.support.runs import BANK42, newest_first, seed_runs


def _token(headers: dict[str, str]) -> str:
    return headers["Authorization"].removeprefix("Bearer ")


def _doc(key: str, **fields: Any) -> dict[str, Any]:
    return {**EMI, "key": key, **fields}


# -- jobs ----------------------------------------------------------------------------------

def test_create_get_and_get_by_key(api: Any) -> None:
    job = api.jobs.create(_doc("bank42:48213/emi"))
    assert job["key"] == "bank42:48213/emi" and job["version"] >= 1
    assert api.jobs.create(_doc("bank42:48213/emi"))["id"] == job["id"]    # idempotent
    read = api.jobs.get(job["id"])
    assert read["id"] == job["id"] and read["health"]["unhealthy"] is False
    assert api.jobs.get_by_key("bank42:48213/emi")["id"] == job["id"]     # "/" encoded


def test_a_bad_document_is_a_validation_error_listing_every_problem(
        api: Any, conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    with pytest.raises(C.ValidationError) as caught:
        api.jobs.create(_doc("bad", cron="61 * * * *", priority="high",
                             labels={"bank": 42}))
    fields = {error.field for error in caught.value.errors}
    assert {"priority", "labels.bank"} <= fields and len(fields) >= 3, caught.value.errors
    assert all(error.message for error in caught.value.errors)
    assert caught.value.status == 422 and caught.value.slug == "validation"
    assert snapshot(conn) == before


def test_the_same_key_with_another_document_is_a_key_conflict(api: Any) -> None:
    api.jobs.create(_doc("emi:1"))
    with pytest.raises(C.KeyConflict) as caught:
        api.jobs.create(_doc("emi:1", cron="0 10 5 * *"))
    assert caught.value.key == "emi:1" and isinstance(caught.value, C.Conflict)


def test_another_tenants_job_is_not_found_for_every_method(
        api: Any, clients: Clients, other: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    theirs = clients(_token(other)).jobs.create(_doc("theirs"))
    before = snapshot(conn)
    since = datetime.now(UTC) - timedelta(hours=2)
    for call in (lambda: api.jobs.get(theirs["id"]),
                 lambda: api.jobs.get_by_key("theirs"),
                 lambda: api.jobs.update(theirs["id"], {"cron": "0 10 5 * *"}, version=1),
                 lambda: api.jobs.pause(theirs["id"]),
                 lambda: api.jobs.resume(theirs["id"]),
                 lambda: api.jobs.trigger(theirs["id"]),
                 lambda: api.jobs.cancel(theirs["id"]),
                 lambda: api.jobs.backfill(theirs["id"], since=since),
                 lambda: api.runs.list_for_job(theirs["id"]),
                 lambda: api.runs.get(f"{theirs['id']}:1700000000")):
        with pytest.raises(C.NotFound):
            call()
    assert snapshot(conn) == before


def test_list_pages_and_iter_follows_next_cursor(api: Any) -> None:
    made = [api.jobs.create(_doc(f"emi:{i}", labels={"bank": "42" if i % 2 else "7"}))["id"]
            for i in range(5)]
    first = api.jobs.list(limit=2)
    assert [j["id"] for j in first["items"]] == made[:2] and first["next_cursor"]
    second = api.jobs.list(limit=2, cursor=first["next_cursor"])
    assert [j["id"] for j in second["items"]] == made[2:4]
    assert [j["id"] for j in api.jobs.iter(page_size=2)] == made
    assert [j["id"] for j in api.jobs.iter(page_size=1, labels={"bank": "42"})] == \
        made[1::2]
    assert [j["id"] for j in api.jobs.iter(key_prefix="emi:3")] == [made[3]]
    assert list(api.jobs.iter(paused=True)) == []


def test_update_needs_the_version_it_read(api: Any) -> None:
    job = api.jobs.create(_doc("emi:1"))
    changed = api.jobs.update(job["id"], {"cron": "0 10 5 * *"}, version=job["version"])
    assert changed["cron"] == "0 10 5 * *" and changed["version"] == job["version"] + 1
    with pytest.raises(C.VersionMismatch) as caught:
        api.jobs.update(job["id"], {"cron": "0 11 5 * *"}, version=job["version"])
    assert caught.value.current_version == changed["version"]
    with pytest.raises(C.ValidationError) as bad:
        api.jobs.update(job["id"], {"tz": "Mars/Olympus"}, version=changed["version"])
    assert [e.field for e in bad.value.errors] == ["tz"]


def test_pause_with_a_note_resume_trigger_and_cancel(api: Any) -> None:
    job = api.jobs.create(_doc("emi:1"))
    paused = api.jobs.pause(job["id"], note="SMS gateway migration until Monday 09:00")
    assert paused["paused"] and paused["pause"]["note"].startswith("SMS gateway")
    assert api.jobs.pause(job["id"])["pause"]["note"] == paused["pause"]["note"]
    assert not api.jobs.resume(job["id"])["paused"]
    fired = api.jobs.trigger(job["id"])
    assert fired["created"] and fired["run"]["run_id"] == fired["run_id"]
    assert api.runs.get(fired["run_id"])["status"] == "queued"
    assert api.jobs.cancel(job["id"]) is None
    assert api.jobs.cancel(job["id"]) is None                       # changes nothing
    assert api.jobs.get(job["id"])["cancelled_at"] is not None
    with pytest.raises(C.JobCancelled):
        api.jobs.pause(job["id"])


def test_backfill_writes_the_missing_fires(api: Any, conn: psycopg.Connection[Any]) -> None:
    tenant = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()
    assert tenant is not None
    start = database_now(conn).replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    (made,) = create_jobs(conn, tenant[0], [JobSpec.from_document(
        {"cron": "*/10 * * * *", "tz": "UTC",
         "target": {"type": "python", "handler": "test.noop"}})], now=start)
    while tick(conn, batch=100).full:
        pass
    nominals = [r[0] for r in conn.execute(
        "SELECT nominal_at FROM runs WHERE job_id = %s ORDER BY nominal_at", (made.id,))]
    conn.execute("DELETE FROM runs WHERE job_id = %s AND nominal_at = ANY(%s)",
                 (made.id, nominals[2:5]))
    dry = api.jobs.backfill(made.id, since=start, until=nominals[-1], dry_run=True)
    assert (dry["written"], dry["dry_run"], dry["from"]) == (3, True, start.isoformat())
    done = api.jobs.backfill(made.id, since=start, until=nominals[-1])
    assert done["written"] == 3 and len(done["written_run_ids"]) == 3
    assert api.jobs.backfill(made.id, since=start, until=nominals[-1])["written"] == 0
    with pytest.raises(C.ValidationError) as caught:
        api.jobs.backfill(made.id, since=datetime(2026, 1, 1))           # no UTC offset
    assert [e.field for e in caught.value.errors] == ["from"]


def test_import_documents_from_an_iterable(api: Any, conn: psycopg.Connection[Any]) -> None:
    documents = (_doc(f"imp:{i}") for i in range(3))
    done = api.jobs.import_documents([*documents, {"key": "imp:bad", "cron": "x"}])
    assert (done["lines"], done["created"], done["failed"]) == (4, 3, 1)
    assert [e["line"] for e in done["errors"]] == [4]
    again = api.jobs.import_documents(_doc(f"imp:{i}") for i in range(3))
    assert (again["created"], again["existing"]) == (0, 3)
    before = snapshot(conn)
    with pytest.raises(C.ValidationError) as caught:
        api.jobs.import_documents([{"key": "a", "cron": "x"}, {"key": "b", "tz": "Nowhere"}])
    assert [e.line for e in caught.value.errors] == [1, 2]
    assert caught.value.problem["failed"] == 2
    assert snapshot(conn) == before


def test_import_in_batches_numbers_lines_in_the_whole_iterable(api: Any) -> None:
    bad = {"key": "imp:bad", "cron": "x"}
    documents = [_doc("imp:0"), bad, _doc("imp:2"), bad, bad, bad, _doc("imp:6")]
    # the second batch (lines 4-6) is refused whole by the API: counted, not raised
    done = api.jobs.import_documents(iter(documents), batch_size=3)
    assert (done["lines"], done["created"], done["existing"], done["failed"]) == (7, 3, 0, 4)
    assert [e["line"] for e in done["errors"]] == [2, 4, 5, 6]
    with pytest.raises(C.ValidationError) as caught:
        api.jobs.import_documents([bad] * 4, batch_size=2)
    assert [e.line for e in caught.value.errors] == [1, 2, 3, 4]
    assert (caught.value.problem["lines"], caught.value.problem["failed"]) == (4, 4)
    with pytest.raises(C.ValidationError):
        api.jobs.import_documents([], batch_size=2)                 # no line at all
    with pytest.raises(ValueError, match="batch_size"):
        api.jobs.import_documents(documents, batch_size=0)


def test_put_by_key_creates_leaves_and_replaces_with_if_match(
        api: Any, conn: psycopg.Connection[Any]) -> None:
    document = {k: v for k, v in _doc("bank42:70001/emi").items() if k != "key"}
    made = api.jobs.put_by_key("bank42:70001/emi", document)               # "/" encoded
    assert made["key"] == "bank42:70001/emi" and made["version"] == 1
    same = api.jobs.put_by_key("bank42:70001/emi", document)
    assert (same["id"], same["version"]) == (made["id"], made["version"])   # unchanged
    changed = api.jobs.put_by_key("bank42:70001/emi", {**document, "cron": "0 10 5 * *"},
                                  version=made["version"])
    assert changed["cron"] == "0 10 5 * *" and changed["version"] == made["version"] + 1
    before = snapshot(conn)
    with pytest.raises(C.VersionMismatch) as stale:
        api.jobs.put_by_key("bank42:70001/emi", {**document, "cron": "0 11 5 * *"},
                            version=made["version"])
    assert stale.value.status == 412 and stale.value.current_version == changed["version"]
    with pytest.raises(C.VersionMismatch) as absent:
        api.jobs.put_by_key("bank42:70002/emi", document, version=1)        # no such job
    assert absent.value.current_version == 0
    with pytest.raises(C.ValidationError) as other_key:
        api.jobs.put_by_key("bank42:70001/emi", {**document, "key": "bank42:9/emi"})
    assert [e.field for e in other_key.value.errors] == ["key"]
    assert snapshot(conn) == before


def test_apply_a_dry_run_plans_and_a_real_apply_changes(
        api: Any, conn: psycopg.Connection[Any]) -> None:
    emi, bill = _doc("bank42:70001:emi"), _doc("bank42:70001:bill", cron="0 10 1 * *")
    before = snapshot(conn)
    plan = api.jobs.apply([emi, bill], scope={"deploy": "reminders"}, dry_run=True, days=40)
    assert (plan["dry_run"], plan["days"], plan["scope"]) == \
        (True, 40, {"deploy": "reminders"})
    assert plan["counts"]["created"] == 2 and plan["counts"]["fires_added"] >= 2
    assert [(c["key"], c["action"]) for c in plan["changes"]] == \
        [("bank42:70001:bill", "create"), ("bank42:70001:emi", "create")]
    assert snapshot(conn) == before                                      # nothing changed
    done = api.jobs.apply(iter([emi, bill]), scope={"deploy": "reminders"})
    assert done["counts"]["created"] == 2 and not done["dry_run"]
    assert api.jobs.get_by_key("bank42:70001:bill")["labels"] == {"deploy": "reminders"}
    again = api.jobs.apply([emi, bill], scope={"deploy": "reminders"})     # idempotent
    assert (again["counts"]["changes"], again["counts"]["unchanged"]) == (0, 2)
    pruned = api.jobs.apply([emi], scope={"deploy": "reminders"}, prune=True)
    assert [(c["key"], c["action"]) for c in pruned["changes"]] == \
        [("bank42:70001:bill", "cancel")]
    assert api.jobs.get_by_key("bank42:70001:bill")["cancelled_at"] is not None
    with pytest.raises(C.ValidationError) as caught:
        api.jobs.apply([bill, {**emi, "cron": "61 9 * * *"}], scope={"deploy": "reminders"})
    assert caught.value.errors[0].field == "jobs[1].cron"
    with pytest.raises(C.ValidationError) as unscoped:
        api.jobs.apply([], prune=True)
    assert [e.field for e in unscoped.value.errors] == ["prune"]


def test_overlap_calendar_and_delivery_window_round_trip(api: Any) -> None:
    api.calendars.put("in-bank-holidays", ["2027-01-26"])
    calendar = {"exclude": "in-bank-holidays", "on_excluded": "previous_business_day",
                "business_days": "mon-fri"}
    window = {"from": "09:00", "to": "21:00", "days": "mon-sat", "outside": "defer"}
    job = api.jobs.create(_doc("emi:1", overlap="skip", calendar=calendar,
                               delivery_window=window))
    assert (job["overlap"], job["calendar"], job["delivery_window"]) == \
        ("skip", calendar, window)
    read = api.jobs.get(job["id"])
    assert (read["overlap"], read["calendar"], read["delivery_window"]) == \
        ("skip", calendar, window)
    changed = api.jobs.update(job["id"], {"overlap": "buffer_one", "calendar": None,
                                          "delivery_window": "none"},
                              version=job["version"])
    assert (changed["overlap"], changed["calendar"], changed["delivery_window"]) == \
        ("buffer_one", None, "none")
    plain = api.jobs.create(_doc("emi:2"))
    assert (plain["overlap"], plain["calendar"], plain["delivery_window"]) == \
        ("allow", None, None)
    with pytest.raises(C.ValidationError) as caught:
        api.jobs.create(_doc("emi:3", overlap="queue",
                             delivery_window={"from": "25:00", "to": "21:00"}))
    assert {e.field for e in caught.value.errors} >= {"overlap", "delivery_window.from"}


def test_bulk_actions_by_filter(api: Any) -> None:
    for i in range(3):
        api.jobs.create(_doc(f"emi:{i}", labels={"bank": "42"}))
    api.jobs.create(_doc("other"))
    dry = api.bulk.pause(labels={"bank": "42"}, dry_run=True)
    assert dry == {"action": "pause", "dry_run": True, "count": 3,
                   "sample": ["emi:0", "emi:1", "emi:2"]}
    assert api.bulk.pause(key_prefix="emi:")["count"] == 3
    assert [j["key"] for j in api.jobs.iter(paused=True)] == ["emi:0", "emi:1", "emi:2"]
    assert api.bulk.resume(host="hooks.example.com", key_prefix="emi:")["count"] == 3
    assert api.bulk.cancel(rate_limit="sms-gateway", priority="normal",
                           key_prefix="emi:")["count"] == 3
    with pytest.raises(C.ValidationError):
        api.bulk.pause(dry_run=True)                                # no criterion


# -- runs and the dead letter --------------------------------------------------------------

@pytest.fixture
def seeded(conn: psycopg.Connection[Any], api: Any) -> dict[str, Any]:
    granted_tenant(conn, "acme")
    ids, jobs = seed_runs(conn)
    return {"ids": ids, "jobs": jobs}


def test_runs_across_jobs_per_job_and_one(api: Any, seeded: dict[str, Any]) -> None:
    ids = seeded["ids"]
    everything = [ids[label] for label in newest_first(BANK42)]
    assert [r["run_id"] for r in api.runs.iter(page_size=3)] == everything
    page = api.runs.list(limit=2)
    assert [r["run_id"] for r in page["items"]] == everything[:2] and page["next_cursor"]
    failed = api.runs.list(status="failed", job_id=seeded["jobs"]["B"])
    assert [r["run_id"] for r in failed["items"]] == [ids["b_f1"]]
    assert failed["items"][0]["job_key"] == "job-B"
    assert [r["run_id"] for r in api.runs.iter(error="410 Gone")] == [ids["a_f2"]]
    recent = api.runs.list(since=datetime.now(UTC) - timedelta(minutes=11))["items"]
    # ordered by when they ended, or are due for a run not ended (a_q1, in 10 minutes)
    assert {r["run_id"] for r in recent} == {ids["a_f1"], ids["a_s1"], ids["a_q1"]}
    job_a = [r["run_id"] for r in api.runs.iter_for_job(seeded["jobs"]["A"], page_size=2)]
    assert set(job_a) == {ids[label] for label in BANK42 if label.startswith("a_")}
    assert len(api.runs.list_for_job(seeded["jobs"]["A"], limit=2)["items"]) == 2
    run = api.runs.get(ids["a_f1"])
    assert run["status"] == "failed" and isinstance(run["attempts"], list)
    with pytest.raises(C.NotFound):
        api.runs.get(ids["d_f1"])                                    # acme's run
    with pytest.raises(C.ValidationError) as caught:
        api.runs.list(status="lost")
    assert [e.field for e in caught.value.errors] == ["status"]


def test_retry_a_failed_run_once(api: Any, seeded: dict[str, Any]) -> None:
    done = api.runs.retry(seeded["ids"]["a_f1"], ignore_deadline=True)
    assert done["previous_status"] == "failed" and done["run"]["status"] == "queued"
    with pytest.raises(C.RunNotRetryable) as caught:
        api.runs.retry(seeded["ids"]["a_f1"])
    assert caught.value.run_status == "queued"


def test_dead_letter_list_and_replay(api: Any, seeded: dict[str, Any]) -> None:
    dead = seeded["ids"]["b_d1"]
    assert [r["run_id"] for r in api.dead_letter.list()["items"]] == [dead]
    assert [r["run_id"] for r in api.dead_letter.iter(page_size=1,
                                                      job_id=seeded["jobs"]["B"])] == [dead]
    assert api.dead_letter.list(error="no such error")["items"] == []
    dry = api.dead_letter.replay(job_id=seeded["jobs"]["B"], dry_run=True,
                                 ignore_deadline=True)
    assert (dry["dry_run"], dry["count"]) == (True, 1)
    done = api.dead_letter.replay(run_ids=[dead], ignore_deadline=True)
    assert [r["run_id"] for r in done["items"]] == [dead]
    assert api.runs.get(dead)["status"] == "queued"
    with pytest.raises(C.ValidationError) as caught:
        api.dead_letter.replay()
    assert [e.field for e in caught.value.errors] == ["run_ids"]


# -- holds, limits, tokens -----------------------------------------------------------------

def test_holds_on_a_limit_and_a_host(api: Any) -> None:
    held = api.holds.pause_limit("sms-gateway")
    assert held == {"kind": "rate_limit", "name": "sms-gateway", "held": True,
                    "changed": True}
    assert not api.holds.pause_limit("sms-gateway")["changed"]
    assert api.holds.pause_host("hooks.example.com")["held"]
    listed = {(h["kind"], h["name"]) for h in api.holds.list()["items"]}
    assert listed == {("rate_limit", "sms-gateway"), ("host", "hooks.example.com")}
    assert api.holds.resume_limit("sms-gateway")["changed"]
    assert not api.holds.resume_host("hooks.example.com")["held"]
    assert api.holds.list()["items"] == []
    with pytest.raises(C.ValidationError):
        api.holds.pause_host("bad host!")


def test_limits_own_and_shared(api: Any) -> None:
    own = api.limits.put("bank42-sms", rate_per_second=10)
    assert own == {"name": "bank42-sms", "rate_per_second": 10.0, "burst": 10, "owned": True}
    assert api.limits.put("bank42-sms", rate_per_second=20, burst=5)["burst"] == 5
    assert api.limits.get("bank42-sms")["rate_per_second"] == 20.0
    assert {b["name"] for b in api.limits.list()["items"]} == {"bank42-sms", "sms-gateway"}
    with pytest.raises(C.LimitNotOwned):
        api.limits.put("sms-gateway", rate_per_second=1)
    with pytest.raises(C.NotFound):
        api.limits.get("nobody-s")


ICS = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//bank42//holidays//EN\r\n"
       "BEGIN:VEVENT\r\nUID:xmas@bank42\r\nSUMMARY:Christmas\r\n"
       "DTSTART;VALUE=DATE:20261225\r\nRRULE:FREQ=YEARLY;COUNT=2\r\nEND:VEVENT\r\n"
       "END:VCALENDAR\r\n")


def test_notification_channels_and_notices(api: Any, clients: Clients,
                                           other: dict[str, str]) -> None:
    hook = api.notices.add_channel("webhook", url="https://hooks.bank42.example/notices")
    assert hook["type"] == "webhook" and hook["url"].endswith("/notices")
    assert api.notices.add_channel("webhook", url=hook["url"]) == hook   # the same: that one
    mail = api.notices.add_channel("email", address="oncall@bank42.example")
    assert [c["id"] for c in api.notices.channels()["items"]] == [hook["id"], mail["id"]]
    assert api.notices.get_channel(mail["id"]) == mail
    assert api.notices.list() == {"items": [], "held": 0}
    assert api.notices.list(status="failed", before=10, limit=5)["items"] == []
    with pytest.raises(C.ValidationError) as bad:
        api.notices.add_channel("email", address="not an address")
    assert [e.field for e in bad.value.errors] == ["address"]
    with pytest.raises(C.NotFound):
        clients(_token(other)).notices.remove_channel(hook["id"])       # another tenant's
    assert api.notices.remove_channel(hook["id"]) is None
    with pytest.raises(C.NotFound):
        api.notices.get_channel(hook["id"])


def test_calendars_round_trip_and_a_delete_refused_in_use(
        api: Any, clients: Clients, other: dict[str, str]) -> None:
    made = api.calendars.put("in-bank-holidays", ["2027-01-26", date(2026, 12, 25)])
    assert made["dates"] == ["2026-12-25", "2027-01-26"] and made["version"] == 1
    assert api.calendars.get("in-bank-holidays") == made
    from_ics = api.calendars.put("in-bank-holidays", ics=ICS)          # text/calendar
    assert from_ics["dates"] == ["2026-12-25", "2027-12-25"] and from_ics["version"] == 2
    assert api.calendars.put("bank-closures", ics=ICS.encode())["count"] == 2
    assert [c["name"] for c in api.calendars.list()["items"]] == \
        ["bank-closures", "in-bank-holidays"]
    job = api.jobs.create(_doc("emi:1", calendar={"exclude": "in-bank-holidays"}))
    with pytest.raises(C.CalendarInUse) as in_use:
        api.calendars.delete("in-bank-holidays")
    assert in_use.value.job_ids == [job["id"]] and isinstance(in_use.value, C.Conflict)
    assert api.calendars.get("in-bank-holidays")["version"] == 2          # still there
    api.jobs.cancel(job["id"])
    assert api.calendars.delete("in-bank-holidays") is None
    with pytest.raises(C.NotFound):
        api.calendars.get("in-bank-holidays")
    with pytest.raises(C.NotFound):
        clients(_token(other)).calendars.get("bank-closures")          # another tenant's
    with pytest.raises(C.ValidationError) as bad:
        api.calendars.put("in-bank-holidays", ["2026-02-30"])
    assert [e.field for e in bad.value.errors] == ["dates[0]"]
    with pytest.raises(ValueError, match="either dates or ics"):
        api.calendars.put("in-bank-holidays")
    with pytest.raises(ValueError, match="list of dates"):
        api.calendars.put("in-bank-holidays", "2026-12-25")


def test_tokens_the_role_allows(api: Any, clients: Clients) -> None:
    mine = api.tokens.list()["items"]
    assert len(mine) == 1 and mine[0]["role"] == "admin"
    made = api.tokens.create(role="read", label="ci read")
    assert made["role"] == "read" and made["token"]
    reader = clients(made["token"])
    assert len(reader.tokens.list()["items"]) == 2                  # a read token may list
    assert reader.stats()["dead_letter"] == 0
    with pytest.raises(C.Forbidden):
        reader.jobs.create(_doc("emi:1"))
    with pytest.raises(C.Forbidden):
        reader.tokens.create()
    api.tokens.revoke(made["id"])
    api.tokens.revoke(made["id"])                                   # changes nothing
    with pytest.raises(C.Unauthorized):
        reader.stats()
    with pytest.raises(C.TokenConflict):
        api.tokens.revoke(mine[0]["id"])                            # the last admin token
    with pytest.raises(C.NotFound):
        api.tokens.revoke(10**12)
    secret = api.tokens.rotate_signing_secret(overlap_seconds=0)
    assert secret["signing_secret"] and secret["rotated_at"]


def test_an_unknown_token_is_unauthorized(clients: Clients) -> None:
    with pytest.raises(C.Unauthorized) as caught:
        clients("not-a-token").jobs.list()
    assert caught.value.headers["www-authenticate"].startswith("Bearer")


# -- audit, ledger, service ----------------------------------------------------------------

def test_audit_verify_stats_health(api: Any) -> None:
    job = api.jobs.create(_doc("emi:1"))
    api.jobs.pause(job["id"], note="why")
    entries = list(api.audit.iter(page_size=1))
    assert len(entries) >= 2 and entries == sorted(entries, key=lambda e: -e["id"])
    assert api.audit.list(limit=1)["next_cursor"] is not None
    assert all(e["subject"] == entries[0]["subject"]
               for e in api.audit.iter(subject=entries[0]["subject"]))
    report = api.verify()
    assert report["clean"] and report["unaccounted"] == []
    now = datetime.now(UTC)
    with pytest.raises(C.ValidationError) as caught:
        api.verify(since=now, until=now - timedelta(hours=1))
    assert caught.value.errors[0].field == "since"
    stats = api.stats()
    assert set(stats) == {"queue", "lag", "dead_letter", "finished_last_hour"}
    from crondepot import __version__
    from crondepot.db.migrations import schema_revision

    assert api.health() == {"status": "ok", "version": __version__,
                            "schema_revision": schema_revision()}
    assert api.ready() == {"status": "ready"}


def test_forecast(api: Any) -> None:
    # one-shot jobs fire once, whatever second the test runs in
    when = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    once = {k: v for k, v in EMI.items() if k not in ("cron", "spread")}
    for n in range(3):
        api.jobs.create({**once, "key": f"once:{n}", "at": when.isoformat()})
    result = api.forecast(hours=3)
    assert (result["runs"], result["order"]) == (3, "deadline_first")
    assert result["limits"][0]["rate_limit"] == "sms-gateway"
    assert api.forecast()["runs"] == 3
    with pytest.raises(C.ValidationError) as caught:
        api.forecast(hours=0)
    assert caught.value.errors[0].field == "hours"
