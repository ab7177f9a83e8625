"""The client covers the API: every operation and schema of ``/openapi.json`` has its client
method or typed result, both clients have the same methods, and every problem type the
server answers has its exception. These fail when a route or schema is added to the API and
not to the client (crondepot/client/operations.py says how to add one)."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from crondepot.api import create_app
from crondepot.api import problems as server_problems
from crondepot.api.problems import api_routes
from crondepot.client import AsyncClient, Client, errors, models
from crondepot.client.operations import OPERATIONS, REQUEST_SCHEMAS

# Routes of the app that are not the API a program calls, each with why.
EXCLUDED: dict[str, str] = {
    "/console": "the web console: HTML pages for people, behind a cookie session",
    "/metrics": "the Prometheus scrape: the operator's, with its own token",
    "/docs": "the interactive documentation (HTML)",
    "/redoc": "the reference documentation (HTML)",
    "/openapi.json": "the document this test reads",
}
# A request schema's property named otherwise as a Python parameter ("from" is a keyword).
PARAMETER = {"from": "since", "to": "until"}
# Request schemas a method takes whole (a job document, a merge patch), as this parameter.
WHOLE = {"JobDocument": "document", "JobPatch": "changes"}
# Problem members read from the exception's ``problem`` document, not an attribute of it.
PROBLEM_ONLY = {"lines": "an import refused whole: how many lines it had",
                "failed": "an import refused whole: how many lines failed"}


@pytest.fixture(scope="module")
def app() -> FastAPI:
    return create_app("postgresql://unused/none")       # built from the routes: no database


@pytest.fixture(scope="module")
def spec(app: FastAPI) -> dict[str, Any]:
    document: dict[str, Any] = app.openapi()
    return document


def _method(client: Any, dotted: str) -> Any:
    target = client
    for part in dotted.split("."):
        target = getattr(target, part)
    return target


def _groups(client: Any) -> dict[str, Any]:
    return {name: value for name, value in vars(client).items() if hasattr(value, "_c")}


def _public(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in dir(obj)
            if not name.startswith("_") and callable(getattr(obj, name))}


def test_every_operation_of_the_document_has_a_client_method(spec: dict[str, Any]) -> None:
    operations = {op["operationId"]: f"{method.upper()} {path}"
                  for path, ops in spec["paths"].items() for method, op in ops.items()}
    missing = {op: route for op, route in operations.items() if op not in OPERATIONS}
    assert missing == {}, ("operations without a client method: add a builder to "
                           "crondepot/client/operations.py, a method to sync.py and aio.py "
                           "and a row to OPERATIONS")
    assert set(OPERATIONS) - set(operations) == set(), "rows for operations that are gone"


def test_every_row_names_a_method_of_both_clients() -> None:
    sync, aio = Client("http://unused", "t"), AsyncClient("http://unused", "t")
    for operation, dotted in OPERATIONS.items():
        assert callable(_method(sync, dotted)), operation
        assert inspect.iscoroutinefunction(_method(aio, dotted)), operation
    sync.close()


def test_both_clients_have_the_same_methods_with_the_same_signatures() -> None:
    sync, aio = Client("http://unused", "t"), AsyncClient("http://unused", "t")
    pairs = [(sync, aio)] + [(group, _groups(aio)[name])
                             for name, group in _groups(sync).items()]
    assert set(_groups(sync)) == set(_groups(aio)) and len(pairs) > 5
    skip = {"close", "aclose", "send", "pages"}
    for one, other in pairs:
        mine, theirs = _public(one), _public(other)
        assert set(mine) - skip == set(theirs) - skip, type(one).__name__
        for name in set(mine) - skip:
            a, b = inspect.signature(mine[name]), inspect.signature(theirs[name])
            assert a.parameters == b.parameters, f"{type(one).__name__}.{name}"
            want = a.return_annotation.replace("Iterator[", "AsyncIterator[")
            assert b.return_annotation == want, f"{type(one).__name__}.{name}"
    sync.close()


def test_every_route_is_in_the_document_or_excluded_with_a_reason(
        app: FastAPI, spec: dict[str, Any]) -> None:
    documented = set(spec["paths"])
    others = {path for path, _, _ in api_routes(app) if path not in documented}
    unexplained = {path for path in others
                   if not any(path == p or path.startswith(p + "/") for p in EXCLUDED)}
    assert unexplained == set()
    assert "/metrics" in others and any(p.startswith("/console/") for p in others)


def test_every_response_schema_is_a_typed_dict_with_its_properties(
        spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    unknown = set(schemas) - set(models.SCHEMAS) - set(REQUEST_SCHEMAS)
    assert unknown == set(), ("schemas without a TypedDict in crondepot/client/models.py "
                              "(SCHEMAS) or a method in REQUEST_SCHEMAS")
    assert set(models.SCHEMAS) <= set(schemas), "SCHEMAS names a schema that is gone"
    for name, typed in models.SCHEMAS.items():
        schema = schemas[name]
        keys = typed.__required_keys__ | typed.__optional_keys__
        assert keys == set(schema["properties"]), name
        optional = set(schema["properties"]) - set(schema.get("required", ()))
        assert typed.__optional_keys__ == optional, name


def test_every_request_schema_is_a_methods_parameters(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    sync = Client("http://unused", "t")
    for name, dotted in REQUEST_SCHEMAS.items():
        if dotted == "errors":
            continue
        parameters = inspect.signature(_method(sync, dotted)).parameters
        if name in WHOLE:
            assert WHOLE[name] in parameters, name
            continue
        for prop in schemas[name]["properties"]:
            assert PARAMETER.get(prop, prop) in parameters, f"{name}.{prop} -> {dotted}"
    sync.close()


def test_the_problem_schema_is_the_exceptions(spec: dict[str, Any]) -> None:
    schemas = spec["components"]["schemas"]
    field_error = {f.name for f in dataclasses.fields(errors.FieldError)}
    assert field_error == set(schemas["FieldError"]["properties"])
    attributes = {name for cls in vars(errors).values()
                  if isinstance(cls, type) and issubclass(cls, errors.ApiError)
                  for name in dir(cls)}
    attributes |= set(vars(errors.ApiError({}, status=400)))
    missing = set(schemas["Problem"]["properties"]) - attributes - set(PROBLEM_ONLY)
    assert missing == set()


def _server_slugs() -> set[str]:
    """Every problem type the server answers: its ApiError classes' slugs, and the slugs
    its one table and the handlers write (read from the module's text: they are literals
    there, the table is the module's own)."""
    slugs: set[str] = set()
    stack = [server_problems.ApiError]
    while stack:
        cls = stack.pop()
        slugs.add(cls.slug)
        stack.extend(cls.__subclasses__())
    text = Path(server_problems.__file__).read_text()
    slugs |= set(re.findall(r'_Kind\(\d{3}, "([a-z-]+)"', text))
    slugs |= set(re.findall(r'problem\(\d{3}, "([a-z-]+)"', text))
    slugs |= set(re.findall(r'\d{3}: "([a-z-]+)"', text))      # _http_slug's table
    return slugs


def test_every_problem_type_of_the_server_has_its_exception() -> None:
    slugs = _server_slugs()
    assert {"validation", "key-conflict", "pool-starved", "not-found",
            "method-not-allowed", "internal"} <= slugs       # the reading found them all
    assert slugs - set(errors.BY_SLUG) == set()
    assert set(errors.BY_SLUG) - slugs == set(), "an exception for a type that is gone"


@pytest.mark.parametrize(("status", "slug", "cls"), [
    (404, "not-found", errors.NotFound), (409, "key-conflict", errors.KeyConflict),
    (422, "quota-exceeded", errors.QuotaExceeded), (418, "teapot", errors.ApiError),
    (409, "a-newer-conflict", errors.Conflict), (502, "", errors.ServerError),
])
def test_a_problem_becomes_the_exception_of_its_type_else_its_status(
        status: int, slug: str, cls: type[errors.ApiError]) -> None:
    problem = {"type": errors.PROBLEM_BASE + slug, "title": "t", "status": status,
               "detail": "d", "errors": [{"field": "cron", "message": "bad"}]}
    raised = errors.error_for(status, problem, {})
    assert type(raised) is cls and raised.status == status
    assert raised.errors == [errors.FieldError("cron", "bad")]


def test_the_client_loads_no_server_library() -> None:
    """What a user's process imports: crondepot.Client brings neither psycopg nor FastAPI,
    and ``import crondepot`` does not load the client until it is named."""
    script = ("import sys, crondepot\n"
              "before = 'crondepot.client' in sys.modules\n"
              "crondepot.Client, crondepot.AsyncClient\n"
              "print(before, sorted(m for m in ('psycopg', 'psycopg_pool', 'fastapi', "
              "'starlette', 'crondepot.api', 'crondepot.db') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split(None, 1) == ["False", "[]\n"]


def test_every_method_is_called_by_the_client_tests() -> None:
    """Each method of OPERATIONS, and each iterator, is exercised against the real API in
    test_client.py (which runs it with both clients)."""
    text = (Path(__file__).parent / "test_client.py").read_text()
    sync = Client("http://unused", "t")
    methods = set(OPERATIONS.values()) | {
        f"{group}.{name}" for group, value in _groups(sync).items()
        for name in _public(value) if name.startswith("iter")}
    sync.close()
    assert {m for m in methods if f".{m}(" not in text} == set()
