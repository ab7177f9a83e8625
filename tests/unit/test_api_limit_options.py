"""``crondepot api``'s bounds on slow clients and overload: read from the options or their
CRONDEPOT_API_* variables, checked, and handed to uvicorn and to the app as they say."""

from __future__ import annotations

import argparse

import pytest

from crondepot.api.app import ApiSettings
from crondepot.api.protocol import HeadDeadlineProtocol
from crondepot.cli import api


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    api.register(parser.add_subparsers())
    return parser.parse_args(["api", *argv])


def test_the_defaults_are_the_documented_ones() -> None:
    args = _parse()
    assert (args.header_timeout, args.body_timeout, args.keep_alive_timeout,
            args.max_connections, args.pool_wait) == (10.0, 30.0, 5.0, 512, 2.0)


def test_each_bound_is_also_read_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in (("HEADER_TIMEOUT", "3s"), ("BODY_TIMEOUT", "500ms"),
                        ("KEEP_ALIVE_TIMEOUT", "2"), ("MAX_CONNECTIONS", "40"),
                        ("POOL_WAIT", "750ms")):
        monkeypatch.setenv(f"CRONDEPOT_API_{name}", value)
    args = _parse()
    assert (args.header_timeout, args.body_timeout, args.keep_alive_timeout,
            args.max_connections, args.pool_wait) == (3.0, 0.5, 2.0, 40, 0.75)


def test_the_option_wins_over_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRONDEPOT_API_POOL_WAIT", "5s")
    assert _parse("--pool-wait", "1s").pool_wait == 1.0


@pytest.mark.parametrize("argv", [["--header-timeout", "0"], ["--body-timeout", "soon"],
                                  ["--max-connections", "0"], ["--pool-wait", "2h"]])
def test_a_bound_out_of_range_is_a_usage_error(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parse(*argv)
    assert exit_.value.code == 2
    assert "expected" in capsys.readouterr().err


def test_uvicorn_gets_the_head_deadline_protocol_and_lets_n_connections_in() -> None:
    limits = api.connection_limits(_parse("--header-timeout", "4s", "--max-connections", "9",
                                           "--keep-alive-timeout", "3s"))
    assert limits["http"].func is HeadDeadlineProtocol
    assert limits["http"].keywords == {"header_timeout": 4.0}
    assert limits["timeout_keep_alive"] == 3.0
    # uvicorn answers 503 once the connections, the asking one included, reach the limit
    assert limits["limit_concurrency"] == 10


def test_the_app_reads_what_the_command_writes() -> None:
    settings = ApiSettings.from_env({"CRONDEPOT_API_BODY_TIMEOUT": repr(0.5),
                                     "CRONDEPOT_API_POOL_WAIT": repr(1.25)})
    assert (settings.body_timeout_seconds, settings.pool_wait_seconds) == (0.5, 1.25)
