"""The ``python`` target: a handler registered in the worker process by name
(``crondepot.handler``), called with the run's context; sync or async."""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from crondepot.worker.handlers import RunContext, lookup

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun
    from crondepot.worker.targets.base import TargetSetup


class PythonTarget:
    kind = "python"

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        handler = lookup(run.target["handler"])
        outcome = handler(RunContext(run_id=run.run_id, job_id=run.job_id, job_key=run.job_key,
                                     tenant=tenant, scheduled_at=run.nominal_at,
                                     due_at=run.due_at, attempt=run.attempt,
                                     payload=run.payload))
        if inspect.isawaitable(outcome):
            outcome = asyncio.run(_await(outcome))
        return outcome if isinstance(outcome, dict) else None


def make(setup: TargetSetup) -> PythonTarget:
    return PythonTarget()


async def _await(awaitable: Any) -> Any:
    return await awaitable
