"""The OpenAPI document: what FastAPI cannot infer, and the machinery's answers on every route.

Routes declare what only they know: their domain's problem statuses (``problems(404,
409)``), the bodies they read themselves (``request_body``, ``ndjson_body``), the headers
and links of their answers. ``finish`` then adds, from the route's dependencies, what the
machinery answers on every route that uses it, so no route can forget one:

    depends on          documented
    a bearer token      security: bearer; 401 (WWW-Authenticate), 429 (Retry-After)
    an admin token      403
    a connection        503 (the database is down, its schema is not current, or no
                        connection was free within --pool-wait: then Retry-After)
    any parameter/body  422 (FastAPI's HTTPValidationError replaced: every 422 is a problem)
    a request body      408, 413 (api/intake.py reads it whole, within its deadline and
                        bound, in front of every route)
    query/path text     no NUL (``body.text_params`` refuses it)
    a 428 (declared)    its If-Match header required (its absence is that 428)

Every error status is ``application/problem+json`` with the Problem schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from crondepot.api import auth
from crondepot.api.models import DOCUMENTED, CalendarDocument, LimitDocument, Problem
from crondepot.api.problems import MEDIA_TYPE, api_routes
from crondepot.base.jsontext import NO_NUL

REF = "#/components/schemas/{model}"
SCHEME = "bearer"
IF_MATCH = '^(W/)?"?[0-9]{1,9}"?$'

STATUS_TEXT = {
    400: "Bad request",
    401: "No token, or an unknown or revoked one",
    403: "The token's role (or the tenant) does not allow this",
    404: "Unknown id, or another tenant's (never said which)",
    408: "The request body did not arrive whole within the API's body timeout",
    409: "Conflict with the stored state",
    412: "The job changed since the version in If-Match",
    413: "Request body over its bound",
    415: "Body of an unsupported Content-Type",
    422: "Invalid request: `errors` names each field",
    428: "If-Match header required",
    429: "The token's request budget is spent: retry after Retry-After seconds",
    503: "The database is unavailable or its schema is not current, or no database "
         "connection was free in time (`pool-starved`), or the process holds its budget of "
         "request bodies (`bodies-full`): retry after Retry-After seconds",
}
_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"},
                               "required": True}},
    429: {"Retry-After": {"description": "seconds to wait", "required": True,
                          "schema": {"type": "string", "pattern": "^[0-9]+$"}}},
    503: {"Retry-After": {"description": "seconds to wait (with `pool-starved`, "
                                         "`bodies-full`)",
                          "required": False, "schema": {"type": "string",
                                                        "pattern": "^[0-9]+$"}}},
}


def request_body(model: type[BaseModel], examples: dict[str, Any], *,
                 media_type: str = "application/json") -> dict[str, Any]:
    """``openapi_extra`` for a route that reads a ``model``-shaped body itself."""
    return {"requestBody": {"required": True, "content": {media_type: {
        "schema": {"$ref": REF.format(model=model.__name__)},
        "examples": {name: {"value": value} for name, value in examples.items()},
    }}}}


def ndjson_body(examples: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """``openapi_extra`` for the NDJSON import: the body is the array's items, each one
    JSON document on its own line (what a client or a generator serialises it as)."""
    return {"requestBody": {"required": True, "content": {"application/x-ndjson": {
        "schema": {"type": "array", "items": {"$ref": REF.format(model="JobDocument")},
                   "minItems": 1,
                   "description": "one job document per line (NDJSON): each item "
                                  "serialised as compact JSON followed by a newline; a "
                                  "body with no line, or none valid, is refused (422)"},
        "examples": {name: {"value": value} for name, value in examples.items()},
    }}}}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses`` entries for the problem statuses a route may answer."""
    return {status: problem_response(status) for status in statuses}


def problem_response(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": STATUS_TEXT.get(status, "RFC 9457 problem"),
        "content": {MEDIA_TYPE: {"schema": {"$ref": REF.format(model="Problem")}}}}
    if status in _HEADERS:
        response["headers"] = _HEADERS[status]
    return response


def location(url: str) -> dict[str, Any]:
    """The ``Location`` header of a 201: the new resource's URL, like ``url``."""
    return {"Location": {"description": f"the new resource: `{url}`", "required": True,
                         "schema": {"type": "string", "format": "uri-reference"}}}


def etag() -> dict[str, Any]:
    """The ``ETag`` header of an answer carrying a job."""
    return {"ETag": {"description": "the job's version, quoted: send it back in If-Match",
                     "required": True, "schema": {"type": "string", "pattern": '^"[0-9]+"$'}}}


