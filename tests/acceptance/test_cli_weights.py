"""``crondepot tenants set-weight TENANT N`` as an operator runs it, on a real database: the
weight is kept, shown by ``tenants list``, audited, and used by the next claim; bad input is
refused with a clear error and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import Any

import psycopg
import pytest

from crondepot.cli import main
from crondepot.db import connect
from crondepot.queue import claim_runs
from crondepot.queue.fairness import InvalidWeight, set_claim_weight
from crondepot.tenancy.tenants import create_tenant
from tests.support.runs import due_runs


def cli(capsys: pytest.CaptureFixture[str], db_url: str, *args: str) -> tuple[int, str, str]:
    argv = ["tenants", args[0], "--db", db_url, *args[1:]]
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:           # argparse refuses bad arguments this way
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def weights(db_url: str) -> dict[str, int]:
    with connect(db_url) as conn:
        return dict(conn.execute("SELECT name, claim_weight FROM tenants").fetchall())


@pytest.fixture
def tenants_made(db_url: str) -> str:
    with connect(db_url) as conn:
        create_tenant(conn, "bank42")
        create_tenant(conn, "shop7")
    return db_url


def test_set_weight_is_kept_listed_audited_and_claimed_by(
        tenants_made: str, capsys: pytest.CaptureFixture[str]) -> None:
    db_url = tenants_made
    assert weights(db_url) == {"bank42": 1, "shop7": 1}           # the default
    code, out, err = cli(capsys, db_url, "set-weight", "bank42", "3", "--json")
    assert code == 0, err
    assert json.loads(out) == {"tenant": "bank42", "claim_weight": 3, "previous": 1}
    code, out, _ = cli(capsys, db_url, "set-weight", "bank42", "3")
    assert code == 0 and out.strip() == "bank42: claim weight 3 (was 3)"
    assert weights(db_url) == {"bank42": 3, "shop7": 1}

    code, out, _ = cli(capsys, db_url, "list", "--json")
    assert code == 0
    assert {t["tenant"]: t["claim_weight"] for t in json.loads(out)} == {"bank42": 3, "shop7": 1}
    code, out, _ = cli(capsys, db_url, "list")
    assert code == 0 and "claim weight" in out

    with connect(db_url) as conn:
        audit = conn.execute("SELECT t.name, a.action, a.before, a.after, a.actor "
                             "FROM audit_log a JOIN tenants t ON t.id = a.tenant_id "
                             "WHERE a.action = 'tenant.claim_weight'").fetchall()
    # One entry: the second command changed nothing.
    assert [row[:4] for row in audit] == [("bank42", "tenant.claim_weight",
                                            {"claim_weight": 1}, {"claim_weight": 3})]
    assert audit[0][4]                                             # the operator, by name

    # The workers' next claim shares by the new weights: 15 and 5 of 20.
    with connect(db_url) as conn:
        bank = due_runs(conn, "bank42", 100)
        shop = due_runs(conn, "shop7", 100, age_seconds=3600)     # older: no head start
        claimed = claim_runs(conn, owner="w", shares={"normal": 20})
    assert Counter(r.tenant_id for r in claimed) == {bank: 15, shop: 5}


@pytest.mark.parametrize(("args", "message"), [
    (("bank42", "0"), "expected a weight from 1 to 1000, got '0'"),
    (("bank42", "1001"), "expected a weight from 1 to 1000, got '1001'"),
    (("bank42", "-2"), "expected a weight from 1 to 1000, got '-2'"),
    (("bank42", "2.5"), "expected a weight from 1 to 1000, got '2.5'"),
    (("bank42", "lots"), "expected a weight from 1 to 1000, got 'lots'"),
    (("bank42",), "the following arguments are required: N"),
    (("nobank", "2"), "unknown tenant 'nobank'"),
])
def test_set_weight_refuses_bad_input_and_changes_nothing(
        tenants_made: str, capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
        message: str) -> None:
    code, out, err = cli(capsys, tenants_made, "set-weight", *args)
    assert code == 2 and message in err and out == ""
    assert "Traceback" not in err
    assert weights(tenants_made) == {"bank42": 1, "shop7": 1}


def test_set_weight_as_a_process_and_unknown_tenant_in_json(tenants_made: str) -> None:
    done = subprocess.run([sys.executable, "-m", "crondepot", "tenants", "set-weight",
                           "shop7", "7", "--db", tenants_made, "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["claim_weight"] == 7
    refused = subprocess.run([sys.executable, "-m", "crondepot", "tenants", "set-weight",
                              "nobank", "7", "--db", tenants_made, "--json"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "unknown tenant 'nobank'" in refused.stderr + \
        refused.stdout
    assert weights(tenants_made) == {"bank42": 1, "shop7": 7}


@pytest.mark.parametrize("weight", [0, 1001, -1, True, 2.0, "3"])
def test_the_store_refuses_a_weight_out_of_range(conn: psycopg.Connection[Any],
                                                  weight: Any) -> None:
    tenant = create_tenant(conn, "bank42").id
    with pytest.raises(InvalidWeight, match="from 1 to 1000"):
        set_claim_weight(conn, tenant, weight)
    with pytest.raises(InvalidWeight, match="no tenant"):
        set_claim_weight(conn, tenant + 1000, 2)
    assert conn.execute("SELECT claim_weight FROM tenants").fetchall() == [(1,)]
