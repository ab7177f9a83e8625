"""POST /v1/jobs/{id}/backfill: the fires of a past range without a row get one, tenant-scoped,
RFC 9457 errors for a bad range, and the worked example in the OpenAPI document."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from crondepot.db.clock import database_now
from crondepot.job import JobSpec
from crondepot.job.store import create_jobs
from crondepot.scheduler.ledger import verify
from crondepot.scheduler.tick import tick
from crondepot.timetable import run_id
from tests.support.api import snapshot

PROBLEM = "application/problem+json"


def _setup(conn: psycopg.Connection[Any]) -> tuple[int, int, datetime, list[datetime]]:
    """A job of bank42 every 10 minutes for the last two hours, its fires written by the
    scheduler: (tenant, job, start, nominal times)."""
    (tenant,) = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone() or ()
    now = database_now(conn)
    start = now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    doc = {"cron": "*/10 * * * *", "tz": "UTC",
           "target": {"type": "python", "handler": "test.noop"}}
    (made,) = create_jobs(conn, tenant, [JobSpec.from_document(doc)], now=start)
    while tick(conn, batch=100).full:
        pass
    nominals = [r[0] for r in conn.execute(
        "SELECT nominal_at FROM runs WHERE job_id = %s ORDER BY nominal_at", (made.id,))]
    return tenant, made.id, start, nominals


def test_backfill_writes_the_missing_fires_once(
        client: TestClient, h: dict[str, str], other: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    _, job, start, nominals = _setup(conn)
    lost = nominals[2:5]
    conn.execute("DELETE FROM runs WHERE job_id = %s AND nominal_at = ANY(%s)", (job, lost))
    body = {"from": start.isoformat(), "to": nominals[-1].isoformat()}

    dry = client.post(f"/v1/jobs/{job}/backfill", json={**body, "dry_run": True}, headers=h)
    assert dry.status_code == 200, dry.text
    assert (dry.json()["written"], dry.json()["dry_run"]) == (3, True)

    # another tenant's job is not found, exactly like a missing one; nothing changes
    before = snapshot(conn)
    for headers, path in ((other, f"/v1/jobs/{job}/backfill"),
                          (h, "/v1/jobs/999999/backfill"),
                          (h, f"/v1/jobs/{2**70}/backfill")):
        response = client.post(path, json=body, headers=headers)
        assert response.status_code == 404, response.text
        assert response.headers["content-type"].startswith(PROBLEM)
    assert snapshot(conn) == before

    done = client.post(f"/v1/jobs/{job}/backfill", json=body, headers=h)
    assert done.status_code == 200, done.text
    result = done.json()
    assert sorted(result["written_run_ids"]) == sorted(run_id(job, n) for n in lost)
    assert (result["written"], result["requeued"], result["already_had_row"],
            result["next_from"]) == (3, 0, len(nominals) - 1 - 3, None)
    report = verify(conn, since=start, until=nominals[-1])
    assert report.clean, report.document()

    again = client.post(f"/v1/jobs/{job}/backfill", json=body, headers=h).json()
    assert again["written"] == 0 and again["written_run_ids"] == []

    # audited once, as the token's tenant: one entry with the counts, not one per run
    audit = client.get("/v1/audit", headers=h).json()["items"]
    backfills = [e for e in audit if e["action"] == "job.backfill"]
    assert [(e["subject"], e["after"]["written"]) for e in backfills] == [(str(job), 3)]
    assert not [e for e in audit if e["action"] == "job.trigger"]


def test_include_skipped_queues_skipped_fires_again(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    _, job, start, nominals = _setup(conn)
    conn.execute("UPDATE runs SET status = 'skipped', skip_reason = 'paused', finished_at = "
                 "now() WHERE job_id = %s AND nominal_at = ANY(%s)", (job, nominals[:2]))
    body = {"from": start.isoformat(), "to": nominals[-1].isoformat(),
            "include_skipped": True}
    result = client.post(f"/v1/jobs/{job}/backfill", json=body, headers=h).json()
    assert result["requeued_run_ids"] == [run_id(job, n) for n in nominals[:2]]
    statuses = conn.execute("SELECT status FROM runs WHERE job_id = %s AND nominal_at = "
                            "ANY(%s)", (job, nominals[:2])).fetchall()
    assert statuses == [("queued",), ("queued",)]


def test_a_bad_range_is_a_422_naming_the_field_and_changes_nothing(
        client: TestClient, h: dict[str, str], reader: dict[str, str],
        conn: psycopg.Connection[Any]) -> None:
    _, job, start, nominals = _setup(conn)
    conn.execute("DELETE FROM runs WHERE job_id = %s AND nominal_at = %s", (job, nominals[1]))
    before = snapshot(conn)
    future = (database_now(conn) + timedelta(days=1)).isoformat()
    for body, field, says in (
            ({"from": nominals[-1].isoformat(), "to": start.isoformat()}, "from",
             "must be before"),
            ({"from": start.isoformat(), "to": future}, "to", "after now"),
            ({"from": (start - timedelta(days=40)).isoformat(), "to": start.isoformat()},
             "from", "at most 31 days"),
            ({"from": "2026-03-02T08:00:00", "to": start.isoformat()}, "from",
             "UTC offset"),
            ({"from": "yesterday"}, "from", ""),
            ({"to": start.isoformat()}, "from", ""),
            ({"from": start.isoformat(), "dry_run": "maybe"}, "dry_run", ""),
            ({"from": start.isoformat(), "surprise": 1}, "surprise", "")):
        response = client.post(f"/v1/jobs/{job}/backfill", json=body, headers=h)
        assert response.status_code == 422, (body, response.text)
        assert response.headers["content-type"].startswith(PROBLEM)
        problem = response.json()
        assert problem["errors"][0]["field"] == field, problem
        assert says in problem["detail"]
    read_only = client.post(f"/v1/jobs/{job}/backfill",
                            json={"from": start.isoformat()}, headers=reader)
    assert read_only.status_code == 403
    assert snapshot(conn) == before


def test_the_openapi_document_has_the_route_and_its_worked_example(
        client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/v1/jobs/{job_id}/backfill"]["post"]
    content = operation["requestBody"]["content"]["application/json"]
    assert content["examples"]["after_an_outage"]["value"]["dry_run"] is True
    assert set(operation["responses"]) >= {"200", "404", "422"}
    assert "BackfillResult" in spec["components"]["schemas"]
