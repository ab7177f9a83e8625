"""OpenAPI details FastAPI cannot infer: request bodies parsed by the domain, not by a model.

A route whose body is read by ``body.json_body`` declares it with ``request_body(...)``; the
models it names are added to ``components.schemas`` by ``add_documented_schemas``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from crondepot.api.problems import MEDIA_TYPE
from crondepot.api.schemas import DOCUMENTED, Problem

REF = "#/components/schemas/{model}"


def request_body(model: type[BaseModel], examples: dict[str, Any], *,
                 media_type: str = "application/json") -> dict[str, Any]:
    """``openapi_extra`` for a route that reads a ``model``-shaped body itself."""
    return {"requestBody": {"required": True, "content": {media_type: {
        "schema": {"$ref": REF.format(model=model.__name__)},
        "examples": {name: {"value": value} for name, value in examples.items()},
    }}}}


def ndjson_body(examples: dict[str, str]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/x-ndjson": {
        "schema": {"type": "string", "description": "one job document (JobDocument) per line"},
        "examples": {name: {"value": value} for name, value in examples.items()},
    }}}}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses`` entries for the problem statuses a route may answer."""
    return {status: {"model": Problem, "content": {MEDIA_TYPE: {}},
                     "description": "RFC 9457 problem"} for status in statuses}


def add_documented_schemas(spec: dict[str, Any]) -> dict[str, Any]:
    _, defs = models_json_schema([(m, "validation") for m in DOCUMENTED], ref_template=REF)
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in defs.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    return spec
