"""The hosts of a multi-host URL, and the order a process tries them in (db/hosts.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg.conninfo import conninfo_to_dict

from crondepot.db.hosts import HOSTS, Host, HostOrder, hosts_of, ordered_hosts, url_key


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    HOSTS.forget()
    yield
    HOSTS.forget()


def hosts(url: str) -> list[Host] | None:
    return hosts_of(conninfo_to_dict(url))


def test_a_url_with_several_hosts_gives_each_its_port() -> None:
    assert hosts("postgresql://u@a:5433,b:5434/db") == [Host("a", "", "5433"),
                                                        Host("b", "", "5434")]
    # one port for every host, or none at all
    assert hosts("host=a,b port=6000") == [Host("a", "", "6000"), Host("b", "", "6000")]
    assert hosts("host=a,b") == [Host("a", "", ""), Host("b", "", "")]
    assert hosts("hostaddr=10.0.0.1,10.0.0.2 port=5432") == [
        Host("", "10.0.0.1", "5432"), Host("", "10.0.0.2", "5432")]


def test_a_url_whose_order_is_not_ours_is_left_to_psycopg() -> None:
    assert hosts("postgresql://u@a:5432/db") is None                  # one host
    assert hosts("host=a,b port=1,2,3") is None                       # malformed
    assert hosts("host=a,b target_session_attrs=prefer-standby") is None
    assert hosts("host=a,b load_balance_hosts=random") is None
    assert ordered_hosts("postgresql://u@a:5432/db") is None


def test_the_host_that_gave_a_session_comes_first_and_a_silent_one_last() -> None:
    order = HostOrder()
    a, b, c = Host("a", "", "1"), Host("b", "", "1"), Host("c", "", "1")
    key = url_key({"target_session_attrs": "read-write"}, [a, b, c])
    assert order.order(key, [a, b, c]) == [a, b, c]
    order.accepted(key, c)
    assert order.order(key, [a, b, c]) == [c, a, b]
    order.timed_out(c)                       # the primary stopped answering
    assert order.order(key, [a, b, c]) == [a, b, c]
    order.timed_out(a)
    assert order.order(key, [a, b, c]) == [b, a, c]
    order.accepted(key, a)                   # a answers again, and gives a session
    assert order.order(key, [a, b, c]) == [a, b, c]


def test_a_change_of_host_is_told_once_per_change() -> None:
    order = HostOrder()
    a, b = Host("a", "", "1"), Host("b", "", "1")
    key = url_key({}, [a, b])
    told: list[tuple[object, ...]] = []
    stop = order.on_move(told.append)
    order.accepted(key, a)                   # the first session: nothing moved
    order.accepted(key, a)
    assert told == []
    order.accepted(key, b)
    assert told == [key]
    stop()
    order.accepted(key, a)
    assert told == [key]


def test_a_unix_socket_host_is_never_asked_for_a_handshake() -> None:
    order = HostOrder()
    assert order.answers(Host("/var/run/postgresql", "", "5432"))
    assert not Host("/tmp", "", "").tcp and Host("db", "", "").tcp
