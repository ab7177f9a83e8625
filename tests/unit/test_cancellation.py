"""targets.base.Cancellation (overlap replace): a request from the heartbeat's thread runs
what the call registered, once; a registration after the request runs at once; one the
call has forgotten never runs; and an async handler is cancelled through it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from crondepot.worker.targets.base import CallReplaced, Cancellation, calling, current
from crondepot.worker.targets.python import _cancellable


def test_a_request_runs_the_registered_callbacks_once() -> None:
    cancel, seen = Cancellation(), []
    cancel.on_request(lambda: seen.append("a"))
    forget = cancel.on_request(lambda: seen.append("forgotten"))
    forget()
    cancel.request()
    cancel.request()
    assert seen == ["a"] and cancel.requested
    cancel.on_request(lambda: seen.append("late"))      # after the request: at once
    assert seen == ["a", "late"]


def test_the_current_cancellation_is_the_calling_threads() -> None:
    cancel = Cancellation()
    other: list[Any] = []
    with calling(cancel):
        assert current() is cancel
        thread = threading.Thread(target=lambda: other.append(current()))
        thread.start()
        thread.join()
    assert current() is None and other == [None]


def test_an_async_handler_is_cancelled_from_another_thread() -> None:
    cancel = Cancellation()
    saw: list[str] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            saw.append("cancelled")
            raise

    threading.Timer(0.1, cancel.request).start()
    with pytest.raises(CallReplaced, match="async handler h cancelled"):
        asyncio.run(_cancellable(handler(), cancel, None, {"handler": "h"}))
    assert saw == ["cancelled"]


def test_a_timeout_is_still_a_timeout() -> None:
    async def handler() -> None:
        await asyncio.sleep(60)

    with pytest.raises(TimeoutError):
        asyncio.run(_cancellable(handler(), Cancellation(), 0.05, {"handler": "h"}))
