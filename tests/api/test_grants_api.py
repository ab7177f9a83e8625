"""Grants, tenant-owned rate limits and quotas over HTTP: the problems a tenant gets, and
what it may see of other tenants' buckets (nothing)."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.limits.buckets import set_limit
from crondepot.tenancy import grants, quotas
from crondepot.tenancy.tenants import create_tenant
from tests.support.api import bearer, snapshot

NDJSON = {"Content-Type": "application/x-ndjson"}
PROBLEM = "https://crondepot.dev/problems/"


def _doc(key: str, **fields: Any) -> dict[str, Any]:
    return {"key": key, "cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "sms.send"}, **fields}


@pytest.fixture
def tenant(conn: psycopg.Connection[Any], token: str) -> int:
    """The id of bank42, the tenant of ``h``."""
    row = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()
    assert row is not None
    return int(row[0])


def _new_tenant(conn: psycopg.Connection[Any], name: str) -> tuple[int, dict[str, str]]:
    """A tenant with no grants, and its headers."""
    made = create_tenant(conn, name)
    return made.id, bearer(made.token)


def _field_problem(response: Any, status: int, slug: str, field: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem: dict[str, Any] = response.json()
    assert problem["type"] == PROBLEM + slug
    assert [e["field"] for e in problem["errors"]] == [field]
    return problem


def test_create_with_an_ungranted_handler_is_422_naming_target_handler(
        client: TestClient, conn: psycopg.Connection[Any]) -> None:
    tenant, h = _new_tenant(conn, "newbank")
    before = snapshot(conn)
    problem = _field_problem(client.post("/v1/jobs", json=_doc("a"), headers=h), 422,
                             "not-granted", "target.handler")
    assert "'sms.send' is not granted to tenant newbank" in problem["detail"]
    assert snapshot(conn) == before
    grants.grant(conn, tenant, handlers=["sms.send"])
    assert client.post("/v1/jobs", json=_doc("a"), headers=h).status_code == 201


def test_a_near_miss_of_a_granted_handler_or_limit_names_the_one_meant(
        client: TestClient, conn: psycopg.Connection[Any]) -> None:
    tenant, h = _new_tenant(conn, "typobank")
    set_limit(conn, "sms-gateway", 10, 10)
    grants.grant(conn, tenant, handlers=["sms.send"], limits=["sms-gateway"])
    before = snapshot(conn)
    typo = _doc("a", target={"type": "python", "handler": "sms.snd"})
    problem = _field_problem(client.post("/v1/jobs", json=typo, headers=h), 422,
                             "not-granted", "target.handler")
    assert "'sms.snd' is not granted to tenant typobank (did you mean 'sms.send'?)" \
        in problem["detail"]
    problem = _field_problem(client.post("/v1/jobs", json=_doc("a", rate_limit="sms-gatway"),
                                         headers=h), 422, "not-granted", "rate_limit")
    assert "(did you mean 'sms-gateway'?)" in problem["detail"]
    far = _doc("a", target={"type": "python", "handler": "payroll.run"})
    assert "did you mean" not in client.post("/v1/jobs", json=far, headers=h).text
    assert snapshot(conn) == before


def test_create_with_an_unknown_limit_is_422_naming_rate_limit(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    response = client.post("/v1/jobs", json=_doc("a", rate_limit="no-such-limit"), headers=h)
    _field_problem(response, 422, "not-granted", "rate_limit")
    assert snapshot(conn) == before


def test_patch_to_an_ungranted_limit_is_422_and_changes_nothing(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    set_limit(conn, "mail-gateway", 10, 10)        # exists, shared, not granted to bank42
    job = client.post("/v1/jobs", json=_doc("a"), headers=h).json()
    before = snapshot(conn)
    response = client.patch(f"/v1/jobs/{job['id']}", json={"rate_limit": "mail-gateway"},
                            headers={**h, "If-Match": str(job["version"])})
    _field_problem(response, 422, "not-granted", "rate_limit")
    assert snapshot(conn) == before


def test_import_reports_ungranted_lines_and_stores_the_others(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    lines = [_doc("a"), _doc("b", target={"type": "python", "handler": "evil.handler"}),
             _doc("c", rate_limit="someone-elses"), _doc("d")]
    body = "\n".join(json.dumps(line) for line in lines) + "\n"
    result = client.post("/v1/import", content=body.encode(), headers={**h, **NDJSON}).json()
    assert (result["lines"], result["created"], result["failed"]) == (4, 2, 2)
    assert [(e["line"], e["field"]) for e in result["errors"]] == [
        (2, "target.handler"), (3, "rate_limit")]
    keys = [row[0] for row in conn.execute("SELECT key FROM jobs ORDER BY id")]
    assert keys == ["a", "d"]


def test_a_tenant_makes_its_own_bucket_uses_it_and_no_other_tenant_sees_or_uses_it(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    made = client.put("/v1/limits/bank42-sms", json={"rate_per_second": 20, "burst": 5},
                      headers=h)
    assert made.status_code == 201, made.text
    assert made.json() == {"name": "bank42-sms", "rate_per_second": 20.0, "burst": 5,
                           "owned": True}
    changed = client.put("/v1/limits/bank42-sms", json={"rate_per_second": 30}, headers=h)
    assert changed.status_code == 200 and changed.json()["burst"] == 30
    assert client.post("/v1/jobs", json=_doc("a", rate_limit="bank42-sms"),
                       headers=h).status_code == 201
    names = [b["name"] for b in client.get("/v1/limits", headers=h).json()["items"]]
    assert names == ["bank42-sms", "sms-gateway"]          # its own, and the granted shared

    before = snapshot(conn), conn.execute("SELECT * FROM rate_limits ORDER BY name").fetchall()
    assert client.get("/v1/limits/bank42-sms", headers=other).status_code == 404
    assert "bank42-sms" not in json.dumps(client.get("/v1/limits", headers=other).json())
    taken = client.put("/v1/limits/bank42-sms", json={"rate_per_second": 9999}, headers=other)
    assert taken.status_code == 404 and taken.json()["type"] == PROBLEM + "not-found"
    refused = client.post("/v1/jobs", json=_doc("b", rate_limit="bank42-sms"), headers=other)
    _field_problem(refused, 422, "not-granted", "rate_limit")
    after = snapshot(conn), conn.execute("SELECT * FROM rate_limits ORDER BY name").fetchall()
    assert after == before


def test_a_shared_bucket_granted_to_a_tenant_is_403_to_change_and_404_if_not_granted(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    set_limit(conn, "mail-gateway", 10, 10)
    shared = client.put("/v1/limits/sms-gateway", json={"rate_per_second": 1}, headers=h)
    assert shared.status_code == 403, shared.text
    assert shared.json()["type"] == PROBLEM + "limit-not-owned"
    hidden = client.put("/v1/limits/mail-gateway", json={"rate_per_second": 1}, headers=h)
    assert hidden.status_code == 404
    assert client.get("/v1/limits/mail-gateway", headers=h).status_code == 404
    assert conn.execute("SELECT name, rate_per_second FROM rate_limits ORDER BY name"
                        ).fetchall() == [("mail-gateway", 10), ("sms-gateway", 450)]


def test_bad_limit_bodies_and_names_are_422_naming_the_field(
        client: TestClient, h: dict[str, str], reader: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    for name, body, field in (("ok", {"rate_per_second": 0}, "rate_per_second"),
                              ("ok", {"rate_per_second": "fast"}, "rate_per_second"),
                              ("ok", {"rate_per_second": True}, "rate_per_second"),
                              ("ok", {"rate_per_second": 5, "burst": 0}, "burst"),
                              ("ok", {"rate_per_second": 5, "burst": 1.5}, "burst"),
                              ("ok", {"rate_per_second": 5, "colour": 1}, "colour"),
                              ("ok", [1], "body"),
                              ("Not A Name", {"rate_per_second": 5}, "name")):
        response = client.put(f"/v1/limits/{name}", json=body, headers=h)
        problem = _field_problem(response, 422, "validation", field)
        assert field in problem["detail"] or field == "body"
    assert client.put("/v1/limits/ok", json={"rate_per_second": 5},
                      headers=reader).status_code == 403
    assert conn.execute("SELECT count(*) FROM rate_limits WHERE tenant_id IS NOT NULL"
                        ).fetchone() == (0,)


def test_over_max_jobs_is_422_naming_the_quota(
        client: TestClient, h: dict[str, str], tenant: int,
        conn: psycopg.Connection[Any]) -> None:
    quotas.set_quota(conn, tenant, max_jobs=1)
    assert client.post("/v1/jobs", json=_doc("a"), headers=h).status_code == 201
    before = snapshot(conn)
    problem = _field_problem(client.post("/v1/jobs", json=_doc("b"), headers=h), 422,
                             "quota-exceeded", "job")
    assert (problem["quota"], problem["limit"]) == ("max_jobs", 1)
    assert "max_jobs" in problem["detail"]
    assert snapshot(conn) == before
    # the same key and document again is the stored job (200), not a new one
    assert client.post("/v1/jobs", json=_doc("a"), headers=h).status_code == 200


def test_urgent_not_allowed_is_403_with_its_problem_type_at_create_and_patch(
        client: TestClient, h: dict[str, str], tenant: int,
        conn: psycopg.Connection[Any]) -> None:
    quotas.set_quota(conn, tenant, urgent_allowed=False)
    problem = _field_problem(client.post("/v1/jobs", json=_doc("u", priority="urgent"),
                                         headers=h), 403, "urgent-not-allowed", "priority")
    assert problem["quota"] == "urgent_allowed"
    job = client.post("/v1/jobs", json=_doc("n"), headers=h).json()
    before = snapshot(conn)
    response = client.patch(f"/v1/jobs/{job['id']}", json={"priority": "urgent"},
                            headers={**h, "If-Match": str(job["version"])})
    _field_problem(response, 403, "urgent-not-allowed", "priority")
    assert snapshot(conn) == before


def test_over_max_urgent_jobs_at_patch_is_422_and_import_reports_quotas_per_line(
        client: TestClient, h: dict[str, str], tenant: int,
        conn: psycopg.Connection[Any]) -> None:
    quotas.set_quota(conn, tenant, max_jobs=3, max_urgent_jobs=1)
    lines = [_doc("u1", priority="urgent"), _doc("u2", priority="urgent"), _doc("n1"),
             _doc("n2"), _doc("n3")]
    body = "\n".join(json.dumps(line) for line in lines) + "\n"
    result = client.post("/v1/import", content=body.encode(), headers={**h, **NDJSON}).json()
    assert (result["created"], result["failed"]) == (3, 2)
    assert [(e["line"], e["field"]) for e in result["errors"]] == [(2, "priority"),
                                                                   (5, "job")]
    assert "max_urgent_jobs" in result["errors"][0]["message"]
    assert "max_jobs" in result["errors"][1]["message"]
    quotas.set_quota(conn, tenant, max_jobs=None)
    n1 = client.get("/v1/jobs", params={"key_prefix": "n1"}, headers=h).json()["items"][0]
    response = client.patch(f"/v1/jobs/{n1['id']}", json={"priority": "urgent"},
                            headers={**h, "If-Match": str(n1["version"])})
    problem = _field_problem(response, 422, "quota-exceeded", "priority")
    assert (problem["quota"], problem["limit"]) == ("max_urgent_jobs", 1)
