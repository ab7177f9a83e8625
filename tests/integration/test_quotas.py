"""Quotas: the operator's caps on a tenant's jobs (max jobs, max urgent jobs, urgent at all),
checked at create, PATCH and import, and exact under concurrent creates."""

from __future__ import annotations

import threading
from importlib import resources
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.job.spec import JobSpec
from crondepot.job.store import (
    CreatedJob,
    cancel_job,
    create_job,
    create_jobs,
    import_batch,
    pause_job,
    update_job,
)
from crondepot.tenancy import quotas
from crondepot.tenancy.quotas import QuotaExceeded, UrgentNotAllowed


def _spec(key: str | None = None, **fields: Any) -> JobSpec:
    doc = {"cron": "0 9 * * *", "tz": "UTC",
           "target": {"type": "http", "url": "https://hooks.example.com/x"}, **fields}
    if key is not None:
        doc["key"] = key
    return JobSpec.from_document(doc)


def _counts(conn: psycopg.Connection[Any], tenant: int) -> tuple[int, int, int, int]:
    """(kept active_jobs, kept urgent_jobs, counted active, counted urgent)."""
    row = conn.execute(
        "SELECT t.active_jobs, t.urgent_jobs,"
        " (SELECT count(*) FROM jobs WHERE tenant_id = t.id AND active),"
        " (SELECT count(*) FROM jobs WHERE tenant_id = t.id AND active"
        "  AND priority = 'urgent') FROM tenants t WHERE id = %s", (tenant,)).fetchone()
    assert row is not None
    return tuple(row)  # type: ignore[return-value]


def test_max_jobs_refuses_the_job_over_it_naming_the_quota(conn: psycopg.Connection[Any],
                                                           tenant_id: int) -> None:
    quotas.set_quota(conn, tenant_id, max_jobs=2)
    create_job(conn, tenant_id, _spec("a"))
    second, _ = create_job(conn, tenant_id, _spec("b"))
    pause_job(conn, tenant_id, second.id)                 # paused jobs still count
    with pytest.raises(QuotaExceeded, match="max_jobs: tenant bank42 may have at most 2 jobs"
                       ) as err:
        create_job(conn, tenant_id, _spec("c"))
    assert (err.value.quota, err.value.limit, err.value.field) == ("max_jobs", 2, "job")
    assert _counts(conn, tenant_id) == (2, 0, 2, 0)
    # the same key again is the same job, not a new one: it takes no room
    assert create_job(conn, tenant_id, _spec("a"))[1] is False
    cancel_job(conn, tenant_id, second.id)                # a cancel frees a slot
    assert create_job(conn, tenant_id, _spec("c"))[1] is True
    assert _counts(conn, tenant_id) == (2, 0, 2, 0)


