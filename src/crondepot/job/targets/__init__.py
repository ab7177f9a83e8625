"""What a job document's ``target`` may say, one module per kind.

Each kind (``TARGET_KINDS``) is the module of its name here, which declares

- ``VARIANT``: the kind's fields, its shape in the field table and the published schema;
- ``check(target)``: the target as stored, or ``InvalidJob`` naming the bad field;
- ``summary(target)``: where a run calls, in a few words ("http https://…");
- ``description(target)``: that with the kind's settings, as ``jobs show`` prints it.

A worker calls a run of the kind through the module of the same name in
crondepot.worker.targets. A new kind is its name in TARGET_KINDS and these two modules;
the registries below and the worker's are built from the tuple.
"""

from __future__ import annotations

import json
from importlib import import_module
from typing import Any, Protocol, cast

from crondepot.base.errors import InvalidJob
from crondepot.base.vocab import TARGET_KINDS
from crondepot.job import fields as F
from crondepot.job.checks import an_object
from crondepot.job.fields import Tagged, Variant


class Kind(Protocol):
    """A kind's module, as this package reads it."""

    VARIANT: Variant

    def check(self, target: dict[str, Any]) -> dict[str, Any]: ...

    def summary(self, target: dict[str, Any]) -> str: ...

    def description(self, target: dict[str, Any]) -> str: ...


def _load(kind: str) -> Kind:
    module = cast(Kind, import_module(f"{__name__}.{kind}"))
    assert module.VARIANT.tag == kind, f"{__name__}.{kind} declares {module.VARIANT.tag!r}"
    return module


KINDS: dict[str, Kind] = {kind: _load(kind) for kind in TARGET_KINDS}
TARGETS = Tagged(field=F.TARGET, tag="type",
                 variants=tuple(kind.VARIANT for kind in KINDS.values()))


def kind_of(target: dict[str, Any]) -> Kind | None:
    """The module of ``target``'s kind, or None for a type that is not one."""
    kind = target.get("type")
    return KINDS.get(kind) if isinstance(kind, str) else None


def check(value: Any) -> dict[str, Any]:
    """A document's ``target`` as stored, or ``InvalidJob`` naming the bad field."""
    if value is None:
        raise InvalidJob("target is required", field="target")
    target = an_object(value, "target")
    kind = kind_of(target)
    if kind is None:
        kinds = " or ".join(repr(k) for k in TARGET_KINDS)
        raise InvalidJob(f"expected target.type to be {kinds}, got "
                         f"{json.dumps(target.get('type'))}", field="target.type")
    return kind.check(target)


def summary(target: dict[str, Any]) -> str:
    """Where a stored target calls, in a few words (its type alone if it is no kind)."""
    kind = kind_of(target)
    return kind.summary(target) if kind is not None else str(target.get("type", "?"))


def description(target: dict[str, Any]) -> str:
    """A stored target with its settings, in a line (its JSON if it is no kind)."""
    kind = kind_of(target)
    return kind.description(target) if kind is not None else json.dumps(target)


__all__ = ["KINDS", "TARGETS", "Kind", "check", "description", "kind_of", "summary"]
