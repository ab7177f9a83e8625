"""``crondepot notices add|channels|remove|list``: an operator manages a tenant's
notification channels and reads its notices; bad input exits 2 naming what is wrong and
writes nothing; another tenant's channel is not found and stays."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from crondepot import cli as cli_module
from crondepot.db import connect
from tests.support.jobs import add_job, tenant
from tests.support.notices import dead_runs, sender
from tests.support.target_server import Route, TargetServer


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli_module.main(["notices", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def run(db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("CRONDEPOT_DATABASE_URL", db_url)
    monkeypatch.setenv("CRONDEPOT_TARGET_ALLOWLIST", "127.0.0.1/32")
    monkeypatch.delenv("CRONDEPOT_TENANT", raising=False)
    return lambda *args: _run(capsys, *args)


def _channels(db_url: str) -> int:
    with connect(db_url) as conn:
        row = conn.execute("SELECT count(*) FROM notice_channels").fetchone()
    assert row is not None
    return int(row[0])


def test_add_list_read_notices_and_remove(run: Any, conn: psycopg.Connection[Any],
                                          db_url: str) -> None:
    t = tenant(conn, "bank42")
    receiver = TargetServer()
    receiver.routes["/down"] = Route(status=503, body=b"maintenance")
    try:
        code, out, err = run("add", "--tenant", "bank42", "--webhook", receiver.url(), "--json")
        assert code == 0, err
        hook = json.loads(out)
        assert hook["type"] == "webhook" and hook["added"] is True
        code, out, _ = run("add", "--tenant", "bank42", "--webhook", receiver.url())
        assert code == 0 and out.startswith("already there: ")
        assert run("add", "--tenant", "bank42", "--webhook", receiver.url("/down"))[0] == 0
        code, out, _ = run("add", "--tenant", "bank42", "--email", "ops@bank42.example")
        assert code == 0 and "email" in out
        code, out, _ = run("channels", "--tenant", "bank42", "--json")
        assert [c["type"] for c in json.loads(out)] == ["webhook", "webhook", "email"]

        dead_runs(conn, add_job(conn, t, key="emi", cron="0 9 * * *"), 1)
        sender().turn(conn)
        code, out, _ = run("list", "--tenant", "bank42")
        assert code == 0
        assert "sent" in out and "pending, next" in out and "last error: HTTP 503" in out
        assert "CRONDEPOT_SMTP_URL" in out and out.rstrip().endswith(
            "0 events waiting for their notice")
        code, out, _ = run("list", "--tenant", "bank42", "--status", "sent", "--json")
        (sent,) = json.loads(out)["items"]
        assert sent["status"] == "sent" and sent["events"][0]["kind"] == "run_dead"

        code, out, _ = run("remove", "--tenant", "bank42", str(hook["id"]))
        assert code == 0 and out.strip() == f"removed channel {hook['id']}"
        assert _channels(db_url) == 2
    finally:
        receiver.close()


@pytest.mark.parametrize(("args", "words"), [
    (("--webhook", "http://169.254.169.254/latest"), "may not call"),
    (("--webhook", "gopher://x.example/"), "http or https"),
    (("--email", "ops@"), "e-mail address"),
])
def test_bad_input_exits_2_and_writes_nothing(run: Any, conn: psycopg.Connection[Any],
                                              db_url: str, args: tuple[str, ...],
                                              words: str) -> None:
    tenant(conn, "bank42")
    code, _, err = run("add", "--tenant", "bank42", *args)
    assert code == 2 and words in err
    assert _channels(db_url) == 0


def test_another_tenants_channel_is_not_found_and_stays(run: Any, conn: psycopg.Connection[Any],
                                                        db_url: str) -> None:
    tenant(conn, "bank42")
    tenant(conn, "otherbank")
    code, out, _ = run("add", "--tenant", "bank42", "--email", "ops@bank42.example", "--json")
    mine = json.loads(out)["id"]
    code, _, err = run("remove", "--tenant", "otherbank", str(mine))
    assert code == 2 and f"no notification channel {mine}" in err
    assert run("channels", "--tenant", "otherbank", "--json")[1].strip() == "[]"
    assert _channels(db_url) == 1
    assert run("add", "--tenant", "nobank", "--email", "ops@bank42.example")[0] == 2
