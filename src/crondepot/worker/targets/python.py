"""The ``python`` target: a handler registered in the worker process by name
(``crondepot.handler``), called with the run's context; sync or async.

A target's ``timeout_s`` bounds the call:

- an async handler is cancelled at the timeout (``asyncio.wait_for``);
- a sync handler cannot be stopped from outside in Python, so it runs in a thread of its
  own, and at the timeout the slot stops waiting for it: the thread is *abandoned*, left
  to finish or hang on its own, and counted (``AbandonedCalls``: too many still running
  and the worker restarts itself).

A timed-out call may have acted (an SMS may be on its way when the handler is cancelled),
so it is ``OutcomeUnknown`` (the dead letter) unless the target says ``dedupes``: the
handler checks the run id before it acts, and the attempt is then retried like any
temporary failure. Without ``timeout_s`` the handler runs in the slot's own thread, as it
always has: no thread is started and the lease's cap is the only bound.

A job whose overlap is ``replace`` may have its running call given up when a newer run
comes (the worker's heartbeat learns it; targets.base.Cancellation): an async handler's
task is cancelled (it sees ``CancelledError`` at its next ``await``) and the call ends
``CallReplaced``; a sync handler cannot be cancelled, so it runs to its end, as under
``buffer_one``, and the attempt records why (``Cancellation.note``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crondepot.base.errors import TemporaryError
from crondepot.runtime import metrics
from crondepot.worker.handlers import RunContext, lookup
from crondepot.worker.targets.base import (
    AbandonedCalls,
    CallReplaced,
    Cancellation,
    OutcomeUnknown,
    current,
)

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun
    from crondepot.worker.targets.base import TargetSetup


class HandlerTimeout(OutcomeUnknown):
    """A handler did not return within its target's ``timeout_s`` (it may have acted)."""


class HandlerTimeoutRetried(TemporaryError):
    """A handler that dedupes on the run id did not return within its ``timeout_s``."""


class PythonTarget:
    kind = "python"

    def __init__(self, abandoned: AbandonedCalls | None = None) -> None:
        self.abandoned = abandoned or AbandonedCalls()

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        handler = lookup(run.target["handler"])
        context = RunContext(run_id=run.run_id, job_id=run.job_id, job_key=run.job_key,
                             tenant=tenant, scheduled_at=run.nominal_at, due_at=run.due_at,
                             attempt=run.attempt, payload=run.payload)
        timeout = run.target.get("timeout_s")
        cancel = current()
        if cancel is not None and not inspect.iscoroutinefunction(handler):
            cancel.note = (f"a sync handler ({run.target['handler']}) cannot be cancelled: "
                           "it ran to its end, as under buffer_one")
        if timeout is None:
            outcome = handler(context)
            if inspect.isawaitable(outcome):
                if cancel is not None:
                    cancel.note = None          # a coroutine after all: it can be cancelled
                outcome = asyncio.run(_cancellable(outcome, cancel, None, run.target))
        else:
            outcome = self._bounded(handler, context, float(timeout), run.target, cancel)
        return outcome if isinstance(outcome, dict) else None

    def _bounded(self, handler: Callable[[RunContext], Any], context: RunContext,
                 timeout: float, target: dict[str, Any],
                 cancel: Cancellation | None = None) -> Any:
        if inspect.iscoroutinefunction(handler):
            try:
                return asyncio.run(_cancellable(handler(context), cancel, timeout, target))
            except TimeoutError:
                raise _timed_out(target, timeout, "cancelled") from None
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                outcome = handler(context)
                if inspect.isawaitable(outcome):   # a sync function that returned a coroutine
                    outcome = asyncio.run(_await(outcome))
                box["outcome"] = outcome
            except BaseException as exc:  # handed to the slot, which classifies it
                box["error"] = exc

        # In the slot's context: a handler's own spans nest under its call's (runtime/tracing.py)
        thread = threading.Thread(target=contextvars.copy_context().run, args=(run,),
                                  name=f"handler-{context.run_id}", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            self.abandoned.add(thread)
            metrics.handler_threads_abandoned.inc()
            raise _timed_out(target, timeout, "abandoned, still running")
        if "error" in box:
            raise box["error"]
        return box.get("outcome")


def _timed_out(target: dict[str, Any], timeout: float, what: str) -> Exception:
    metrics.handler_timeouts.inc()
    message = f"handler {target['handler']} did not finish within {timeout:g} s ({what})"
    if target.get("dedupes"):
        return HandlerTimeoutRetried(message)
    return HandlerTimeout(f"{message}; it may have acted and does not dedupe on the run id")


def make(setup: TargetSetup) -> PythonTarget:
    return PythonTarget(setup.abandoned)


async def _await(awaitable: Any) -> Any:
    return await awaitable


async def _cancellable(awaitable: Any, cancel: Cancellation | None, timeout: float | None,
                       target: dict[str, Any]) -> Any:
    """Await the handler as a task that ``cancel`` (overlap ``replace``; requested from the
    heartbeat's thread) cancels in this loop; within ``timeout`` if one is given."""
    if cancel is None:
        call = _await(awaitable)
        return await (call if timeout is None else asyncio.wait_for(call, timeout))
    task = asyncio.ensure_future(_await(awaitable))
    loop = asyncio.get_running_loop()

    def cancel_task() -> None:
        # (the loop closed meanwhile: the call is over anyway)
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(task.cancel)

    forget = cancel.on_request(cancel_task)
    try:
        return await (task if timeout is None else asyncio.wait_for(task, timeout))
    except asyncio.CancelledError:
        if cancel.requested:
            raise CallReplaced(f"async handler {target['handler']} cancelled: a newer run "
                               "of the job replaced it (overlap replace)") from None
        raise
    finally:
        forget()
