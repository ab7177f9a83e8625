"""What the client's tests share: the API served over real HTTP in a thread of the test
process, and an AsyncClient driven from plain (sync) tests so that every client test runs
against both clients."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI

from crondepot.client import AsyncClient, Client, RetryPolicy
from crondepot_testkit.processes import free_port, wait_until


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` served by uvicorn on a free port (its lifespan run, so its pool is open),
    in a thread; its base URL while the block runs."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name=f"api-{port}", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), timeout=30,
                   message="the API to start")
        assert server.started, "the API did not start (see the log above)"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


class Blocking:
    """An AsyncClient (or one of its groups) whose coroutines are run to completion on
    ``loop`` and whose async iterators are read one item per step: the same calls as a
    Client, so one test body checks both."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._target = target
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if hasattr(value, "_c"):                # a group: jobs, runs, ...
            return Blocking(value, self._loop)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            got = value(*args, **kwargs)
            if inspect.iscoroutine(got):
                return self._loop.run_until_complete(got)
            if isinstance(got, AsyncIterator):
                return self._drain(got)
            return got
        return call

    def _drain(self, items: AsyncIterator[Any]) -> Iterator[Any]:
        while True:
            try:
                yield self._loop.run_until_complete(anext(items))
            except StopAsyncIteration:
                return


class Clients:
    """Makes clients of one kind (``sync`` or ``async``) for a base URL and closes them."""

    def __init__(self, kind: str, base_url: str) -> None:
        self.kind = kind
        self.base_url = base_url
        self.loop = asyncio.new_event_loop() if kind == "async" else None
        self.made: list[Any] = []

    def __call__(self, token: str, *, retries: int = 0, base_url: str | None = None,
                 retry: RetryPolicy | None = None) -> Any:
        """A client for ``token``: a Client, or a Blocking AsyncClient. No retries unless
        asked: a test sees each answer as it is."""
        url = base_url or self.base_url
        if self.loop is None:
            client = Client(url, token, retries=retries, retry=retry, timeout=30)
            self.made.append(client)
            return client
        made = AsyncClient(url, token, retries=retries, retry=retry, timeout=30)
        self.made.append(made)
        return Blocking(made, self.loop)

    def close(self) -> None:
        for client in self.made:
            if isinstance(client, AsyncClient):
                assert self.loop is not None
                self.loop.run_until_complete(client.aclose())
            else:
                client.close()
        if self.loop is not None:
            self.loop.close()
