"""Import, dead letter, stats, probes, limits and the OpenAPI document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from crondepot.api import ApiSettings, create_app
from tests.support.api import EMI, snapshot
from tests.support.pooler import api_app

NDJSON = {"Content-Type": "application/x-ndjson"}


def line(n: int, **changes: Any) -> str:
    doc = {"key": f"imp:{n}", "cron": "0 9 * * *", "tz": "Europe/Berlin",
           "target": {"type": "python", "handler": "sms.send"}, **changes}
    return json.dumps(doc)


def test_import_stores_good_lines_and_reports_bad_ones_by_number(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    lines = [line(1), line(2, cron="61 * * * *"), "", "{not json", line(5),
             line(6, misfire={"policy": "skip_after_local_time", "until": "24:00"}), line(7),
             "[1]"]
    response = client.post("/v1/import", content="\n".join(lines) + "\n",
                           headers={**h, **NDJSON})
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["lines"], result["created"], result["existing"], result["failed"]) == \
        (7, 3, 0, 4)
    assert [(e["line"], e["field"]) for e in result["errors"]] == [
        (2, "cron"), (4, "line"), (6, "misfire.until"), (8, "line")]
    keys = [r[0] for r in conn.execute("SELECT key FROM jobs ORDER BY key")]
    assert keys == ["imp:1", "imp:5", "imp:7"]
    again = client.post("/v1/import", content="\n".join([line(1), line(9), line(9)]),
                        headers={**h, **NDJSON}).json()
    assert (again["created"], again["existing"]) == (1, 2)     # a key is stored once


@pytest.mark.parametrize("body", ["{}", "{not json\n[1]\n", "", "\n \n"],
                         ids=["one-empty-document", "no-valid-line", "empty", "blank-lines"])
def test_an_import_that_stores_nothing_is_refused_whole_with_its_line_errors(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        body: str) -> None:
    response = client.post("/v1/import", content=body, headers={**h, **NDJSON})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    lines = len([text for text in body.splitlines() if text.strip()])
    assert (problem["type"], problem["lines"], problem["failed"]) == (
        "https://crondepot.dev/problems/validation", lines, lines)
    if lines:
        assert [e["line"] for e in problem["errors"]] == list(range(1, lines + 1))
        assert "nothing was stored" in problem["detail"]
    else:
        assert problem["errors"] == [{"field": "body", "message": "the body holds no line"}]
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_an_import_whose_lines_all_exist_already_is_a_valid_rerun(
        client: TestClient, h: dict[str, str]) -> None:
    body = "\n".join([line(1), line(2)])
    first = client.post("/v1/import", content=body, headers={**h, **NDJSON})
    again = client.post("/v1/import", content=body, headers={**h, **NDJSON})
    assert (first.status_code, again.status_code) == (200, 200), again.text
    assert (again.json()["created"], again.json()["existing"]) == (0, 2)


def test_one_line_never_fails_the_whole_import(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from crondepot.job import spec as spec_module

    parse = spec_module._parse

    def bomb(doc: Any) -> Any:          # a validator bug on one line
        if isinstance(doc, dict) and doc.get("key") == "imp:3":
            raise ValueError("invalid literal for int() with base 10: '*'")
        return parse(doc)

    monkeypatch.setattr(spec_module, "_parse", bomb)
    body = "\n".join([line(1, cron="*,5 * * * *"), line(2, cron="0 0 * * *,1"), line(3),
                      line(4)])
    response = client.post("/v1/import", content=body, headers={**h, **NDJSON})
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["created"], result["failed"]) == (3, 1)
    assert [(e["line"], e["field"]) for e in result["errors"]] == [(3, "line")]
    keys = [r[0] for r in conn.execute("SELECT key FROM jobs ORDER BY key")]
    assert keys == ["imp:1", "imp:2", "imp:4"]


def test_import_stores_in_batches(client: TestClient, h: dict[str, str],
                                  conn: psycopg.Connection[Any]) -> None:
    body = "\n".join(line(n) for n in range(2500))
    result = client.post("/v1/import", content=body, headers={**h, **NDJSON}).json()
    assert result["created"] == 2500 and result["failed"] == 0
    row = conn.execute("SELECT count(DISTINCT key), count(*) FROM jobs").fetchone()
    assert row == (2500, 2500)


def test_import_keeps_every_digit_of_long_numbers_and_reports_bad_json_as_before(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    # Payload numbers beyond 64 bits are read exactly (not through orjson's floats).
    account = 123456789012345678901234567890
    body = "\n".join([line(1, payload={"account": account, "n": 10**19}),
                      '{"key": "imp:2", "cron": NaN}', '{"key": "imp:3",}',
                      line(4, payload={"big": 1.0}).replace("1.0", "1e400")]) + "\n"
    result = client.post("/v1/import", content=body, headers={**h, **NDJSON}).json()
    assert (result["created"], result["failed"]) == (1, 3)
    assert result["errors"] == [
        {"line": 2, "field": "line", "message": "malformed JSON: NaN is not JSON"},
        {"line": 3, "field": "line", "message": "malformed JSON: Expecting property name "
                                                "enclosed in double quotes: line 1 column 17 "
                                                "(char 16)"},
        {"line": 4, "field": "line", "message": "malformed JSON: 1e400 is too large for a "
                                                "JSON number (beyond a double)"}]
    row = conn.execute("SELECT payload->>'account', payload->>'n' FROM jobs").fetchone()
    assert row == (str(account), str(10**19))


def test_dead_letter_list_and_replay(client: TestClient, h: dict[str, str],
                                     job: dict[str, Any], conn: psycopg.Connection[Any]) -> None:
    run_id = client.post(f"/v1/jobs/{job['id']}/trigger", headers=h).json()["run_id"]
    conn.execute("UPDATE runs SET status = 'dead', finished_at = now(), attempt = 6,"
                 " error_class = 'TimeoutError', last_error = 'read timed out'")
    dead = client.get("/v1/dead-letter", params={"error": "TimeoutError"}, headers=h).json()
    assert [r["run_id"] for r in dead["items"]] == [run_id]
    dry = client.post("/v1/dead-letter/replay", json={"job_id": job["id"], "dry_run": True},
                      headers=h).json()
    assert dry["count"] == 1 and dry["dry_run"] is True
    assert client.get(f"/v1/runs/{run_id}", headers=h).json()["status"] == "dead"
    done = client.post("/v1/dead-letter/replay", json={"run_ids": [run_id]}, headers=h).json()
    assert done["count"] == 1
    run = client.get(f"/v1/runs/{run_id}", headers=h).json()
    assert (run["status"], run["attempt"]) == ("queued", 0)


def test_stats_report_queue_depth_lag_and_dead_letter(
        client: TestClient, h: dict[str, str], job: dict[str, Any],
        conn: psycopg.Connection[Any]) -> None:
    empty = client.get("/v1/stats", headers=h).json()
    assert empty["queue"]["normal"] == {"ready": 0, "waiting": 0, "oldest_ready_seconds": None}
    assert empty["lag"]["samples"] == 0 and empty["dead_letter"] == 0
    tenant = conn.execute("SELECT id FROM tenants WHERE name = 'bank42'").fetchone()
    assert tenant is not None
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,"
        " available_at, status, attempt, first_claimed_at, finished_at)"
        " SELECT %(job)s || ':' || g, %(job)s, %(tenant)s, 'normal', now(), now() - interval"
        " '10 seconds', now() - interval '30 seconds', s, 1, now() - interval '10 seconds'"
        " + make_interval(secs => g), CASE WHEN s = 'dead' THEN now() END"
        " FROM generate_series(1, 100) g,"
        " LATERAL (SELECT CASE WHEN g <= 3 THEN 'queued' WHEN g <= 5 THEN 'dead'"
        " ELSE 'succeeded' END AS s) x",
        {"job": job["id"], "tenant": tenant[0]})
    stats = client.get("/v1/stats", headers=h).json()
    assert stats["queue"]["normal"]["ready"] == 3
    assert stats["queue"]["normal"]["oldest_ready_seconds"] >= 30
    assert stats["queue"]["urgent"]["ready"] == 0
    assert stats["lag"]["samples"] == 100
    assert 49 <= stats["lag"]["p50_seconds"] <= 52
    assert 98 <= stats["lag"]["p99_seconds"] <= 100
    assert stats["dead_letter"] == 2


def test_probes(client: TestClient, conn: psycopg.Connection[Any]) -> None:
    from crondepot import __version__
    from crondepot.db.migrations import available

    assert client.get("/healthz").json() == {
        "status": "ok", "version": __version__,
        "schema_revision": max(m.version for m in available())}
    assert client.get("/readyz").json() == {"status": "ready"}
    conn.execute("DELETE FROM crondepot_schema_migrations")
    stale = client.get("/readyz")
    assert stale.status_code == 503
    assert stale.json()["type"] == "https://crondepot.dev/problems/schema-not-current"


@pytest.fixture
def tight(db_url: str) -> Iterator[TestClient]:
    settings = ApiSettings(rate_per_second=0.01, burst=3, json_body_bytes=2048)
    with TestClient(api_app(db_url, settings)) as test_client:
        yield test_client


def test_a_token_over_its_budget_gets_429_with_retry_after(
        tight: TestClient, h: dict[str, str], other: dict[str, str]) -> None:
    assert [tight.get("/v1/jobs", headers=h).status_code for _ in range(4)] == \
        [200, 200, 200, 429]
    refused = tight.get("/v1/jobs", headers=h)
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["type"] == "https://crondepot.dev/problems/rate-limited"
    assert tight.get("/v1/jobs", headers=other).status_code == 200   # budgets are per token


def test_bodies_over_the_bound_get_413(tight: TestClient, h: dict[str, str],
                                       conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    response = tight.post("/v1/jobs", json={**EMI, "payload": {"t": "x" * 3000}}, headers=h)
    assert response.status_code == 413
    assert response.json()["type"] == "https://crondepot.dev/problems/payload-too-large"
    assert snapshot(conn) == before


def test_a_streamed_body_over_the_bound_gets_413(tight: TestClient, h: dict[str, str],
                                                 conn: psycopg.Connection[Any]) -> None:
    before = snapshot(conn)
    chunks = iter([b'{"payload": {"t": "', b"x" * 3000, b'"}}'])    # no Content-Length
    response = tight.post("/v1/jobs", content=chunks,
                          headers={**h, "Content-Type": "application/json"})
    assert response.status_code == 413
    assert snapshot(conn) == before


def test_openapi_documents_every_request_body_with_an_example(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "JobDocument" in spec["components"]["schemas"]
    bodies = [(path, method, op["requestBody"]) for path, ops in spec["paths"].items()
              for method, op in ops.items() if "requestBody" in op]
    assert {(p, m) for p, m, _ in bodies} >= {("/v1/jobs", "post"), ("/v1/import", "post"),
                                              ("/v1/jobs/{job_id}", "patch"),
                                              ("/v1/dead-letter/replay", "post")}
    for path, method, body in bodies:
        for media in body["content"].values():
            schema = media.get("schema", {})
            ref = schema.get("$ref", "").rsplit("/", 1)[-1]
            examples = media.get("examples") or \
                spec["components"]["schemas"].get(ref, {}).get("examples")
            assert examples, (path, method)
    emi = spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"]["application/json"]
    assert emi["examples"]["emi_reminder"]["value"]["cron"] == "0 9 5 * *"


def test_documented_examples_are_valid_job_documents(client: TestClient,
                                                     h: dict[str, str]) -> None:
    spec = client.get("/openapi.json").json()
    examples = spec["paths"]["/v1/jobs"]["post"]["requestBody"]["content"][
        "application/json"]["examples"]
    for example in examples.values():
        assert client.post("/v1/jobs", json=example["value"], headers=h).status_code == 201


def test_import_reports_unstorable_text_and_deep_nesting_per_line_and_stores_the_rest(
        client: TestClient, h: dict[str, str], conn: psycopg.Connection[Any]) -> None:
    # A lone surrogate or a NUL used to fail the whole batch in PostgreSQL (a 500, nothing
    # stored); nesting deeper than the parsers read used to raise RecursionError.
    body = "\n".join([
        line(1),
        line(2).replace('"imp:2"', '"imp:2\\ud800"'),                          # key
        line(3, payload={"to": "NUL"}).replace("NUL", "\\u0000"),              # payload.to
        line(4, target={"type": "http", "url": "https://a.b/X"}).replace("/X", "/\\udfff"),
        # (deep, yet within the 64 KiB a line may hold: a longer line is refused unread)
        line(5, payload={"x": "DEEP"}).replace('"DEEP"', "[" * 20_000 + "]" * 20_000),
        line(6, payload="DEEP").replace('"DEEP"', '{"a":' * 10_000 + "1" + "}" * 10_000),
        line(7, payload={"x": "DEEP"}).replace('"DEEP"', "[" * 40 + "]" * 40),
        "[" * 20_000 + "]" * 20_000,
        line(9),
    ]) + "\n"
    response = client.post("/v1/import", content=body, headers={**h, **NDJSON})
    assert response.status_code == 200, response.text
    result = response.json()
    assert (result["lines"], result["created"], result["failed"]) == (9, 2, 7)
    assert [(e["line"], e["field"]) for e in result["errors"]] == [
        (2, "key"), (3, "payload.to"), (4, "target.url"), (5, "payload"), (6, "payload"),
        (7, "payload.x" + ".0" * 31), (8, "line")]
    assert "surrogate" in result["errors"][0]["message"]
    assert "NUL" in result["errors"][1]["message"]
    assert "nested too deeply" in result["errors"][3]["message"]
    keys = [r[0] for r in conn.execute("SELECT key FROM jobs ORDER BY key")]
    assert keys == ["imp:1", "imp:9"]


def test_a_malformed_allow_list_stops_the_api_at_start_not_each_create(
        monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    from crondepot.job.guard import ALLOWLIST_ENV

    monkeypatch.setenv(ALLOWLIST_ENV, "10.0.0.0/8, 10.0.0.1/8")       # host bits set
    with pytest.raises(ValueError, match=f"{ALLOWLIST_ENV}: allow-list entry '10.0.0.1/8'"):
        create_app(db_url)
    monkeypatch.setenv(ALLOWLIST_ENV, "10.0.0.0/8, gateway.internal")
    create_app(db_url)
