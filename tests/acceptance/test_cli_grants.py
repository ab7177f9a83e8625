"""``crondepot tenants grant|revoke|show|set-quota`` as an operator runs them, and what the
tenant's ``jobs add`` and ``import`` then meet."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

import crondepot.cli as cli_module


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def cli(db_url: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("CRONDEPOT_TENANT", raising=False)

    def run(*args: str) -> Result:
        capsys.readouterr()
        code = cli_module.main([*args, "--db", db_url])
        out, err = capsys.readouterr()
        return Result(code, out, err)
    return run


def _job(key: str, **extra: Any) -> str:
    return json.dumps({"key": key, "cron": "0 9 * * *", "tz": "UTC",
                       "target": {"type": "python", "handler": "sms.send"}, **extra})


def test_an_operator_grants_a_handler_and_a_bucket_and_the_tenant_may_use_them(
        cli: Any) -> None:
    assert cli("tenants", "create", "bank42").code == 0
    assert cli("limits", "set", "sms-gateway", "450/s", "--burst", "50").code == 0
    refused = cli("jobs", "add", "--tenant", "bank42", _job("a", rate_limit="sms-gateway"))
    assert refused.code == 2 and "target.handler: handler 'sms.send' is not granted" \
        in refused.err
    granted = cli("tenants", "grant", "bank42", "--handler", "sms.send", "--limit",
                  "sms-gateway", "--json")
    assert granted.code == 0, granted.err
    assert granted.json() == {"tenant": "bank42", "handlers": ["sms.send"],
                              "limits": ["sms-gateway"], "connections": []}
    added = cli("jobs", "add", "--tenant", "bank42", _job("a", rate_limit="sms-gateway"))
    assert added.code == 0, added.err
    shown = cli("tenants", "show", "bank42", "--json").json()
    assert shown["grants"] == {"handlers": ["sms.send"], "limits": ["sms-gateway"],
                               "connections": []}
    assert shown["quota"] == {"max_jobs": None, "max_urgent_jobs": None,
                              "urgent_allowed": True, "active_jobs": 1, "urgent_jobs": 0}
    plain = cli("tenants", "show", "bank42")
    assert "sms-gateway" in plain.out and "jobs 1 (max no cap)" in plain.out
    revoked = cli("tenants", "revoke", "bank42", "--limit", "sms-gateway")
    assert revoked.code == 0 and "revoked from bank42: limit sms-gateway" in revoked.out
    assert cli("tenants", "show", "bank42", "--json").json()["grants"]["limits"] == []


@pytest.mark.parametrize(("args", "needle"), [
    (["grant", "bank42"], "at least one"),
    (["grant", "bank42", "--limit", "no-such-limit"], "no rate limit named 'no-such-limit'"),
    (["grant", "bank42", "--handler", "has space"], "handler: expected"),
    (["grant", "nobank", "--handler", "sms.send"], "unknown tenant 'nobank'"),
    (["revoke", "bank42", "--handler", "never.granted"], "is not granted"),
    (["set-quota", "bank42"], "give at least one"),
])
def test_bad_grant_commands_exit_2_and_change_nothing(
        cli: Any, conn: psycopg.Connection[Any], args: list[str], needle: str) -> None:
    assert cli("tenants", "create", "bank42").code == 0
    result = cli("tenants", *args)
    assert result.code == 2 and needle in result.err, result.err
    assert conn.execute("SELECT (SELECT count(*) FROM handler_grants), "
                        "(SELECT count(*) FROM limit_grants), (SELECT max_jobs FROM tenants)"
                        ).fetchone() == (0, 0, None)


@pytest.mark.parametrize("value", ["-1", "lots", "2147483648"])
def test_a_bad_quota_value_is_refused_by_the_parser(cli: Any, value: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("tenants", "create", "bank42").code == 0
    with pytest.raises(SystemExit) as exited:
        cli("tenants", "set-quota", "bank42", "--max-jobs", value)
    assert exited.value.code == 2
    assert "expected --max-jobs to be an integer" in capsys.readouterr().err


def test_quotas_set_from_the_command_line_bound_jobs_add_and_import(
        cli: Any, tmp_path: Path) -> None:
    assert cli("tenants", "create", "bank42").code == 0
    assert cli("tenants", "grant", "bank42", "--handler", "sms.send").code == 0
    set_quota = cli("tenants", "set-quota", "bank42", "--max-jobs", "3", "--no-urgent",
                    "--json")
    assert set_quota.code == 0, set_quota.err
    assert set_quota.json() == {"tenant": "bank42", "max_jobs": 3, "max_urgent_jobs": None,
                                "urgent_allowed": False, "active_jobs": 0, "urgent_jobs": 0}
    urgent = cli("jobs", "add", "--tenant", "bank42", _job("u", priority="urgent"))
    assert urgent.code == 2 and "priority: tenant bank42 may not use the urgent" in urgent.err
    lines = tmp_path / "jobs.ndjson"
    lines.write_text("\n".join([_job("a"), _job("u", priority="urgent"), _job("b"), _job("c"),
                                _job("d")]) + "\n")
    imported = cli("import", str(lines), "--tenant", "bank42", "--json")
    assert imported.code == 1
    report = imported.json()
    assert (report["created"], report["invalid"]) == (3, 2)
    assert [(e["line"], e["field"]) for e in report["errors"]] == [(2, "priority"),
                                                                   (5, "job")]
    over = cli("jobs", "add", "--tenant", "bank42", _job("e"))
    assert over.code == 2 and "max_jobs: tenant bank42 may have at most 3 jobs" in over.err
    # 'none' removes a cap; the option not given stays as it was
    assert cli("tenants", "set-quota", "bank42", "--max-jobs", "none").code == 0
    quota = cli("tenants", "show", "bank42", "--json").json()["quota"]
    assert (quota["max_jobs"], quota["urgent_allowed"]) == (None, False)
    assert cli("jobs", "add", "--tenant", "bank42", _job("e")).code == 0
