"""The request intake's deadline and bound (api/intake.py), and the bounded wait for a
database slot (api/slots.py), with stand-in clients and pools: no socket, no database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from crondepot.api.intake import Intake, read_body
from crondepot.api.problems import PayloadTooLarge, PoolStarved, RequestTimeout
from crondepot.api.slots import DbSlots


def _client(parts: list[bytes], *, every: float = 0.0, then_stall: bool = False) -> Receive:
    """A client sending ``parts`` one per ``every`` seconds (the last ends the body unless
    ``then_stall``, in which case it waits for ever after them)."""
    queue = list(parts)

    async def receive() -> Message:
        await asyncio.sleep(every)
        if not queue:
            await asyncio.Event().wait()        # nothing more comes
        part = queue.pop(0)
        return {"type": "http.request", "body": part,
                "more_body": bool(queue) or then_stall}
    return receive


def _run(coroutine: Awaitable[Any]) -> Any:
    async def main() -> Any:
        return await coroutine
    return asyncio.run(main())


def test_a_whole_body_is_returned_as_the_messages_that_carried_it() -> None:
    messages = _run(read_body(_client([b"ab", b"cd"]), limit=10, timeout=1))
    assert [m["body"] for m in messages] == [b"ab", b"cd"]


def test_a_client_that_goes_away_gives_no_body() -> None:
    async def gone() -> Message:
        return {"type": "http.disconnect"}
    assert _run(read_body(gone, limit=10, timeout=1)) is None


def test_a_body_past_its_bound_is_refused_as_soon_as_it_grows_past_it() -> None:
    with pytest.raises(PayloadTooLarge, match="over 3 bytes"):
        _run(read_body(_client([b"ab", b"cd"], then_stall=True), limit=3, timeout=5))


def test_a_stalled_body_is_cut_at_the_deadline() -> None:
    with pytest.raises(RequestTimeout, match=r"within 0\.1 s \(2 bytes came\)"):
        _run(read_body(_client([b"ab"], then_stall=True), limit=10, timeout=0.1))


def test_a_trickling_body_is_cut_at_the_deadline_though_every_read_is_quick() -> None:
    trickle = _client([b"x"] * 1000, every=0.01, then_stall=True)
    took = asyncio.run(_elapsed(read_body(trickle, limit=10_000, timeout=0.2)))
    assert 0.2 <= took < 1.0


async def _elapsed(coroutine: Awaitable[Any]) -> float:
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(RequestTimeout):
        await coroutine
    return loop.time() - began


def _call(app: Intake, receive: Receive, headers: list[tuple[bytes, bytes]] | None = None
          ) -> list[Message]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)
    scope: Scope = {"type": "http", "path": "/v1/jobs", "headers": headers or [],
                    "method": "POST"}
    _run(app(scope, receive, send))
    return sent


def _never_called(scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
    raise AssertionError("the app was called")


def test_the_intake_answers_408_and_closes_without_calling_the_app() -> None:
    app = Intake(_never_called, limit_for=lambda path: 100, timeout_seconds=0.05)
    start, body = _call(app, _client([b"{"], then_stall=True))
    assert start["status"] == 408
    assert (b"connection", b"close") in start["headers"]
    assert json.loads(body["body"])["type"].endswith("/request-timeout")


def test_the_intake_answers_413_to_a_declared_length_before_reading_anything() -> None:
    async def unread() -> Message:
        raise AssertionError("the body was read")
    app = Intake(_never_called, limit_for=lambda path: 100)
    start, _ = _call(app, unread, [(b"content-length", b"101")])
    assert start["status"] == 413


def test_the_app_reads_the_buffered_body_then_the_client_itself() -> None:
    seen: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.extend([await receive(), await receive(), await receive()])

    after = [{"type": "http.request", "body": b"a", "more_body": True},
             {"type": "http.request", "body": b"b", "more_body": False},
             {"type": "http.disconnect"}]

    async def client() -> Message:
        return after.pop(0)
    _call(Intake(app, limit_for=lambda path: 100), client)
    assert [m.get("body") for m in seen] == [b"a", b"b", None]


def test_bodies_past_the_process_budget_get_503_and_the_budget_comes_back() -> None:
    """The bodies a process holds are bounded however many clients send them (the body is
    read before any credential is looked at): past the budget, 503 with Retry-After."""
    held: list[int] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        held.append(intake.budget.held)             # while the app runs, its body is held

    intake = Intake(app, limit_for=lambda path: 100, budget_bytes=6)
    start, body = _call(intake, _client([b"abcd", b"efgh"]))
    assert start["status"] == 503
    assert (b"retry-after", b"5") in start["headers"]
    assert (b"connection", b"close") in start["headers"]
    assert json.loads(body["body"])["type"].endswith("/bodies-full")
    assert intake.budget.held == 0 and held == []       # given back; the app not called
    _call(intake, _client([b"abc", b"def"]))
    assert held == [6] and intake.budget.held == 0


class _Pool:
    def __init__(self) -> None:
        self.lent = 0

    def getconn(self, timeout: float | None = None) -> Any:
        self.lent += 1
        return object()

    def putconn(self, conn: Any) -> None:
        self.lent -= 1


def test_a_request_finding_no_slot_in_time_gets_503_with_retry_after() -> None:
    async def main() -> tuple[PoolStarved, float]:
        slots = DbSlots(_Pool(), size=1, wait_seconds=1.5)   # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        async with slots.connection():
            began = loop.time()
            with pytest.raises(PoolStarved) as refused:
                async with slots.connection(wait=0.1):
                    pass
            return refused.value, loop.time() - began

    refused, waited = _run(main())
    assert 0.1 <= waited < 1.0
    assert refused.headers == {"Retry-After": "2"}


def test_a_slot_given_back_is_taken_by_the_next_waiter() -> None:
    async def main() -> int:
        pool = _Pool()
        slots = DbSlots(pool, size=1, wait_seconds=5)   # type: ignore[arg-type]
        order: list[int] = []

        async def use(n: int) -> None:
            async with slots.connection():
                order.append(n)
                await asyncio.sleep(0.01)
        await asyncio.gather(*(use(n) for n in range(3)))
        assert order == [0, 1, 2]
        return pool.lent
    assert _run(main()) == 0

