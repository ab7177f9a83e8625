"""``crondepot tenants set-delivery-window`` as an operator runs it, on a real database: the
default is kept and audited, cleared with --clear, and bad input is refused (exit 2, the
option named) without a change."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from crondepot.cli import main
from crondepot.db import connect
from crondepot.tenancy.tenants import create_tenant


def cli(capsys: pytest.CaptureFixture[str], db_url: str, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        code = main(["tenants", "set-delivery-window", "--db", db_url, *args])
    except SystemExit as exc:           # argparse refuses bad arguments this way
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def stored(db_url: str) -> Any:
    with connect(db_url) as conn:
        row = conn.execute("SELECT delivery_window FROM tenants WHERE name = 'bank42'"
                           ).fetchone()
        assert row is not None
        return row[0]


def audited(db_url: str) -> int:
    with connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM audit_log WHERE action LIKE 'tenant.%%'"
                           ).fetchone()
        assert row is not None
        return int(row[0])


def test_set_show_and_clear_the_default(db_url: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with connect(db_url) as conn:
        create_tenant(conn, "bank42")
    before = audited(db_url)
    code, out, err = cli(capsys, db_url, "bank42", "--from", "09:00", "--to", "21:00",
                         "--days", "mon-sat", "--json")
    assert code == 0, err
    window = {"from": "09:00", "to": "21:00", "days": "mon-sat", "outside": "defer"}
    assert json.loads(out) == {"tenant": "bank42", "delivery_window": window,
                               "previous": None}
    assert stored(db_url) == window
    assert audited(db_url) == before + 1
    code, out, _ = cli(capsys, db_url, "bank42", "--clear")
    assert code == 0
    assert out.strip() == ("bank42: default delivery window none (was 09:00-21:00 mon-sat, "
                           "outside: defer)")
    assert stored(db_url) is None


@pytest.mark.parametrize(("args", "words"), [
    (["--from", "25:00", "--to", "21:00"], "--from"),
    (["--from", "09:00", "--to", "09:00"], "equals"),
    (["--from", "09:00", "--to", "21:00", "--days", "funday"], "--days"),
    (["--from", "09:00"], "--to"),
    (["--clear", "--from", "09:00"], "--clear alone"),
])
def test_bad_input_exits_2_naming_the_option_and_changes_nothing(
        db_url: str, capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    with connect(db_url) as conn:
        create_tenant(conn, "bank42")
    code, _, err = cli(capsys, db_url, "bank42", *args)
    assert code == 2 and words in err, err
    assert stored(db_url) is None
    code, _, err = cli(capsys, db_url, "bank42", "--from", "09:00", "--to", "21:00",
                       "--outside", "later")
    assert code == 2 and "--outside" in err


def _next(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", "next", *args],
                          capture_output=True, text=True, timeout=60)


def test_next_shows_where_the_window_defers_or_skips_each_fire() -> None:
    # a 21:30 reminder in Kolkata against the SMS window: Saturday's and Sunday's wait
    # until Monday 09:00, Monday's until Tuesday 09:00
    result = _next("30 21 * * *", "--tz", "Asia/Kolkata", "--after", "2026-12-05T00:00:00Z",
                   "-n", "3", "--window", "09:00-21:00", "--window-days", "mon-sat")
    assert result.returncode == 0, result.stderr
    assert [line.split("# ")[1] for line in result.stdout.splitlines()] == [
        "delivery window: deferred to 2026-12-07T09:00:00+05:30",
        "delivery window: deferred to 2026-12-07T09:00:00+05:30",
        "delivery window: deferred to 2026-12-08T09:00:00+05:30"]
    skipped = _next("0 10 * * *", "--tz", "Asia/Kolkata", "--after", "2026-12-05T00:00:00Z",
                    "-n", "2", "--window", "09:00-21:00", "--window-days", "mon-sat",
                    "--outside", "skip", "--json")
    assert json.loads(skipped.stdout) == [
        {"at": "2026-12-05T04:30:00Z", "due_at": "2026-12-05T04:30:00Z", "skip_reason": None},
        {"at": "2026-12-06T04:30:00Z", "due_at": None, "skip_reason": "delivery_window"}]


@pytest.mark.parametrize(("args", "needle"), [
    (["--window", "09:00-09:00"], "equals"), (["--window", "9-21"], "HH:MM"),
    (["--window", "09:00-21:00", "--window-days", "funday"], "--window-days"),
    (["--window-days", "mon"], "needs --window")])
def test_next_refuses_a_bad_window(args: list[str], needle: str) -> None:
    result = _next("0 9 * * *", *args)
    assert result.returncode == 2 and needle in result.stderr, result.stderr
