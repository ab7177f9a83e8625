"""``crondepot tenants token create|list|revoke`` and ``tenants secret rotate`` as an operator
runs them: real processes, a real database; bad input is refused and changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import connect
from crondepot.tenancy.tenants import hash_token


def crondepot(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "crondepot", *args], capture_output=True,
                          text=True, timeout=120)


def _ok(*args: str) -> Any:
    result = crondepot(*args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if "--json" in args else result.stdout


def _state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    return (conn.execute("SELECT id, tenant_id, role, label, revoked_at FROM api_tokens "
                         "ORDER BY id").fetchall(),
            conn.execute("SELECT id, signing_secret, previous_signing_secret, "
                         "previous_secret_until FROM tenants ORDER BY id").fetchall())


@pytest.fixture
def bank(db_url: str) -> dict[str, Any]:
    created: dict[str, Any] = _ok("tenants", "create", "bank42", "--db", db_url, "--json")
    return created


def test_tenants_create_shows_the_signing_secret_once_with_the_token(
        db_url: str, bank: dict[str, Any]) -> None:
    assert bank["signing_secret"].startswith("whsec_") and bank["token"].startswith("cdp_")
    with connect(db_url) as conn:
        row = conn.execute("SELECT signing_secret FROM tenants WHERE name = 'bank42'"
                           ).fetchone()
    assert row == (bank["signing_secret"],)
    text = _ok("tenants", "create", "bank43", "--db", db_url)
    assert "webhook signing secret: whsec_" in text
    listed = _ok("tenants", "list", "--db", db_url, "--json")
    assert "whsec_" not in json.dumps(listed)


def test_token_create_list_and_revoke(db_url: str, bank: dict[str, Any]) -> None:
    made = _ok("tenants", "token", "create", "bank42", "--role", "read", "--label", "ci read",
               "--db", db_url, "--json")
    assert made["role"] == "read" and made["label"] == "ci read" and made["tenant"] == "bank42"
    with connect(db_url) as conn:
        stored = conn.execute("SELECT token_hash, role FROM api_tokens WHERE id = %s",
                              (made["id"],)).fetchone()
    assert stored is not None and (bytes(stored[0]), stored[1]) == (
        hash_token(made["token"]), "read")
    plain = _ok("tenants", "token", "create", "bank42", "--db", db_url)
    assert "Keep this token now" in plain and "cdp_" in plain
    listed = _ok("tenants", "token", "list", "bank42", "--db", db_url, "--json")
    assert [t["role"] for t in listed] == ["admin", "read", "admin"]
    assert [t["label"] for t in listed] == ["initial", "ci read", None]
    assert all(set(t) == {"id", "tenant", "role", "label", "created_at", "last_used_at",
                          "revoked_at"} for t in listed)
    assert made["token"] not in json.dumps(listed)
    table = _ok("tenants", "token", "list", "bank42", "--db", db_url)
    assert "ci read" in table and "last used" in table and "cdp_" not in table

    done = _ok("tenants", "token", "revoke", "bank42", str(made["id"]), "--db", db_url,
               "--json")
    assert done["already_revoked"] is False and done["revoked_at"] is not None
    again = _ok("tenants", "token", "revoke", "bank42", str(made["id"]), "--db", db_url,
                "--json")
    assert again["already_revoked"] is True and again["revoked_at"] == done["revoked_at"]
    text = _ok("tenants", "token", "revoke", "bank42", str(made["id"]), "--db", db_url)
    assert "already revoked" in text


def test_the_operator_may_revoke_the_last_admin_token(db_url: str,
                                                      bank: dict[str, Any]) -> None:
    (first,) = _ok("tenants", "token", "list", "bank42", "--db", db_url, "--json")
    done = _ok("tenants", "token", "revoke", "bank42", str(first["id"]), "--db", db_url,
               "--json")
    assert done["revoked_at"] is not None


def test_secret_rotate_shows_the_new_secret_and_the_end_of_the_overlap(
        db_url: str, bank: dict[str, Any]) -> None:
    done = _ok("tenants", "secret", "rotate", "bank42", "--overlap", "2h", "--db", db_url,
               "--json")
    assert done["signing_secret"].startswith("whsec_")
    assert done["signing_secret"] != bank["signing_secret"]
    until = datetime.fromisoformat(done["previous_valid_until"])
    assert until - datetime.fromisoformat(done["rotated_at"]) == timedelta(hours=2)
    with connect(db_url) as conn:
        row = conn.execute("SELECT signing_secret, previous_signing_secret, "
                           "previous_secret_until FROM tenants").fetchone()
    assert row == (done["signing_secret"], bank["signing_secret"], until)
    text = _ok("tenants", "secret", "rotate", "bank42", "--db", db_url)
    assert "both signatures" in text and "whsec_" in text
    now = _ok("tenants", "secret", "rotate", "bank42", "--overlap", "0", "--db", db_url)
    assert "no longer signs" in now


@pytest.mark.parametrize(("args", "needle"), [
    (["token", "create", "nobank"], "unknown tenant 'nobank'"),
    (["token", "list", "nobank"], "unknown tenant 'nobank'"),
    (["token", "revoke", "nobank", "1"], "unknown tenant 'nobank'"),
    (["secret", "rotate", "nobank"], "unknown tenant 'nobank'"),
    (["token", "create", "bank42", "--role", "owner"], "invalid choice: 'owner'"),
    (["token", "create", "bank42", "--label", "x" * 101], "label: expected 1 to 100"),
    (["token", "create", "bank42", "--label", "a\nb"], "control characters"),
    (["token", "revoke", "bank42", "999"], "no token 999 for this tenant"),
    (["token", "revoke", "bank42", "one"], "expected a token id"),
    (["token", "revoke", "bank42", "0"], "expected a token id"),
    (["secret", "rotate", "bank42", "--overlap=-1h"], "overlap: expected a duration"),
    (["secret", "rotate", "bank42", "--overlap", "31d"], "from 0 to 30 days"),
    (["secret", "rotate", "bank42", "--overlap", "1.5h"], "overlap: expected a duration"),
    (["secret", "rotate", "bank42", "--overlap", "soon"], "overlap: expected a duration"),
])
def test_bad_input_is_refused_with_a_message_and_changes_nothing(
        db_url: str, bank: dict[str, Any], args: list[str], needle: str) -> None:
    with connect(db_url) as conn:
        before = _state(conn)
        result = crondepot("tenants", *args, "--db", db_url)
        assert result.returncode == 2, result.stdout
        assert needle in result.stderr and "Traceback" not in result.stderr
        assert _state(conn) == before


def test_another_tenants_token_cannot_be_revoked_under_this_tenant(
        db_url: str, bank: dict[str, Any]) -> None:
    other = _ok("tenants", "create", "otherbank", "--db", db_url, "--json")
    (theirs,) = _ok("tenants", "token", "list", "otherbank", "--db", db_url, "--json")
    result = crondepot("tenants", "token", "revoke", "bank42", str(theirs["id"]), "--db",
                       db_url, "--json")
    assert result.returncode == 2
    assert json.loads(result.stderr) == {"error": f"no token {theirs['id']} for this tenant"}
    with connect(db_url) as conn:
        assert conn.execute("SELECT revoked_at FROM api_tokens WHERE token_hash = %s",
                            (hash_token(other["token"]),)).fetchone() == (None,)


def test_token_and_secret_commands_are_audited_as_the_operator(
        db_url: str, bank: dict[str, Any]) -> None:
    made = _ok("tenants", "token", "create", "bank42", "--db", db_url, "--json")
    _ok("tenants", "token", "revoke", "bank42", str(made["id"]), "--db", db_url)
    _ok("tenants", "secret", "rotate", "bank42", "--db", db_url)
    with connect(db_url) as conn:
        rows = conn.execute("SELECT action, subject, actor FROM audit_log "
                            "WHERE action ~ '^(token|secret)[.]' ORDER BY id").fetchall()
    assert [(a, s) for a, s, _ in rows] == [
        ("token.create", f"token:{made['id'] - 1}"), ("token.create", f"token:{made['id']}"),
        ("token.revoke", f"token:{made['id']}"), ("secret.rotate", "signing-secret")]
    assert all(actor.startswith("cli:") for _, _, actor in rows)
