"""The failed-authentication table (api/throttle.py) on a hand-driven clock."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from crondepot.api.throttle import AuthThrottle, ThrottleSettings, client_address


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _fail(throttle: AuthThrottle, address: str, times: int) -> float:
    return [throttle.failed(address) for _ in range(times)][-1]


def test_the_wait_doubles_each_time_up_to_its_cap_and_resets_after_quiet() -> None:
    clock = Clock()
    throttle = AuthThrottle(ThrottleSettings(failures=3, window_seconds=60,
                                             first_wait_seconds=10, max_wait_seconds=50),
                            clock=clock)
    assert _fail(throttle, "a", 2) == 0 and throttle.wait("a") == 0
    assert throttle.failed("a") == 10 and throttle.wait("a") == 10
    waits = []
    for _ in range(4):
        clock.now += throttle.wait("a")
        assert throttle.wait("a") == 0
        waits.append(_fail(throttle, "a", 3))
    assert waits == [20, 40, 50, 50]
    clock.now += 50 + 49                   # quiet, but not yet for a whole longest wait
    assert _fail(throttle, "a", 3) == 50
    clock.now += 50 + 50
    assert _fail(throttle, "a", 3) == 10


def test_failures_older_than_the_window_are_forgotten() -> None:
    clock = Clock()
    throttle = AuthThrottle(ThrottleSettings(failures=3, window_seconds=60), clock=clock)
    _fail(throttle, "a", 2)
    clock.now += 61
    assert _fail(throttle, "a", 2) == 0
    assert throttle.failed("a") == 30


def test_addresses_are_counted_apart_and_the_table_is_bounded() -> None:
    throttle = AuthThrottle(ThrottleSettings(failures=2, max_addresses=3), clock=Clock())
    _fail(throttle, "a", 2)
    assert throttle.wait("a") == 30 and throttle.wait("b") == 0
    for address in ("b", "c", "d"):
        throttle.failed(address)
    assert len(throttle) == 3
    assert throttle.wait("a") == 0          # the oldest failure was forgotten first
    throttle.failed("b")                    # b's second: b is kept (its failure is newest)
    assert throttle.wait("b") == 30


def test_zero_failures_turns_it_off_and_bad_settings_are_refused() -> None:
    throttle = AuthThrottle(ThrottleSettings(failures=0))
    assert _fail(throttle, "a", 100) == 0 and len(throttle) == 0
    with pytest.raises(ValueError):
        AuthThrottle(ThrottleSettings(first_wait_seconds=60, max_wait_seconds=10))
    assert ThrottleSettings.from_env({"CRONDEPOT_API_AUTH_FAILURES": "5",
                                      "CRONDEPOT_API_AUTH_MAX_WAIT_SECONDS": "120"}) \
        == ThrottleSettings(failures=5, max_wait_seconds=120)


@pytest.mark.parametrize(("host", "key"), [
    ("203.0.113.7", "203.0.113.7"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
    ("::ffff:203.0.113.7", "203.0.113.7"),
    ("testclient", "testclient"),
])
def test_an_ipv6_client_counts_as_its_64(host: str, key: str) -> None:
    request = Request({"type": "http", "client": (host, 1234), "headers": []})
    assert client_address(request) == key
