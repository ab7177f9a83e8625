"""The small checks every part of the job validator shares: the document's fields
(``spec.py``) and each target kind's (``targets/``). Each raises ``InvalidJob`` naming the
field by its JSON path and saying what was given."""

from __future__ import annotations

import json
import re
from typing import Any

from crondepot.base.errors import InvalidJob
from crondepot.base.vocab import did_you_mean
from crondepot.job.fields import Field, Tagged, Variant


def json_kind(value: Any) -> str:
    """What a JSON value is, for an error message: "a string", "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "an integer", float: "a number", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def boolean(obj: dict[str, Any], spec: Field) -> bool:
    value = obj.get(spec.name, spec.default)
    if not isinstance(value, bool):
        raise InvalidJob(f"expected {spec.path} to be true or false, got {json_kind(value)}",
                         field=spec.path)
    return value


def seconds(obj: dict[str, Any], spec: Field) -> int | float:
    """A number of seconds within ``spec``'s bounds (above ``above``, at most ``high``); a
    boolean is not a number here, though Python says ``True == 1``."""
    value = obj.get(spec.name, spec.default)
    above, high = spec.above, spec.high
    assert above is not None and high is not None
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            above < value <= high):
        raise InvalidJob(f"expected {spec.path} to be a number of seconds above {above:g} and "
                         f"at most {high:g}, got {json.dumps(value)}", field=spec.path)
    return value


def matches(value: Any, spec: Field) -> re.Match[str] | None:
    assert spec.pattern is not None
    return spec.pattern.fullmatch(value) if isinstance(value, str) else None


def an_object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidJob(f"expected {path} to be an object, got {json_kind(value)}", field=path)
    return value


def no_extra(obj: dict[str, Any], allowed: set[str] | frozenset[str], path: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise InvalidJob(f"unknown field {extra[0]!r} in {path}{did_you_mean(extra[0], allowed)}"
                         f"; allowed: {', '.join(sorted(allowed))}", field=f"{path}.{extra[0]}")




def member_names(tagged: Tagged, tag: str) -> frozenset[str]:
    """The member names the variant ``tag`` of ``tagged`` allows, its tag among them."""
    variant = tagged.variant(tag)
    assert variant is not None
    return variant_members(variant, tagged.tag)


def variant_members(variant: Variant, tag_name: str) -> frozenset[str]:
    """The member names ``variant`` allows: its fields' and the tag's (``tag_name``)."""
    return frozenset((tag_name, *(f.name for f in variant.fields)))
