"""Python handlers: functions registered by name that a worker calls for a run.

    @crondepot.handler("sms.send")
    def send(run: crondepot.RunContext) -> None:
        gateway.send(run.payload["phone"], run.payload["text"], ref=run.run_id)

A handler may be sync or async. It raises ``TemporaryError`` to be retried later and
``PermanentError`` to fail without retry; any other exception counts as temporary (a bug
should not silently drop a reminder) and its type is recorded. Pass ``run.run_id`` to the
provider as an idempotency key wherever it accepts one: that closes the gap between a call
that succeeded and the record of it.

A handler is called only for the tenants it is granted to (``crondepot tenants grant
bank42 --handler sms.send``, crondepot.tenancy.grants): a job naming it is refused for any other
tenant, and a run whose grant was revoked fails without a call. ``run.tenant`` names the
tenant whose job it is, for a handler that serves several.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from crondepot.base.errors import CrondepotError

Handler = Callable[["RunContext"], Any | Awaitable[Any]]
F = TypeVar("F", bound=Handler)

_REGISTRY: dict[str, Handler] = {}


class UnknownHandler(CrondepotError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext:
    run_id: str
    job_id: int
    job_key: str | None
    tenant: str                # the name of the tenant whose job this is: who called
    scheduled_at: datetime     # the nominal fire time
    due_at: datetime           # nominal + spread
    attempt: int
    payload: dict[str, Any]


def handler(name: str) -> Callable[[F], F]:
    """Register the decorated function under ``name`` (the job's ``target.handler``)."""
    def register(fn: F) -> F:
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not fn:
            raise ValueError(f"handler {name!r} is already registered by "
                             f"{existing.__module__}.{existing.__qualname__}")
        _REGISTRY[name] = fn
        return fn
    return register


def name_of(fn: Any) -> str | None:
    """The name ``fn`` is registered under, if it is a handler."""
    return next((name for name, known in _REGISTRY.items() if known is fn), None)


def lookup(name: str) -> Handler:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise UnknownHandler(f"no handler named {name!r} in this worker (registered: {known}); "
                             "start the worker with --import MODULE") from None


@handler("crondepot.log")
def _log_run(run: RunContext) -> None:
    """A built-in target that only logs the run: for demos and smoke tests."""
    import logging

    logging.getLogger("crondepot.handlers").info(
        "run", extra={"run_id": run.run_id, "job_id": run.job_id, "attempt": run.attempt})