def test_max_urgent_jobs_at_create_and_at_a_patch_that_makes_a_job_urgent(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    quotas.set_quota(conn, tenant_id, max_urgent_jobs=1)
    urgent, _ = create_job(conn, tenant_id, _spec("u1", priority="urgent"))
    with pytest.raises(QuotaExceeded) as err:
        create_job(conn, tenant_id, _spec("u2", priority="urgent"))
    assert (err.value.quota, err.value.limit, err.value.field) == (
        "max_urgent_jobs", 1, "priority")
    normal, _ = create_job(conn, tenant_id, _spec("n1"))
    with pytest.raises(QuotaExceeded, match="max_urgent_jobs"):
        update_job(conn, tenant_id, normal.id, {"priority": "urgent"}, version=normal.version)
    # a PATCH of an urgent job that keeps it urgent adds nothing
    update_job(conn, tenant_id, urgent.id, {"payload": {"x": 1}}, version=urgent.version)
    # a PATCH that makes it normal frees the urgent slot (the trigger counts it)
    moved = update_job(conn, tenant_id, urgent.id, {"priority": "normal"}, version=2)
    assert _counts(conn, tenant_id) == (2, 0, 2, 0)
    update_job(conn, tenant_id, normal.id, {"priority": "urgent"}, version=normal.version)
    assert moved.spec.priority == "normal"
    assert _counts(conn, tenant_id) == (2, 1, 2, 1)


def test_a_tenant_without_urgent_may_not_create_or_patch_to_urgent(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    quotas.set_quota(conn, tenant_id, urgent_allowed=False)
    with pytest.raises(UrgentNotAllowed, match="may not use the urgent priority") as err:
        create_job(conn, tenant_id, _spec("u", priority="urgent"))
    assert err.value.field == "priority"
    job, _ = create_job(conn, tenant_id, _spec("n"))
    with pytest.raises(UrgentNotAllowed):
        update_job(conn, tenant_id, job.id, {"priority": "urgent"}, version=job.version)
    assert _counts(conn, tenant_id) == (1, 0, 1, 0)
    quotas.set_quota(conn, tenant_id, urgent_allowed=True)
    assert create_job(conn, tenant_id, _spec("u", priority="urgent"))[1]


def test_an_import_stores_the_lines_that_fit_in_order_and_reports_the_others(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    create_job(conn, tenant_id, _spec("old"))
    quotas.set_quota(conn, tenant_id, max_jobs=4, max_urgent_jobs=1)
    specs = [_spec("a"), _spec("old"), _spec("u1", priority="urgent"),
             _spec("u2", priority="urgent"), _spec("b"), _spec("a"), _spec("c"), _spec(None)]
    results = import_batch(conn, tenant_id, specs)
    summary = [("created" if r.created else "existing") if isinstance(r, CreatedJob)
               else getattr(r, "quota", type(r).__name__) for r in results]
    assert summary == ["created", "existing", "created", "max_urgent_jobs", "created",
                       "existing", "max_jobs", "max_jobs"]
    keys = [row[0] for row in conn.execute("SELECT key FROM jobs ORDER BY id")]
    assert keys == ["old", "a", "u1", "b"]
    assert _counts(conn, tenant_id) == (4, 1, 4, 1)


def test_an_import_without_urgent_reports_each_urgent_line(conn: psycopg.Connection[Any],
                                                           tenant_id: int) -> None:
    quotas.set_quota(conn, tenant_id, urgent_allowed=False)
    results = import_batch(conn, tenant_id, [_spec("u", priority="urgent"), _spec("n")])
    assert isinstance(results[0], UrgentNotAllowed) and results[0].field == "priority"
    assert isinstance(results[1], CreatedJob) and results[1].created


def test_the_kept_counts_follow_every_write_of_jobs(conn: psycopg.Connection[Any],
                                                    tenant_id: int) -> None:
    """Inserts (one statement or COPY), cancels, priority changes, a job created cancelled
    and a raw DELETE: the counts on the tenant row stay equal to a count of the table."""
    create_jobs(conn, tenant_id, [_spec(f"k{i}", priority="urgent" if i % 3 else "normal")
                                  for i in range(250)])                # COPY path
    create_jobs(conn, tenant_id, [_spec("gone", active=False), _spec("x")])
    job, _ = create_job(conn, tenant_id, _spec("y", priority="urgent"))
    cancel_job(conn, tenant_id, job.id)
    cancel_job(conn, tenant_id, job.id)                                 # changes nothing
    conn.execute("UPDATE jobs SET priority = 'bulk' WHERE key IN ('k1', 'k3')")
    conn.execute("DELETE FROM jobs WHERE key IN ('k4', 'k6')")
    kept_jobs, kept_urgent, jobs, urgent = _counts(conn, tenant_id)
    assert (kept_jobs, kept_urgent) == (jobs, urgent) == (249, 164)


def test_applying_the_counting_definition_again_recounts(conn: psycopg.Connection[Any],
                                                        tenant_id: int) -> None:
    create_jobs(conn, tenant_id, [_spec("a"), _spec("b", priority="urgent")])
    conn.execute("UPDATE tenants SET active_jobs = 99, urgent_jobs = 42")
    sql = (resources.files("crondepot.db") / "sql" / "functions" / "job_counts.sql"
           ).read_text()
    with conn.transaction():
        conn.execute(sql.encode())
    assert _counts(conn, tenant_id) == (2, 1, 2, 1)


def test_bad_quota_values_change_nothing(conn: psycopg.Connection[Any],
                                         tenant_id: int) -> None:
    quotas.set_quota(conn, tenant_id, max_jobs=10)
    for bad in ({"max_jobs": -1}, {"max_urgent_jobs": 2**31}):
        with pytest.raises(quotas.InvalidQuota):
            quotas.set_quota(conn, tenant_id, **bad)
    quota = quotas.read(conn, tenant_id)
    assert (quota.max_jobs, quota.max_urgent_jobs, quota.urgent_allowed) == (10, None, True)
    quotas.set_quota(conn, tenant_id, max_jobs=None)          # None removes a cap
    assert quotas.read(conn, tenant_id).max_jobs is None


def test_two_connections_creating_at_once_never_pass_the_last_slot(
        db_url: str, conn: psycopg.Connection[Any], tenant_id: int) -> None:
    """Two writers (as two API processes would be) race for the last slot, round after
    round: each round the cap is raised by one and both create at once. The tenant row's
    lock makes the second one see the first one's insert, so each round creates one job."""
    rounds = 25
    cap = {"value": 0}

    def raise_cap() -> None:          # run by one of the two, before both are let go
        cap["value"] += 1
        quotas.set_quota(conn, tenant_id, max_jobs=cap["value"])

    start = threading.Barrier(2, action=raise_cap)
    outcomes: list[list[str]] = [[], []]

    def writer(n: int) -> None:
        with connect(db_url) as mine:
            for i in range(rounds):
                start.wait(timeout=60)
                try:
                    create_job(mine, tenant_id, _spec(f"w{n}:{i}"))
                    outcomes[n].append("created")
                except QuotaExceeded:
                    outcomes[n].append("refused")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    per_round = [sorted((outcomes[0][i], outcomes[1][i])) for i in range(rounds)]
    assert per_round == [["created", "refused"]] * rounds, per_round
    assert _counts(conn, tenant_id) == (rounds, 0, rounds, 0)