def operation_id(route: APIRoute) -> str:
    """``jobs_read``, ``runs_list_runs``: the route module and function, for links and
    generated clients (FastAPI's default spells out path and method)."""
    module = route.endpoint.__module__.rsplit(".", 1)[-1]
    return f"{module}_{route.name.strip('_')}"


def job_links(job: str, *, etag: bool = True) -> dict[str, Any]:
    """Links from an answer carrying a job (``job``: a JSON pointer to it, like
    ``$response.body#``) to the operations on that job; PATCH too where the answer has the
    job's ETag (its If-Match)."""
    ids = {"job_id": f"{job}/id"}
    links: dict[str, Any] = {name: {"operationId": f"jobs_{op}", "parameters": ids}
                             for name, op in (("GetJob", "read"), ("PauseJob", "pause"),
                                              ("ResumeJob", "resume"),
                                              ("TriggerJob", "trigger"),
                                              ("CancelJob", "cancel"))}
    links["ListRuns"] = {"operationId": "runs_list_runs", "parameters": ids}
    if etag:
        links["PatchJob"] = {"operationId": "jobs_patch",
                             "parameters": {**ids, "header.if-match": "$response.header.ETag"}}
    return links


def link(link_name: str, operation: str, **parameters: str) -> dict[str, Any]:
    """One link to ``operation``, its parameters taken from the answer or request."""
    return {link_name: {"operationId": operation, "parameters": parameters}}


def finish(app: FastAPI, spec: dict[str, Any]) -> dict[str, Any]:
    """The generated document, completed as the module docstring says."""
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    _add_models(schemas)
    spec["components"]["securitySchemes"] = {SCHEME: {
        "type": "http", "scheme": "bearer",
        "description": "an API token (`crondepot tokens create`, or POST /v1/tokens)"}}
    for route, operation in _operations(app, spec):
        _complete(route, operation)
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    return spec


def _add_models(schemas: dict[str, Any]) -> None:
    models: tuple[type[BaseModel], ...] = (*DOCUMENTED, LimitDocument, CalendarDocument,
                                           Problem)
    _, defs = models_json_schema([(m, "validation") for m in models], ref_template=REF)
    for name, schema in defs.get("$defs", {}).items():
        schemas.setdefault(name, schema)


def _operations(app: FastAPI, spec: dict[str, Any]
                ) -> Iterator[tuple[APIRoute, dict[str, Any]]]:
    for path, methods, route in api_routes(app):
        if route.include_in_schema:
            for method in sorted(methods):
                operation = spec["paths"].get(path, {}).get(method.lower())
                if operation is not None:
                    yield route, operation


def _complete(route: APIRoute, operation: dict[str, Any]) -> None:
    calls = set(_calls(route.dependant))
    responses: dict[str, Any] = operation.setdefault("responses", {})
    added: list[int] = []
    if auth.principal in calls:
        operation["security"] = [{SCHEME: []}]
        added += [401, 429]
    if auth.writer in calls:
        added.append(403)
    if auth.connection in calls:
        added.append(503)
    if operation.get("parameters") or "requestBody" in operation:
        added.append(422)
    if "requestBody" in operation:
        added += [408, 413]
    for code in added:
        responses.setdefault(str(code), {})
    for status, response in responses.items():
        if status[0] in "45":
            declared = problem_response(int(status))
            response["content"] = declared["content"]
            if response.get("description") in (None, "", "RFC 9457 problem",
                                               "Validation Error"):
                response["description"] = declared["description"]
            if "headers" in declared:
                response.setdefault("headers", {}).update(declared["headers"])
    operation["responses"] = dict(sorted(responses.items()))
    for parameter in operation.get("parameters", ()):
        if parameter["in"] == "header" and parameter["name"].lower() == "if-match":
            if "428" in responses:
                # the route answers its absence with 428, not a default
                parameter["required"] = True
            parameter["schema"] = {"type": "string", "pattern": IF_MATCH,
                                   "description": parameter.get("description", "")}
    for parameter in operation.get("parameters", ()):
        if parameter["in"] in ("query", "path"):
            _refuse_nul(parameter.get("schema", {}))


def _calls(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for dependency in dependant.dependencies:
        if dependency.call is not None:
            yield dependency.call
        yield from _calls(dependency)


def _refuse_nul(schema: dict[str, Any]) -> None:
    """Say in the schema what ``text_params`` refuses: a NUL in a query or path string."""
    for option in schema.get("anyOf", ()):
        _refuse_nul(option)
    if schema.get("type") == "string" and not {"pattern", "format", "enum"} & set(schema):
        schema["pattern"] = NO_NUL
