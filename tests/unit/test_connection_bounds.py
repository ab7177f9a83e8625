"""Every URL gets bounds on each wait (db/connect.py: bounded); the operator's own win."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict

from crondepot.db import ALL_TENANTS, bounded
from crondepot.db.connect import CONNECTION_DEFAULTS


def test_a_plain_url_gets_every_bound() -> None:
    params = conninfo_to_dict(bounded("postgresql://app@db.example:5432/crondepot"))
    for name, value in CONNECTION_DEFAULTS.items():
        assert params[name] == value
    assert params["options"] == "-c idle_in_transaction_session_timeout=60s"
    assert (params["host"], params["dbname"], params["user"]) == (
        "db.example", "crondepot", "app")


def test_settings_in_the_url_win_and_options_are_kept() -> None:
    url = ("postgresql://h1:5432,h2:5433/db?target_session_attrs=read-write"
           "&connect_timeout=30&keepalives=0&options=-c%20statement_timeout%3D5s")
    params = conninfo_to_dict(bounded(url))
    assert params["connect_timeout"] == "30"
    assert params["keepalives"] == "0"
    assert params["tcp_user_timeout"] == CONNECTION_DEFAULTS["tcp_user_timeout"]
    assert params["options"] == ("-c statement_timeout=5s "
                                 "-c idle_in_transaction_session_timeout=60s")
    assert (params["host"], params["port"]) == ("h1,h2", "5432,5433")
    assert params["target_session_attrs"] == "read-write"


def test_an_idle_transaction_timeout_given_by_the_operator_is_not_repeated() -> None:
    url = "host=/tmp dbname=x options='-c idle_in_transaction_session_timeout=5min'"
    params = conninfo_to_dict(bounded(url))
    assert params["options"] == "-c idle_in_transaction_session_timeout=5min"


def test_bounding_twice_changes_nothing() -> None:
    once = bounded("postgresql://postgres@127.0.0.1:5432/postgres")
    assert conninfo_to_dict(bounded(once)) == conninfo_to_dict(once)


def test_a_connection_names_no_tenant_unless_it_declares_all() -> None:
    """Row-level security (migration 0021): only what works across tenants asks for 'all'."""
    plain = conninfo_to_dict(bounded("postgresql://app@db.example/crondepot"))
    assert "crondepot.tenant_id" not in plain["options"]
    every = conninfo_to_dict(bounded("postgresql://app@db.example/crondepot",
                                     tenants=ALL_TENANTS))
    assert every["options"] == ("-c idle_in_transaction_session_timeout=60s "
                                "-c crondepot.tenant_id=all")
    with pytest.raises(ValueError, match="tenants"):
        bounded("postgresql://app@db.example/crondepot", tenants="7")
