"""The job document's JSON Schema, generated from the field table (``fields.py``) that the
validator reads too: what the OpenAPI document publishes is what ``JobSpec.from_document``
enforces, wherever JSON Schema can say it (the rest is in the descriptions).

Patterns are the validator's own, anchored (``^(?:…)$``: JSON Schema searches, the validator
matches whole); they use only syntax that Python's ``re`` and ECMA-262 read alike.
"""

from __future__ import annotations

from typing import Any

from crondepot.base.jsontext import NO_NUL, NOT_NUL
from crondepot.job import fields as F
from crondepot.job.fields import Field, Tagged
from crondepot.job.targets import TARGETS

JsonSchema = dict[str, Any]


def document_schema() -> JsonSchema:
    """A job document, as ``POST /v1/jobs`` and each line of an import take it."""
    schema = _object(F.DOCUMENT, F.REQUIRED, title="JobDocument",
                     description="A job document (also one line of an NDJSON import).")
    schema["oneOf"] = [{"required": [name]} for name in F.ONE_OF]
    schema["dependentRequired"] = {"anchor": ["every"]}    # an anchor is an interval's
    schema.update(_one_spelling())
    return schema


def _one_spelling() -> JsonSchema:
    """A document or patch gives a number under one name only: not the deprecated top-level
    name together with the member it stands for (max_attempts, retry.max_attempts). A retry
    of null with max_attempts is refused too (null is no object: ``required`` passes it)."""
    ((alias, member),) = F.ALIASES
    parent, name = member.split(".")
    return {"not": {"required": [alias, parent],
                    "properties": {parent: {"required": [name]}}}}


def patch_schema() -> JsonSchema:
    """The fields a PATCH may change: each given replaces the stored field whole, null
    resets it to its default (a required field has none: null is refused)."""
    fields = tuple(f for f in F.DOCUMENT if f.name not in F.NOT_PATCHABLE)
    properties = {f.name: field_schema(f) if f.name in F.REQUIRED
                  else _nullable(field_schema(f)) for f in fields}
    return {"title": "JobPatch", "type": "object", "properties": properties,
            "additionalProperties": False, **_one_spelling(),
            "description": "Fields to change. Each one given replaces the stored field whole; "
                           "null resets it to its default. "
                           f"{' and '.join(F.NOT_PATCHABLE)} cannot be changed (cancel with "
                           "DELETE)."}


def stored_schema(extra: JsonSchema) -> JsonSchema:
    """A stored job as the API returns it: the document with every default filled in
    (``spread`` only when set) and the properties of ``extra`` (a JSON Schema object: id,
    version, times)."""
    # (never the deprecated names: the document written back says each number once)
    shown = tuple(f for f in F.DOCUMENT if not f.deprecated)
    schema = _object(shown, (), title="Job")
    schema["properties"].update(extra.get("properties", {}))
    present = [f.name for f in shown if f not in (F.SPREAD, F.CRON, F.AT, F.EVERY, F.ANCHOR)]
    schema["oneOf"] = [{"required": [name]} for name in F.ONE_OF]
    schema["required"] = [*present, *extra.get("required", ())]
    if "description" in extra:
        schema["description"] = extra["description"]
    return schema


