"""The OpenAPI document says what the API answers, and /docs and /redoc work offline."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crondepot.api import create_app
from crondepot.base.vocab import (
    ATTEMPT_OUTCOMES,
    END_REASONS,
    OUTCOMES,
    PRIORITIES,
    RUN_STATES,
    SKIP_REASONS,
    TARGET_KINDS,
)
from tests.support.api import EMI

PROBLEM = {"$ref": "#/components/schemas/Problem"}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    # The document is built from the routes alone: no database is opened.
    document: dict[str, Any] = create_app("postgresql://unused/none").openapi()
    return document


def operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, ops in spec["paths"].items()
            for method, op in ops.items()]


def test_every_error_status_is_a_problem_document(spec: dict[str, Any]) -> None:
    for path, method, op in operations(spec):
        for status, response in op["responses"].items():
            if status[0] in "45":
                assert response["content"] == {"application/problem+json": {
                    "schema": PROBLEM}}, (method, path, status)
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    assert "ValidationError" not in spec["components"]["schemas"]
    assert "Problem" in spec["components"]["schemas"]


def test_every_v1_operation_needs_the_bearer_token_and_documents_its_refusals(
        spec: dict[str, Any]) -> None:
    assert spec["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": spec["components"][
            "securitySchemes"]["bearer"]["description"]}
    for path, method, op in operations(spec):
        statuses = set(op["responses"])
        if path.startswith("/v1/"):
            assert op["security"] == [{"bearer": []}], (method, path)
            assert {"401", "429", "503"} <= statuses, (method, path)
            assert op["responses"]["429"]["headers"]["Retry-After"]["required"]
            if method != "get":
                assert "403" in statuses, (method, path)
        else:
            assert "security" not in op, (method, path)
        if op.get("parameters") or "requestBody" in op:
            assert "422" in statuses, (method, path)
        if "requestBody" in op:
            assert "413" in statuses, (method, path)


def test_query_and_path_text_is_documented_without_nul(spec: dict[str, Any]) -> None:
    audit = {p["name"]: p["schema"] for p in spec["paths"]["/v1/audit"]["get"]["parameters"]}
    assert audit["subject"]["anyOf"][0]["pattern"] == "^[^\\u0000]*$"
    assert re.fullmatch(audit["subject"]["anyOf"][0]["pattern"], "bank42:1")
    assert not re.fullmatch(audit["subject"]["anyOf"][0]["pattern"], "a\x00")


def _strings_that_admit_a_nul(schema: Any, where: str, components: dict[str, Any],
                              seen: frozenset[str]) -> Iterator[str]:
    """The value schemas under ``schema`` of a string with no rule against a NUL."""
    if not isinstance(schema, dict):
        return
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name not in seen:
            yield from _strings_that_admit_a_nul(components[name], f"{where}:{name}",
                                                 components, seen | {name})
        return
    if schema.get("type") == "string" and not {"enum", "const", "format"} & set(schema):
        pattern = schema.get("pattern")
        if pattern is None or re.search(pattern, "a\x00b") or re.search(pattern, "\x00"):
            yield where
    for name, sub in schema.get("properties", {}).items():
        yield from _strings_that_admit_a_nul(sub, f"{where}.{name}", components, seen)
    for key in ("items", "additionalProperties", "propertyNames"):
        yield from _strings_that_admit_a_nul(schema.get(key), f"{where}[]", components, seen)
    # Alternatives of a value; an object's own anyOf (BulkRequest's, ReplayRequest's "at
    # least one filter") only narrows the properties above, which are checked.
    if "properties" not in schema:
        for key in ("anyOf", "oneOf", "allOf"):
            for sub in schema.get(key, ()):
                yield from _strings_that_admit_a_nul(sub, where, components, seen)


def test_every_string_of_a_request_body_is_documented_without_nul(
        spec: dict[str, Any]) -> None:
    """The API refuses a NUL in any text (PostgreSQL cannot store one) with a 422 naming the
    field; a body schema that admitted one would call that request valid (schemathesis,
    seed 23: a job key, a spread key, a bulk action's key_prefix). Only RFC 3339 instants
    (format: date-time) and enums are left to their own rules."""
    admitting = [where for path, method, op in operations(spec)
                 for media in op.get("requestBody", {}).get("content", {}).values()
                 for where in _strings_that_admit_a_nul(
                     media.get("schema"), f"{method.upper()} {path}",
                     spec["components"]["schemas"], frozenset())]
    assert admitting == []
    bulk = spec["components"]["schemas"]["BulkRequest"]["properties"]["key_prefix"]
    assert bulk["anyOf"][0]["pattern"] == "^[^\\u0000]*$"


def test_patch_documents_if_match_as_required(spec: dict[str, Any]) -> None:
    patch = spec["paths"]["/v1/jobs/{job_id}"]["patch"]
    (if_match,) = [p for p in patch["parameters"] if p["name"].lower() == "if-match"]
    assert if_match["required"] is True
    for value in ("3", '"3"', 'W/"3"'):
        assert re.fullmatch(if_match["schema"]["pattern"], value)


@pytest.mark.parametrize(("path", "method", "location"), [
    ("/v1/jobs", "post", "/v1/jobs/{id}"),
    ("/v1/jobs/{job_id}/trigger", "post", "/v1/runs/{run_id}"),
    ("/v1/tokens", "post", "/v1/tokens/{id}"),
    ("/v1/limits/{name}", "put", "/v1/limits/{name}"),
])
def test_201_responses_document_location(spec: dict[str, Any], path: str, method: str,
                                         location: str) -> None:
    header = spec["paths"][path][method]["responses"]["201"]["headers"]["Location"]
    assert header["required"] is True and location in header["description"]


def test_ndjson_import_is_documented_as_job_documents(spec: dict[str, Any]) -> None:
    body = spec["paths"]["/v1/import"]["post"]["requestBody"]["content"]
    ndjson = body["application/x-ndjson"]
    assert ndjson["schema"]["items"] == {"$ref": "#/components/schemas/JobDocument"}
    assert [d["key"] for d in ndjson["examples"]["two_jobs"]["value"]] == \
        ["bank42:48213:emi", "ops:nightly-report"]


def _enum(schema: dict[str, Any]) -> tuple[str, ...]:
    """The values a property's schema allows, its null left aside (``X | None``)."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    assert len(options) == 1, schema
    return tuple(options[0]["enum"])


# Every closed set a response or a body shows, published as its vocabulary tuple
# (crondepot.base.vocab), in the tuple's order: (schema, property) -> the tuple.
PUBLISHED: dict[tuple[str, str], tuple[str, ...]] = {
    **{(model, "priority"): PRIORITIES for model in ("Run", "ListedRun", "RunDetail",
                                                        "DeadRun", "JobDocument", "Job")},
    **{(model, "status"): RUN_STATES for model in ("Run", "ListedRun", "RunDetail")},
    **{(model, "skip_reason"): SKIP_REASONS for model in ("Run", "ListedRun", "RunDetail")},
    ("Job", "ended_reason"): END_REASONS,
    ("Attempt", "outcome"): ATTEMPT_OUTCOMES,
    ("Problem", "run_status"): RUN_STATES,
}


@pytest.mark.parametrize(("model", "name"), list(PUBLISHED))
def test_each_closed_set_is_published_as_its_vocabulary(spec: dict[str, Any], model: str,
                                                         name: str) -> None:
    schema = spec["components"]["schemas"][model]["properties"][name]
    assert _enum(schema) == PUBLISHED[model, name]


def test_the_stats_are_keyed_by_priority_and_by_outcome(spec: dict[str, Any]) -> None:
    stats = spec["components"]["schemas"]["Stats"]["properties"]
    assert tuple(stats["queue"]["propertyNames"]["enum"]) == PRIORITIES
    assert tuple(stats["finished_last_hour"]["propertyNames"]["enum"]) == OUTCOMES


@pytest.mark.parametrize("model", ["Job", "JobDocument", "JobPatch"])
def test_the_target_kinds_are_published_one_variant_each(spec: dict[str, Any],
                                                          model: str) -> None:
    target = spec["components"]["schemas"][model]["properties"]["target"]
    variants = target["oneOf"]
    assert tuple(v["properties"]["type"]["const"] for v in variants) == TARGET_KINDS


def test_every_reference_resolves(spec: dict[str, Any]) -> None:
    text = repr(spec)
    for name in set(re.findall(r"#/components/schemas/(\w+)", text)):
        assert name in spec["components"]["schemas"], name


def test_201s_send_location(client: TestClient, h: dict[str, str]) -> None:
    made = client.post("/v1/jobs", json=EMI, headers=h)
    assert made.headers["Location"] == f"/v1/jobs/{made.json()['id']}"
    read = client.get(made.headers["Location"], headers=h).json()
    assert read.pop("health")["consecutive_failures"] == 0    # only a read adds the health
    assert read == made.json()
    again = client.post("/v1/jobs", json=EMI, headers=h)
    assert again.status_code == 200 and "Location" not in again.headers
    trigger = client.post(f"/v1/jobs/{made.json()['id']}/trigger", headers=h)
    assert client.get(trigger.headers["Location"], headers=h).json()["run_id"] == \
        trigger.json()["run_id"]
    token = client.post("/v1/tokens", json={"role": "read"}, headers=h)
    assert token.headers["Location"] == f"/v1/tokens/{token.json()['id']}"
    limit = client.put("/v1/limits/own.one", json={"rate_per_second": 5}, headers=h)
    assert limit.headers["Location"] == "/v1/limits/own.one"
    assert client.get(limit.headers["Location"], headers=h).json()["name"] == "own.one"


def test_a_405_allows_every_method_of_the_path(client: TestClient) -> None:
    response = client.request("OPTIONS", "/v1/jobs/1")
    assert response.status_code == 405
    assert response.headers["Allow"] == "DELETE, GET, PATCH"
    assert response.headers["content-type"] == "application/problem+json"


def test_a_model_body_that_is_not_utf8_is_a_422_problem(client: TestClient,
                                                        h: dict[str, str]) -> None:
    response = client.post("/v1/tokens", content=b"\xff",
                           headers={**h, "Content-Type": "application/json"})
    assert response.status_code == 422
    assert response.json()["errors"] == [{"field": "body", "message": "malformed JSON"}]


def test_model_bodies_do_not_coerce_types(client: TestClient, h: dict[str, str]) -> None:
    for path, body in (("/v1/signing-secret/rotate", {"overlap_seconds": False}),
                       ("/v1/dead-letter/replay", {"job_id": 1, "dry_run": "yes"}),
                       ("/v1/dead-letter/replay", {"job_id": True}),
                       ("/v1/dead-letter/replay", {"until": 0.5}),
                       ("/v1/tokens", {"label": 5})):
        assert client.post(path, json=body, headers=h).status_code == 422, body
    # what JSON Schema calls valid still is: an integral float, an RFC 3339 string
    for path, body in (("/v1/signing-secret/rotate", {"overlap_seconds": 60.0}),
                       ("/v1/dead-letter/replay", {"job_id": 1.0, "dry_run": True,
                                                   "since": "2025-01-05T03:30:00Z"})):
        assert client.post(path, json=body, headers=h).status_code == 200, body
    limit = client.put("/v1/limits/own.two", json={"rate_per_second": 5, "burst": 7.0},
                       headers=h)
    assert limit.status_code == 201 and limit.json()["burst"] == 7


@pytest.mark.parametrize(("page", "assets"), [
    ("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")),
    ("/redoc", ("redoc.standalone.js",)),
])
def test_docs_pages_use_only_assets_the_app_serves(client: TestClient, page: str,
                                                   assets: tuple[str, ...]) -> None:
    html = client.get(page).text
    urls = re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]""", html)
    assert urls, html
    for url in urls:
        assert url.startswith("/"), f"{page} loads {url} from elsewhere"
        assert client.get(url).status_code == 200, url
    assert "http://" not in html and "https://" not in html
    for asset in assets:
        response = client.get(f"/docs/assets/{asset}")
        assert response.status_code == 200 and len(response.content) > 100_000, asset


def test_links_name_operations_and_parameters_that_exist(spec: dict[str, Any]) -> None:
    by_id = {op["operationId"]: op for _, _, op in operations(spec)}
    found = 0
    for path, method, op in operations(spec):
        for response in op["responses"].values():
            for name, link in response.get("links", {}).items():
                target = by_id[link["operationId"]]
                names = {p["name"].lower() for p in target.get("parameters", ())}
                for parameter in link["parameters"]:
                    assert parameter.split(".")[-1].lower() in names, (path, method, name)
                found += 1
    assert found >= 20


def test_every_documented_request_example_is_accepted(client: TestClient,
                                                      h: dict[str, str]) -> None:
    spec = client.get("/openapi.json").json()
    job = client.post("/v1/jobs", json={**EMI, "key": "examples:base"}, headers=h).json()
    # A run to name in /v1/runs/{run_id}/...: queued, so a retry's example body is read and
    # then refused for the run's state (409), not for the body (422).
    run = client.post(f"/v1/jobs/{job['id']}/trigger", headers=h).json()
    job = client.get(f"/v1/jobs/{job['id']}", headers=h).json()
    # The calendar a job document's example names (PATCH with a calendar field)
    client.put("/v1/calendars/in-bank-holidays", json={"dates": ["2026-12-25"]}, headers=h)
    tried = 0
    for path, method, op in operations(spec):
        for media, content in op.get("requestBody", {}).get("content", {}).items():
            schema_ref = content.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
            examples = [e["value"] for e in content.get("examples", {}).values()] or \
                spec["components"]["schemas"].get(schema_ref, {}).get("examples", [])
            for example in examples:
                name = "own-ex" if path.startswith("/v1/calendars") else "own.ex"
                url = path.replace("{job_id}", str(job["id"])).replace("{name}", name) \
                    .replace("{run_id}", run["run_id"]).replace("{key}", job["key"])
                headers = {**h, "Content-Type": media, "If-Match": f'"{job["version"]}"'}
                if media == "application/x-ndjson":
                    body = "".join(json.dumps(item) + "\n" for item in example).encode()
                elif media == "text/calendar":
                    body = example.encode()
                else:
                    body = json.dumps(example).encode()
                response = client.request(method.upper(), url, content=body, headers=headers)
                if "{run_id}" in path and response.status_code == 409:
                    assert response.json()["type"].endswith("/run-not-retryable")
                    tried += 1
                    continue
                assert response.status_code < 300, (method, path, example, response.text)
                if media == "application/x-ndjson":
                    assert response.json()["failed"] == 0, response.text
                if path in ("/v1/jobs/{job_id}", "/v1/jobs/by-key/{key}"):
                    job = response.json()
                tried += 1
    assert tried >= 9


def test_redoc_bundle_fetches_nothing_from_a_cdn(client: TestClient) -> None:
    """/redoc's page names only the app's own URLs (above); its bundle, as served, no longer
    draws the Redocly logo from cdn.redoc.ly."""
    html = client.get("/redoc").text
    (bundle_url,) = re.findall(r'<script src="([^"]+)"', html)
    bundle = client.get(bundle_url)
    assert bundle.status_code == 200 and len(bundle.content) > 100_000
    assert "cdn.redoc.ly" not in bundle.text
    assert not re.search(r"""['"(]https?://cdn\.""", bundle.text)


def _allows_null(schema: dict[str, Any]) -> bool:
    if schema.get("type") == "null" or "null" in (schema.get("type") or []):
        return True
    return any(_allows_null(s) for k in ("anyOf", "oneOf") for s in schema.get(k, ()))


def test_no_branch_gives_a_type_its_nullable_property_lacks(spec: dict[str, Any]) -> None:
    """A schema's anyOf/oneOf branch that names a type for a property whose own schema
    allows null: ReDoc merges them (allOf) and warns "Incompatible types" (it logged 23
    such for BulkRequest and ReplayRequest). Branches say "present and not null" instead."""
    found = []
    for name, schema in spec["components"]["schemas"].items():
        own = schema.get("properties", {})
        for key in ("anyOf", "oneOf", "allOf"):
            for branch in schema.get(key, ()):
                for prop, sub in branch.get("properties", {}).items():
                    if "type" in sub and prop in own and _allows_null(own[prop]):
                        found.append(f"{name}.{key}.{prop}")
    assert not found, found
