"""When the client sends a call again: a real API's 429 with Retry-After (every call, a
trigger included: the refusal came before any route ran), a port nobody listens on, and the
decision table for answers a test cannot make the server give on demand (a 503 from a lost
database, an answer lost after the request was sent)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from crondepot.api import ApiSettings
from crondepot.client import AsyncClient, Client, RateLimited, RetryPolicy, TransportError
from crondepot.client import operations as ops
from crondepot.client._http import transport_error
from crondepot_testkit.processes import free_port
from tests.support.api import EMI
from tests.support.client import Clients


@pytest.fixture
def settings() -> ApiSettings:
    # a budget a test spends in a few requests: one request every 2 s, bursts of 3
    return ApiSettings(pool_max_size=4, rate_per_second=0.5, burst=3)


def _spend(clients: Clients, token: str) -> RateLimited:
    """Spend the token's budget with a client that never retries: the 429 it ends in."""
    spender = clients(token)
    for _ in range(50):
        try:
            spender.stats()
        except RateLimited as refused:
            return refused
    raise AssertionError("the budget was never spent")


def test_a_429_says_when_and_a_retrying_client_waits_for_it(clients: Clients,
                                                            token: str) -> None:
    patient = clients(token, retries=3)
    job = patient.jobs.create({**EMI, "key": "emi:1"})
    refused = _spend(clients, token)
    assert refused.status == 429 and refused.retry_after is not None
    assert 1 <= refused.retry_after <= 2
    # a trigger is not idempotent, but a 429 came before any route ran: sent again once
    fired = patient.jobs.trigger(job["id"])
    assert fired["created"]
    assert [r["run_id"] for r in patient.runs.list_for_job(job["id"])["items"]] == \
        [fired["run_id"]]


def test_a_retry_after_beyond_max_wait_is_raised_at_once(clients: Clients, token: str) -> None:
    hasty = clients(token, retry=RetryPolicy(retries=5, max_wait=0.5))
    _spend(clients, token)
    with pytest.raises(RateLimited) as caught:
        hasty.stats()
    assert caught.value.retry_after is not None and caught.value.retry_after >= 1


class CountingTransport(httpx.HTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


class AsyncCountingTransport(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return await super().handle_async_request(request)


def test_a_connection_never_made_is_tried_again_then_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}"          # nobody listens there
    policy = RetryPolicy(retries=2, base=0.01)
    counting = CountingTransport()
    with Client(url, "t", retry=policy, transport=counting) as api, \
            pytest.raises(TransportError) as caught:
        api.jobs.trigger(1)          # not idempotent, but it never reached a server
    assert (counting.sent, caught.value.sent) == (3, False)

    async def main() -> tuple[int, bool]:
        counting = AsyncCountingTransport()
        async with AsyncClient(url, "t", retry=policy, transport=counting) as api:
            try:
                await api.jobs.trigger(1)
            except TransportError as exc:
                return counting.sent, exc.sent
        raise AssertionError("no TransportError")
    assert asyncio.run(main()) == (3, False)


def _answer(status: int, slug: str | None = None, retry_after: str | None = None
            ) -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after else {}
    if slug is None:
        return httpx.Response(status, headers=headers, text="Bad gateway")
    return httpx.Response(status, headers=headers, json={
        "type": f"https://crondepot.dev/problems/{slug}", "title": "t", "status": status,
        "detail": "d"})


POLICY = RetryPolicy(retries=3, base=0.01, cap=0.01, max_wait=30)
TRIGGER = ops.jobs_trigger(1)                    # a POST not idempotent
GET = ops.jobs_get(1)
KEYED = ops.jobs_create({**EMI, "key": "emi:1"})
KEYLESS = ops.jobs_create({k: v for k, v in EMI.items() if k != "key"})
LOST = transport_error(httpx.ReadTimeout("read timed out"))
NEVER = transport_error(httpx.ConnectError("refused"))


@pytest.mark.parametrize(("call", "outcome", "again"), [
    (TRIGGER, _answer(429, "rate-limited", "2"), 2.0),
    (TRIGGER, _answer(503, "pool-starved", "1"), 1.0),
    (TRIGGER, _answer(503, "bodies-full", "1"), 1.0),
    (TRIGGER, _answer(503, "database-unavailable"), None),   # it may have been made
    (GET, _answer(503, "database-unavailable"), "backoff"),
    (KEYED, _answer(503, "schema-not-current"), "backoff"),
    (KEYLESS, _answer(500, "internal"), None),
    (GET, _answer(502), "backoff"),                          # a proxy's page
    (TRIGGER, _answer(502), None),
    (GET, _answer(404, "not-found"), None),
    (GET, _answer(422, "validation"), None),
    (GET, _answer(429, "rate-limited", "120"), None),        # beyond max_wait: raised
    (TRIGGER, NEVER, "backoff"),
    (TRIGGER, LOST, None),
    (GET, LOST, "backoff"),
    (ops.jobs_import([{"key": "a"}, {"key": "b"}]), LOST, "backoff"),
    (ops.jobs_import([{"key": "a"}, {"cron": "0 9 * * *"}]), LOST, None),
    (ops.dead_letter_replay(job_id=1, dry_run=True), LOST, "backoff"),
    (ops.dead_letter_replay(job_id=1), LOST, None),
    (ops.runs_retry("1:1"), LOST, None),
    (ops.tokens_create(), LOST, None),
    (ops.jobs_put_by_key("emi:1", EMI), LOST, "backoff"),           # the same job twice
    (ops.jobs_put_by_key("emi:1", EMI, version=3), LOST, None),     # made: a 412 next
    (ops.jobs_apply([EMI], scope={"deploy": "reminders"}, prune=True), LOST, "backoff"),
    (ops.calendars_put("in-bank-holidays", ["2026-12-25"]), LOST, "backoff"),
    (ops.calendars_put("in-bank-holidays", ics="BEGIN:VCALENDAR"), LOST, "backoff"),
    (ops.calendars_delete("in-bank-holidays"), LOST, "backoff"),
])
def test_what_is_sent_again(call: Any, outcome: Any, again: Any) -> None:
    wait = POLICY.delay(call, outcome, 0)
    if again == "backoff":
        assert wait is not None and 0 <= wait <= POLICY.cap
    else:
        assert wait == again
    assert POLICY.delay(call, outcome, POLICY.retries) is None     # the retries are spent


def test_the_backoff_grows_to_its_cap() -> None:
    policy = RetryPolicy(base=0.5, cap=4)
    assert all(0 <= policy.backoff(n) <= min(4, 0.5 * 2 ** n) for n in range(10)
               for _ in range(20))
