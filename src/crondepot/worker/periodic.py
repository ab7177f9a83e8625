"""Schedules declared in code: ``@crondepot.periodic`` on a handler.

    @crondepot.periodic("0 9 * * *", tz="Asia/Kolkata", key="sms.daily-digest",
                        payload={"template": "digest"}, spread={"seconds": 900})
    @crondepot.handler("sms.digest")
    def digest(run: crondepot.RunContext) -> None: ...

Each declaration is a job document (``cron``, ``tz``, the handler as target, the key and
any other field of the document as keyword arguments), checked when the module is imported.
``crondepot apply --from-module app`` and ``crondepot worker --import app
--sync-schedules`` apply the declarations of ``app`` (and its submodules) through the same
apply as a schedules file (crondepot.job.apply), in the scope ``crondepot.module=app``,
pruning what the module no longer declares: workers started together take turns on the
scope's lock and converge on one job per declaration.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from crondepot.worker.handlers import handler as register_handler
from crondepot.worker.handlers import name_of

if TYPE_CHECKING:
    from crondepot.job.apply import Scope

F = TypeVar("F", bound=Callable[..., Any])
SCOPE_LABEL = "crondepot.module"


@dataclass(frozen=True, slots=True)
class Declaration:
    module: str             # the declaring function's module
    where: str              # module.qualname, for errors
    document: dict[str, Any]


_DECLARED: list[Declaration] = []


def periodic(cron: str, *, tz: str = "UTC", key: str | None = None,
             handler: str | None = None, **job_fields: Any) -> Callable[[F], F]:
    """Declare a schedule for the decorated handler: above ``@crondepot.handler(name)``, or
    with ``handler="name"`` (which registers the function under it). ``key`` defaults to
    the handler's name; give one per declaration when a handler has several."""
    def declare(fn: F) -> F:
        name = handler or name_of(fn)
        if name is None:
            raise ValueError(f"@crondepot.periodic on {fn.__qualname__}: put it above "
                             "@crondepot.handler(name), or give handler=\"name\"")
        for reserved in ("target", "cron", "tz", "key"):
            if reserved in job_fields:
                raise ValueError(f"@crondepot.periodic: {reserved} is set by the decorator")
        doc = {"key": key or name, "cron": cron, "tz": tz,
               "target": {"type": "python", "handler": name}, **job_fields}
        where = f"{fn.__module__}.{fn.__qualname__}"
        from crondepot.job.spec import JobSpec  # here: ``import crondepot`` stays light

        JobSpec.from_document(doc)       # a bad declaration fails the import, saying why
        for known in _DECLARED:
            if known.document["key"] == doc["key"] and known.where != where:
                raise ValueError(f"@crondepot.periodic key {doc['key']!r} of {where} is "
                                 f"declared by {known.where} too; give each its own key=")
        if handler is not None and name_of(fn) != handler:
            register_handler(handler)(fn)        # only once the declaration is sound
        _DECLARED[:] = [d for d in _DECLARED       # a module imported again re-declares
                        if not (d.where == where and d.document["key"] == doc["key"])]
        _DECLARED.append(Declaration(module=fn.__module__, where=where, document=doc))
        return fn
    return declare


def declared(module: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The declarations of ``module`` and its submodules, as (where, path, document) for
    ``apply.read_documents``."""
    return [(d.where, "", d.document) for d in _DECLARED
            if d.module == module or d.module.startswith(module + ".")]


def module_scope(module: str) -> Scope:
    """The scope a module's declarations are applied in: the label crondepot.module."""
    from crondepot.job.apply import Scope

    return Scope.checked(SCOPE_LABEL, module)
