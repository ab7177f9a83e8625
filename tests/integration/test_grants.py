"""Grants: a job may name only the handlers and rate limits granted to its tenant (or the
limits it owns), at create, PATCH and import; the operator's grant and revoke change all
they name or nothing."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.spec import JobSpec
from crondepot.job.store import CreatedJob, create_job, get_job, import_batch, update_job
from crondepot.limits.buckets import LimitNotFound, LimitNotOwned, put_own_limit, set_limit
from crondepot.tenancy import grants
from crondepot.tenancy.grants import InvalidGrant, NotGranted
from crondepot.tenancy.tenants import create_tenant


def _doc(**fields: Any) -> dict[str, Any]:
    return {"cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "sms.send"}, **fields}


def _spec(**fields: Any) -> JobSpec:
    return JobSpec.from_document(_doc(**fields))


@pytest.fixture
def bare(conn: psycopg.Connection[Any]) -> int:
    """A tenant with no grants at all."""
    return create_tenant(conn, "newbank").id


def _jobs(conn: psycopg.Connection[Any], tenant: int) -> int:
    row = conn.execute("SELECT count(*) FROM jobs WHERE tenant_id = %s", (tenant,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_handler_not_granted_is_refused_at_create_naming_the_field(
        conn: psycopg.Connection[Any], bare: int) -> None:
    with pytest.raises(NotGranted, match=r"'sms\.send' is not granted to tenant newbank") as err:
        create_job(conn, bare, _spec())
    assert err.value.field == "target.handler"
    assert _jobs(conn, bare) == 0
    grants.grant(conn, bare, handlers=["sms.send"])
    _, created = create_job(conn, bare, _spec())
    assert created


def test_a_handler_granted_to_another_tenant_is_not_granted_to_this_one(
        conn: psycopg.Connection[Any], bare: int) -> None:
    other = create_tenant(conn, "otherbank").id
    grants.grant(conn, other, handlers=["sms.send"])
    with pytest.raises(NotGranted):
        create_job(conn, bare, _spec())


def test_an_unknown_or_ungranted_rate_limit_is_refused_and_accepted_once_granted(
        conn: psycopg.Connection[Any], bare: int) -> None:
    grants.grant(conn, bare, handlers=["sms.send"])
    with pytest.raises(NotGranted, match="'no-such-limit' is not one tenant newbank may use"
                       ) as err:
        create_job(conn, bare, _spec(rate_limit="no-such-limit"))
    assert err.value.field == "rate_limit"
    set_limit(conn, "sms-gateway", 450, 50)
    with pytest.raises(NotGranted) as err:
        create_job(conn, bare, _spec(rate_limit="sms-gateway"))
    assert err.value.field == "rate_limit"
    assert _jobs(conn, bare) == 0
    grants.grant(conn, bare, limits=["sms-gateway"])
    job, created = create_job(conn, bare, _spec(rate_limit="sms-gateway"))
    assert created and job.spec.rate_limit == "sms-gateway"


def test_http_jobs_without_a_limit_need_no_grant(conn: psycopg.Connection[Any],
                                                 bare: int) -> None:
    _, created = create_job(conn, bare, JobSpec.from_document(_doc(
        target={"type": "http", "url": "https://hooks.example.com/x"})))
    assert created


def test_a_patch_to_an_ungranted_handler_or_limit_is_refused_and_changes_nothing(
        conn: psycopg.Connection[Any], bare: int) -> None:
    grants.grant(conn, bare, handlers=["sms.send"])
    job, _ = create_job(conn, bare, _spec(key="k"))
    for patch, field in (({"target": {"type": "python", "handler": "mail.send"}},
                          "target.handler"),
                         ({"rate_limit": "sms-gateway"}, "rate_limit")):
        with pytest.raises(NotGranted) as err:
            update_job(conn, bare, job.id, patch, version=job.version)
        assert err.value.field == field
    assert get_job(conn, bare, job.id) == job
    grants.grant(conn, bare, handlers=["mail.send"])
    changed = update_job(conn, bare, job.id, {"target": {"type": "python",
                                                         "handler": "mail.send"}},
                         version=job.version)
    assert changed.spec.target["handler"] == "mail.send"


def test_a_patch_of_a_job_whose_handler_was_revoked_is_refused(
        conn: psycopg.Connection[Any], bare: int) -> None:
    """The document after a PATCH is checked as a whole: its runs would fail anyway."""
    grants.grant(conn, bare, handlers=["sms.send"])
    job, _ = create_job(conn, bare, _spec(key="k"))
    grants.revoke(conn, bare, handlers=["sms.send"])
    with pytest.raises(NotGranted):
        update_job(conn, bare, job.id, {"payload": {"a": 1}}, version=job.version)


def test_an_import_reports_ungranted_lines_and_stores_the_others_in_order(
        conn: psycopg.Connection[Any], bare: int) -> None:
    grants.grant(conn, bare, handlers=["sms.send"])
    specs = [_spec(key="a"), _spec(key="b", target={"type": "python", "handler": "x.y"}),
             _spec(key="c", rate_limit="nope"), _spec(key="d")]
    results = import_batch(conn, bare, specs)
    assert [type(r).__name__ for r in results] == ["CreatedJob", "NotGranted", "NotGranted",
                                                   "CreatedJob"]
    assert [r.field for r in results if isinstance(r, InvalidJob)] == ["target.handler",
                                                                       "rate_limit"]
    keys = [row[0] for row in conn.execute("SELECT key FROM jobs ORDER BY id")]
    assert keys == ["a", "d"]


def test_a_large_import_with_ungranted_lines_stores_the_rest_by_copy(
        conn: psycopg.Connection[Any], bare: int) -> None:
    grants.grant(conn, bare, handlers=["sms.send"])
    specs = [_spec(key=f"k{i}") if i % 50 else _spec(key=f"k{i}", rate_limit="nope")
             for i in range(500)]
    results = import_batch(conn, bare, specs)
    refused = [i for i, r in enumerate(results) if not isinstance(r, CreatedJob)]
    assert refused == list(range(0, 500, 50))
    assert _jobs(conn, bare) == 490


def test_a_tenants_own_bucket_needs_no_grant_and_no_other_tenant_may_use_it(
        conn: psycopg.Connection[Any], bare: int) -> None:
    other = create_tenant(conn, "otherbank").id
    for tenant in (bare, other):
        grants.grant(conn, tenant, handlers=["sms.send"])
    bucket, created = put_own_limit(conn, bare, "newbank-sms", 10, 5)
    assert created and bucket.owned
    _, made = create_job(conn, bare, _spec(rate_limit="newbank-sms"))
    assert made
    with pytest.raises(NotGranted):
        create_job(conn, other, _spec(rate_limit="newbank-sms"))
    # nor change it, nor learn more than "not found"
    with pytest.raises(LimitNotFound):
        put_own_limit(conn, other, "newbank-sms", 1000, 1000)
    assert conn.execute("SELECT rate_per_second, burst FROM rate_limits "
                        "WHERE name = 'newbank-sms'").fetchone() == (10, 5)
    # the operator cannot hand it to another tenant either
    with pytest.raises(InvalidGrant, match="tenant's own bucket"):
        grants.grant(conn, other, limits=["newbank-sms"])


def test_a_shared_bucket_is_not_changed_by_a_tenant_it_is_granted_to(
        conn: psycopg.Connection[Any], bare: int) -> None:
    set_limit(conn, "sms-gateway", 450, 50)
    with pytest.raises(LimitNotFound):             # not granted: it cannot know of it
        put_own_limit(conn, bare, "sms-gateway", 1, 1)
    grants.grant(conn, bare, limits=["sms-gateway"])
    with pytest.raises(LimitNotOwned, match="shared"):
        put_own_limit(conn, bare, "sms-gateway", 1, 1)
    assert conn.execute("SELECT rate_per_second, burst, tenant_id FROM rate_limits"
                        ).fetchall() == [(450, 50, None)]


@pytest.mark.parametrize(("handlers", "limits", "message"), [
    ([], [], "at least one"),
    (["sms.send", "bad name"], [], "handler: expected"),
    (["sms.send"], ["no-such-limit"], "no rate limit named 'no-such-limit'"),
    (["sms.send"], ["Bad Limit"], "limit: expected"),
])
def test_a_bad_grant_changes_nothing(conn: psycopg.Connection[Any], bare: int,
                                     handlers: list[str], limits: list[str],
                                     message: str) -> None:
    with pytest.raises(InvalidGrant, match=message):
        grants.grant(conn, bare, handlers=handlers, limits=limits)
    assert grants.list_grants(conn, bare) == []


def test_a_revoke_of_something_not_granted_changes_nothing(conn: psycopg.Connection[Any],
                                                            bare: int) -> None:
    set_limit(conn, "sms-gateway", 450, 50)
    grants.grant(conn, bare, handlers=["sms.send"], limits=["sms-gateway"])
    with pytest.raises(InvalidGrant, match=r"'mail\.send' is not granted"):
        grants.revoke(conn, bare, handlers=["sms.send", "mail.send"], limits=["sms-gateway"])
    assert [(g.kind, g.name) for g in grants.list_grants(conn, bare)] == [
        ("handler", "sms.send"), ("limit", "sms-gateway")]
    grants.revoke(conn, bare, handlers=["sms.send"], limits=["sms-gateway"])
    assert grants.list_grants(conn, bare) == []


def test_grants_and_revokes_are_in_the_tenants_audit_log(conn: psycopg.Connection[Any],
                                                        bare: int) -> None:
    from crondepot.tenancy.audit import act_as, list_audit

    act_as(conn, "cli:operator@host")
    grants.grant(conn, bare, handlers=["sms.send"])
    grants.revoke(conn, bare, handlers=["sms.send"])
    entries = [e for e in list_audit(conn, bare) if e.actor == "cli:operator@host"]
    assert [(e.action, e.actor, e.after) for e in entries] == [
        ("tenant.revoke", "cli:operator@host", {"handlers": ["sms.send"], "limits": []}),
        ("tenant.grant", "cli:operator@host", {"handlers": ["sms.send"], "limits": []})]
