"""The job's columns, named once (the views of migration 0013), and the jobs table's CHECKs,
which must say what the job document's field table says (job/fields.py): the table was
written before the field table and is not edited, so this test holds them together."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from crondepot.job import fields as F
from crondepot.job.spec import MAX_PAYLOAD_BYTES, JobSpec
from crondepot.job.store import (
    _COLUMNS,
    COPY_AT_LEAST,
    JobFilter,
    create_jobs,
    get_job,
    list_jobs,
)


def _spec(n: int) -> JobSpec:
    return JobSpec.from_document({
        "key": f"k{n}", "cron": "0 9 * * *", "tz": "Asia/Kolkata", "priority": "bulk",
        "target": {"type": "http", "url": "https://hooks.example.com/x", "dedupes": True},
        "payload": {"n": n}, "misfire": {"policy": "skip_after_local_time", "until": "20:00"},
        "catchup": "latest", "max_catchup": 7, "spread": {"seconds": 60, "key": f"s{n}"},
        "max_attempts": 3, "lease_seconds": 30, "rate_limit": "sms-gateway"})


@pytest.mark.parametrize("count", [1, COPY_AT_LEAST])     # insert_jobs, then the COPY path
def test_both_inserts_write_every_column_and_the_reads_return_it(
        conn: psycopg.Connection[Any], tenant_id: int, count: int) -> None:
    specs = [_spec(n) for n in range(count)]
    created = create_jobs(conn, tenant_id, specs)
    assert all(c.created for c in created)
    for job, spec in zip(created, specs, strict=True):
        stored = get_job(conn, tenant_id, job.id)
        assert stored.spec == spec
        assert stored.next_run_at == job.next_run_at
        assert stored.created_at is not None and stored.version == 1
    listed = list_jobs(conn, tenant_id, JobFilter(), after=0, limit=count + 1)
    assert [j.spec for j in listed] == specs


def test_the_insert_view_takes_the_store_s_columns_in_order(
        conn: psycopg.Connection[Any]) -> None:
    columns = [name for (name,) in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'job_inserts' "
        "ORDER BY ordinal_position")]
    assert len(columns) == len(_COLUMNS) + 1 and columns[-1] == "created_at"


def _checks(conn: psycopg.Connection[Any]) -> str:
    return " ".join(definition for (definition,) in conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = 'jobs'::regclass AND contype = 'c'"))


@pytest.mark.parametrize("field", [F.MAX_CATCHUP, F.SPREAD_SECONDS, F.MAX_ATTEMPTS,
                                   F.LEASE_SECONDS], ids=lambda f: f.path)
def test_the_table_s_bounds_are_the_field_table_s(conn: psycopg.Connection[Any],
                                                  field: F.Field) -> None:
    column = field.path.replace(".", "_")
    checks = _checks(conn)
    assert f"({column} >= {field.low:g})" in checks
    assert f"({column} <= {field.high:g})" in checks


def test_the_table_s_choices_and_limits_are_the_field_table_s(
        conn: psycopg.Connection[Any]) -> None:
    checks = _checks(conn)
    for column, choices in (("priority", F.PRIORITY.choices), ("catchup", F.CATCHUP.choices),
                            ("misfire_policy", tuple(v.tag for v in F.MISFIRES.variants))):
        listed = ", ".join(f"'{c}'::text" for c in choices)
        assert f"({column} = ANY (ARRAY[{listed}]))" in checks, column
    assert F.MISFIRE_SECONDS.low == 1 and "(misfire_seconds > 0)" in checks
    assert f"(length(key) <= {F.KEY.max_length})" in checks
    assert f"(octet_length((payload)::text) <= {MAX_PAYLOAD_BYTES})" in checks


WIDE_STEPS = [       # stored before steps were bounded -> what migration 0013 makes of them
    ("*/90 * * * *", "0 * * * *"),
    ("10/61 9 * * *", "10 9 * * *"),
    ("0 0 1-10/40,20 * *", "0 0 1,20 * *"),
    ("0 0 * jan-mar/13 mon/9", "0 0 * jan mon"),
    ("H/99 H(2-5)/1000000000000000000000 * * *", "H H(2-5) * * *"),
    ("*/60  */24\t*/31 */12 */8", "*/60  */24\t*/31 */12 */8"),     # as wide as allowed
    ("@hourly", "@hourly"),
]


def test_migration_0013_rewrites_steps_wider_than_their_field_to_the_value_they_named(
        db_url: str, tenant_id: int) -> None:
    from crondepot.db import connect, migrate
    from crondepot.timetable.cron import parse_cron

    with connect(db_url) as conn:
        ids = [conn.execute(
            "INSERT INTO jobs (tenant_id, cron, tz, target) VALUES (%s, %s, 'UTC', '{}') "
            "RETURNING id", (tenant_id, cron)).fetchone()[0] for cron, _ in WIDE_STEPS]
        conn.execute("INSERT INTO job_timetables (job_id, tenant_id, cron, tz, since, until) "
                     "VALUES (%s, %s, '*/90 * * * *', 'UTC', now(), now())",
                     (ids[0], tenant_id))
        conn.execute("DROP VIEW stored_jobs, job_inserts")        # 0013 again, as on upgrade
        conn.execute("DELETE FROM crondepot_schema_migrations WHERE version = 13")
        migrate(conn)
        crons = dict(conn.execute("SELECT id, cron FROM jobs WHERE id = ANY(%s)", (ids,)))
        (past,) = conn.execute("SELECT cron FROM job_timetables").fetchone()
    assert [crons[i] for i in ids] == [after for _, after in WIDE_STEPS]
    assert past == "0 * * * *"
    for cron in crons.values():            # every one readable by the bounded parser
        parse_cron(cron, hash_key="k")
