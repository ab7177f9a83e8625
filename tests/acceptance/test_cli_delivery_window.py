"""``crondepot tenants set-delivery-window`` as an operator runs it, on a real database: the
default is kept and audited, cleared with --clear, and bad input is refused (exit 2, the
option named) without a change."""

from __future__ import annotations

import json
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
