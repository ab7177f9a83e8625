"""The job column table (job/columns.py) is what the database and the SQL say it is.

Every write of a job and its read back are derived from ``WRITES``; the queries still spell
their columns (SQL lives in the .sql files, never built from Python strings), so these
tests hold the table to the view the inserts write through (``job_writes``) in the catalog,
to the arrays of ``insert_jobs`` and to the SET list of ``update_job_document``, and the
JobSpec to the table.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, time
from typing import Any

import psycopg

from crondepot.db import Q
from crondepot.job import fields as F
from crondepot.job.columns import COPY_TYPES, PATCHED, SPEC, WRITES, Column, spec_from_row
from crondepot.job.spec import JobSpec, Misfire
from crondepot.job.store import (
    COPY_AT_LEAST,
    create_jobs,
    get_job,
    job_document,
    merged_document,
    update_job,
)

_VIEW_COLUMNS = """
SELECT attname, atttypid::regtype::text FROM pg_attribute
WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum"""


def _section(name: str) -> str:
    """The text of query ``name`` without its comment lines."""
    return "\n".join(line for line in getattr(Q, name).splitlines()
                     if not line.lstrip().startswith("--"))


def _write_view() -> str:
    """The view both inserts write through (a release that adds a column adds a view)."""
    views = set()
    for query in ("insert_jobs", "insert_import_rows"):
        insert = re.search(r"INSERT INTO (\w+)", _section(query))
        assert insert is not None, query
        views.add(insert[1])
    (view,) = views
    assert f"FROM {view} WITH NO DATA" in _section("create_import_table")
    return view


def _catalog_type(conn: psycopg.Connection[Any], pg_type: str) -> str:
    """``pg_type`` as the catalog spells it (integer, timestamp with time zone)."""
    row = conn.execute("SELECT %s::regtype::text", (pg_type,)).fetchone()
    assert row is not None
    return str(row[0])


def test_the_column_table_is_the_write_view_in_order_with_its_types(
        conn: psycopg.Connection[Any]) -> None:
    view = conn.execute(_VIEW_COLUMNS, (_write_view(),)).fetchall()
    table = [(c.name, _catalog_type(conn, c.pg_type)) for c in WRITES]
    assert table == view
    for pg_type in COPY_TYPES:      # the COPY names its types to psycopg, not the server
        assert conn.adapters.types.get(pg_type) is not None, pg_type


def test_stored_jobs_returns_every_column_a_spec_is_read_back_from(
        conn: psycopg.Connection[Any]) -> None:
    stored = dict(conn.execute(_VIEW_COLUMNS, ("stored_jobs",)).fetchall())
    for column in WRITES:
        assert stored.get(column.name) == _catalog_type(conn, column.pg_type), column.name


def test_insert_jobs_takes_one_array_per_column_named_and_typed_as_the_table() -> None:
    arrays = re.findall(r"%\((\w+)\)b::(\w+)\[\]", _section("insert_jobs"))
    assert arrays == [(c.name, c.pg_type) for c in WRITES]


def test_update_job_document_sets_the_patchable_columns_by_their_names() -> None:
    sql = _section("update_job_document")
    assignments = sql[sql.index("SET"):sql.index("WHERE")]
    params = dict(re.findall(r"(\w+) = %\((\w+)\)s", assignments))
    assert all(column == param for column, param in params.items())
    writer = {"next_run_at", "next_nominal_at", "timetable_since"}    # not the document's
    assert set(params) - writer == {c.name for c in PATCHED}
    assert {c.name for c in SPEC} - {c.name for c in PATCHED} == {"key", "active"}


def test_every_attribute_of_a_spec_is_stored_in_a_column() -> None:
    roots = {c.attr.partition(".")[0] for c in SPEC if c.attr is not None}
    assert roots == {f.name for f in dataclasses.fields(JobSpec)}
    parts = {c.attr.partition(".")[2] for c in SPEC if c.attr and c.attr.startswith("misfire.")}
    assert parts == {f.name for f in dataclasses.fields(Misfire)}
    writers = [c.name for c in WRITES if c.attr is None]
    assert writers == ["id", "tenant_id", "next_run_at", "next_nominal_at", "created_at"]


def _full() -> JobSpec:
    """A cron job's spec with the document's optional parts set."""
    return JobSpec(
        key="full", cron="15 9 * * 1-5", tz="Asia/Kolkata", priority="bulk",
        target={"type": "http", "url": "https://hooks.example.com/x", "timeout_s": 2.5,
                "dedupes": True},
        payload={"account": 42, "s": "é"},
        misfire=Misfire(policy="skip_after_local_time", until=time(20, 0)),
        catchup="latest", max_catchup=7, spread_seconds=60, spread_key="s", max_attempts=3,
        retry_base_s=1.5, retry_cap_s=90, lease_seconds=30, rate_limit="sms", active=True,
        start_at=datetime(2026, 1, 1, tzinfo=UTC), end_at=datetime(2036, 1, 1, tzinfo=UTC),
        max_runs=12, labels={"bank": "42"}, alert_after_failures=5)


def _written(column: Column, spec: JobSpec) -> Any:
    value = column.read(spec)
    return getattr(value, "obj", value)      # a jsonb value travels wrapped


def test_a_spec_read_into_its_columns_and_back_is_the_same_spec() -> None:
    spec = _full()
    row = {c.name: _written(c, spec) for c in SPEC}
    assert spec_from_row(row) == spec
    at = dataclasses.replace(spec, cron=None, at=datetime(2030, 5, 1, 9, tzinfo=UTC))
    assert spec_from_row({c.name: _written(c, at) for c in SPEC}) == at
    for other in (_several(), _interval()):
        assert spec_from_row({c.name: _written(c, other) for c in SPEC}) == other


def _several() -> JobSpec:
    """A job with a list of crons (several schedules)."""
    crons = ("0 9 * * 1-5", "0 10 * * 6")
    return dataclasses.replace(_full(), key="several", crons=crons, cron=" | ".join(crons))


def _interval() -> JobSpec:
    """An interval job, anchored (as the store anchors it)."""
    anchor = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)
    return dataclasses.replace(_full(), key="every", every_s=90, anchor_at=anchor,
                               cron=f"@every 90s from {anchor.isoformat()}")


def test_both_inserts_and_the_update_write_every_column_of_the_table(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    full = dataclasses.replace(_full(), target={"type": "python", "handler": "test.noop"},
                               rate_limit=None)
    others = [dataclasses.replace(other, target=full.target, rate_limit=None)
              for other in (_several(), _interval())]
    for count in (1, COPY_AT_LEAST):      # insert_jobs, then the COPY
        specs = [dataclasses.replace((full, *others)[n % 3], key=f"{count}:{n}")
                 for n in range(count)]
        created = create_jobs(conn, tenant_id, specs)
        assert [get_job(conn, tenant_id, c.id).spec for c in created] == specs
    several = get_job(conn, tenant_id, created[1].id)
    patch = {"cron": None, "every": "2m"}      # a list of crons to an interval
    updated = update_job(conn, tenant_id, several.id, patch, version=several.version)
    assert updated.spec.every_s == 120 and updated.spec.crons is None
    assert updated.spec.anchor_at is not None and updated.spec.cron is not None
    assert updated.spec.cron.startswith("@every 120s from ")
    job = get_job(conn, tenant_id, created[0].id)
    patch = {"cron": "0 10 * * *", "tz": "UTC", "priority": "urgent",
             "target": {"type": "python", "handler": "test.record"}, "payload": {"n": 2},
             "misfire": {"policy": "skip_after", "seconds": 90}, "catchup": "all",
             "max_catchup": 8, "spread": {"seconds": 0, "key": "t"},
             "retry": {"max_attempts": 4, "base_s": 2, "cap_s": 7.5},
             "lease_seconds": 40, "start_at": "2026-02-01T00:00:00Z",
             "end_at": "2037-01-01T00:00:00Z", "max_runs": 13, "labels": {"bank": "43"},
             "alert_after_failures": 6}
    updated = update_job(conn, tenant_id, job.id, patch, version=job.version)
    expected = JobSpec.from_document(merged_document(job_document(job.spec), patch))
    assert updated.spec == expected


def test_the_document_of_a_spec_names_every_field_and_reads_back_to_it() -> None:
    spec = _full()
    document = job_document(spec)
    assert set(document) == {f.name for f in F.DOCUMENT if not f.deprecated} - {
        "at", "every", "anchor"}
    assert "max_attempts" not in document and document["retry"] == {
        "max_attempts": 3, "base_s": 1.5, "cap_s": 90}
    assert JobSpec.from_document(document) == spec
    several = job_document(_several())
    assert several["cron"] == ["0 9 * * 1-5", "0 10 * * 6"]
    assert JobSpec.from_document(several) == _several()
    interval = job_document(_interval())
    assert "cron" not in interval and interval["every"] == "90s"
    assert interval["anchor"] == "2026-12-06T06:00:00+00:00"
    assert JobSpec.from_document(interval) == _interval()