def field_schema(field: Field) -> JsonSchema:
    """One field's schema, its nested objects included."""
    if field is F.TARGET:
        schema = _tagged(TARGETS)
    elif field is F.MISFIRE:
        schema = _tagged(F.MISFIRES)
    elif field is F.SPREAD:
        schema = _object(F.SPREAD_FIELDS, (), title="Spread")
    elif field is F.RETRY:
        schema = _object(F.RETRY_FIELDS, (), title="Retry")
        schema["examples"] = [{"max_attempts": 4, "base_s": 60, "cap_s": 1800}]
    elif field is F.CALENDAR:
        schema = _object(F.CALENDAR_FIELDS, ("exclude",), title="Calendar")
        schema["examples"] = [{"exclude": "in-bank-holidays",
                               "on_excluded": "previous_business_day",
                               "business_days": "mon-fri"}]
    elif field is F.DELIVERY_WINDOW:
        window = _object(F.WINDOW_FIELDS, ("from", "to"), title="DeliveryWindow")
        window["examples"] = [{"from": "09:00", "to": "21:00", "days": "mon-sat",
                               "outside": "defer"}]
        schema = {"anyOf": [window, {"const": "none"}]}
    elif field is F.LABELS:
        schema = {"type": "object", "maxProperties": F.MAX_LABELS,
                  "propertyNames": {"pattern": f"^(?:{F.LABEL_KEY.pattern})$"},
                  "additionalProperties": {"type": "string",
                                           "pattern": f"^(?:{F.LABEL_VALUE.pattern})$"},
                  "examples": [{"bank": "42", "product": "emi"}]}
    elif field is F.CRON:
        # one expression, or a list of them (several schedules on one job)
        one = _leaf(field)
        schema = {"anyOf": [one, {"type": "array", "items": one, "minItems": 1,
                                  "maxItems": F.MAX_CRONS}],
                  "examples": ["0 9 5 * *", ["0 9 * * 1-5", "0 10 * * 6"]]}
    elif field is F.EVERY:
        schema = {**_leaf(field), "examples": ["90s", "4h"]}
    else:
        schema = _leaf(field)
    if field.description:
        schema["description"] = field.description
    if field.default is not F.MISSING:
        schema["default"] = field.default
    if field.deprecated:
        schema["deprecated"] = True
    return _nullable(schema) if field.nullable else schema


def _leaf(field: Field) -> JsonSchema:
    schema: JsonSchema = {"type": field.type}
    if field.choices:
        schema["enum"] = list(field.choices)
    for keyword, value in (("minimum", field.low), ("maximum", field.high),
                           ("exclusiveMinimum", field.above),
                           ("minLength", field.min_length), ("maxLength", field.max_length)):
        if value is not None:
            schema[keyword] = value
    if field.format is not None:
        schema["format"] = field.format
    # Every string says what it may not hold: the validator refuses a NUL in any text field
    # (PostgreSQL cannot store one), and a schema that admitted it would call such a
    # document valid. The validator's own patterns admit no NUL already.
    if field.pattern is not None:
        schema["pattern"] = f"^(?:{field.pattern.pattern})$"
    elif field.non_blank:
        # one character that is not a space, and no NUL anywhere
        schema["pattern"] = f"^{NOT_NUL}*{F.NOT_SPACE_NOR_NUL}{NOT_NUL}*$"
        schema.setdefault("minLength", 1)
    elif field.schema_pattern is not None:
        schema["pattern"] = field.schema_pattern()
    elif field.type == "string" and not field.choices and field.format is None:
        schema["pattern"] = NO_NUL
    return schema


def _object(fields: tuple[Field, ...], required: tuple[str, ...], *, title: str,
            description: str = "") -> JsonSchema:
    schema: JsonSchema = {"title": title, "type": "object",
                          "properties": {f.name: field_schema(f) for f in fields},
                          "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    if description:
        schema["description"] = description
    return schema


def _tagged(tagged: Tagged) -> JsonSchema:
    variants = []
    for variant in tagged.variants:
        schema = _object(variant.fields, (tagged.tag, *variant.required), title=variant.title)
        schema["properties"] = {tagged.tag: {"const": variant.tag},
                                **schema["properties"]}
        variants.append(schema)
    return {"oneOf": variants}


def _nullable(schema: JsonSchema) -> JsonSchema:
    if schema.get("type") == "null" or any(s.get("type") == "null"
                                           for s in schema.get("anyOf", ())):
        return schema
    outer: JsonSchema = {k: schema.pop(k) for k in ("description", "default", "deprecated")
                         if k in schema}
    return {"anyOf": [schema, {"type": "null"}], **outer}
