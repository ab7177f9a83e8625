"""db/sql/schema.sql is the schema the migrations build, object for object.

schema.sql is for reading (the current shape of every table and function in one file); the
migrations are what runs. Loading the file into an empty database and comparing its catalog
with a migrated database's proves the file is current: a migration committed without its
regenerated schema.sql (``make schema``) fails here, naming what differs.
"""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.db import connect
from crondepot.db import schema_dump as schema_file


def _differences(migrated: dict[str, list[Any]], loaded: dict[str, list[Any]]) -> list[str]:
    out = []
    for kind in schema_file.CATALOG:
        only_migrated = sorted(set(migrated[kind]) - set(loaded[kind]))
        only_file = sorted(set(loaded[kind]) - set(migrated[kind]))
        out += [f"{kind}: migrations build {row}, schema.sql does not" for row in only_migrated]
        out += [f"{kind}: schema.sql builds {row}, migrations do not" for row in only_file]
    return out


def test_schema_sql_builds_exactly_what_the_migrations_build(
        conn: psycopg.Connection[Any], empty_db_url: str) -> None:
    migrated = schema_file.describe(conn)
    with connect(empty_db_url) as empty:
        schema_file.load(empty, schema_file.path().read_text())
        loaded = schema_file.describe(empty)
    # The bookkeeping of applied migrations is the runner's, created outside migrations; the
    # file holds it too, so nothing is left out of the comparison.
    assert all(migrated[kind] for kind in ("schema_columns", "schema_functions"))
    differences = _differences(migrated, loaded)
    assert not differences, "db/sql/schema.sql is stale; run `make schema`:\n" + "\n".join(
        differences[:40])


def test_a_changed_schema_is_caught(conn: psycopg.Connection[Any], empty_db_url: str) -> None:
    # The comparison sees a column the file lacks: the check above can fail.
    with connect(empty_db_url) as empty:
        schema_file.load(empty, schema_file.path().read_text())
        empty.execute("ALTER TABLE runs ADD COLUMN stray integer")
        loaded = schema_file.describe(empty)
    differences = _differences(schema_file.describe(conn), loaded)
    assert any("stray" in line for line in differences), differences


def test_clean_drops_session_and_version_lines_only() -> None:
    dump = ("--\n-- Dumped from database version 16.2\n-- Dumped by pg_dump version 16.2\n"
            "SET statement_timeout = 0;\nSET check_function_bodies = false;\n"
            "SELECT pg_catalog.set_config('search_path', '', "
            "false);\n\n\n\nCREATE TABLE public.t (a integer);\n")
    text = schema_file.clean(dump)
    assert text.startswith(schema_file.HEADER)
    assert "Dumped" not in text and "statement_timeout" not in text and "set_config" not in text
    assert "CREATE TABLE public.t (a integer);" in text and "\n\n\n" not in text
    assert "SET check_function_bodies = false;" in text   # functions come before tables
