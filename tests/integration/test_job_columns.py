"""The job's columns, named once (the views of migration 0013; the column table itself is
held to the job_writes view in test_job_column_table.py), and the jobs table's CHECKs,
which must say what the job document's field table says (job/fields.py): the table was
written before the field table and is not edited, so this test holds them together."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from crondepot.job import fields as F
from crondepot.job.spec import MAX_PAYLOAD_BYTES, JobSpec
from crondepot.job.store import COPY_AT_LEAST, JobFilter, create_jobs, get_job, list_jobs


def _spec(n: int) -> JobSpec:
    return JobSpec.from_document({
        "key": f"k{n}", "cron": "0 9 * * *", "tz": "Asia/Kolkata", "priority": "bulk",
        "target": {"type": "http", "url": "https://hooks.example.com/x", "dedupes": True},
        "payload": {"n": n}, "misfire": {"policy": "skip_after_local_time", "until": "20:00"},
        "catchup": "latest", "max_catchup": 7, "spread": {"seconds": 60, "key": f"s{n}"},
        "max_attempts": 3, "lease_seconds": 30, "rate_limit": "sms-gateway",
        # a window of its own, none at all, or the tenant's: the three stored shapes
        "delivery_window": [{"from": "09:00", "to": "21:00", "days": "mon-sat"}, "none",
                            None][n % 3]})


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


def test_the_previous_release_still_inserts_through_its_view(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    # Expand, then contract: while a rolling upgrade runs, an API of the previous release
    # inserts a job through job_inserts as it always did (22 values, the instant last); the
    # columns added since take their defaults.
    old = [name for (name,) in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'job_inserts' "
        "ORDER BY ordinal_position")]
    assert len(old) == 22 and old[-1] == "created_at" and "labels" not in old
    conn.execute(
        "INSERT INTO job_inserts OVERRIDING SYSTEM VALUE SELECT 9001, %s, 'old-api', "
        "'0 9 * * *', 'UTC', now(), now(), 'normal', true, "
        "'{\"type\": \"python\", \"handler\": \"crondepot.log\"}', '{}', 'run_late', "
        "NULL, NULL, 'all', 1000, 0, NULL, 6, 60, NULL, now()", (tenant_id,))
    row = conn.execute("SELECT labels, at, max_runs, fire_count, alert_after_failures "
                       "FROM jobs WHERE id = 9001").fetchone()
    assert row == ({}, None, None, 0, None)


def test_the_release_before_the_retry_curve_still_inserts_through_job_writes(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    # job_writes (migration 0017, 28 columns) is the previous release's insert view: its
    # jobs take today's curve, the columns' defaults.
    old = [name for (name,) in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'job_writes' "
        "ORDER BY ordinal_position")]
    assert len(old) == 28 and old[-1] == "created_at" and "retry_base_s" not in old
    conn.execute(
        "INSERT INTO job_writes OVERRIDING SYSTEM VALUE SELECT 9002, %s, 'old-api-2', "
        "'0 9 * * *', 'UTC', now(), now(), 'normal', true, "
        "'{\"type\": \"python\", \"handler\": \"crondepot.log\"}', '{}', 'run_late', "
        "NULL, NULL, 'all', 1000, 0, NULL, 4, 60, NULL, NULL, NULL, NULL, NULL, '{}', NULL, "
        "now()", (tenant_id,))
    row = conn.execute("SELECT max_attempts, retry_base_s, retry_cap_s FROM jobs "
                       "WHERE id = 9002").fetchone()
    assert row == (4, 30.0, 600.0)


def test_the_release_before_delivery_windows_still_inserts_through_job_writes_3(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    # job_writes_3 (migration 0023, 31 columns) is the previous release's insert view: its
    # jobs follow their tenant's default window (delivery_window null).
    old = [name for (name,) in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'job_writes_3' "
        "ORDER BY ordinal_position")]
    assert len(old) == 31 and old[-1] == "created_at" and "delivery_window" not in old
    conn.execute(
        "INSERT INTO job_writes_3 OVERRIDING SYSTEM VALUE SELECT 9003, %s, 'old-api-3', "
        "'0 9 * * *', 'UTC', now(), now(), 'normal', true, "
        "'{\"type\": \"python\", \"handler\": \"crondepot.log\"}', '{}', 'run_late', "
        "NULL, NULL, 'all', 1000, 0, NULL, 4, 60, NULL, NULL, NULL, NULL, NULL, '{}', NULL, "
        "30, 600, NULL, now()", (tenant_id,))
    row = conn.execute("SELECT delivery_window FROM jobs WHERE id = 9003").fetchone()
    assert row == (None,)


def test_the_table_refuses_a_cap_below_the_base(conn: psycopg.Connection[Any],
                                                tenant_id: int) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO jobs (tenant_id, cron, tz, target, retry_base_s, "
                     "retry_cap_s) VALUES (%s, '0 9 * * *', 'UTC', '{}', 10, 5)",
                     (tenant_id,))


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
    ("*/90 * * * *", "*/60 * * * *"),
    ("10/61 9 * * *", "10/60 9 * * *"),
    ("0 0 1-10/40,20 * *", "0 0 1-10/31,20 * *"),
    ("0 0 * jan-mar/13 mon/9", "0 0 * jan-mar/12 mon/8"),
    ("H/99 H(2-5)/1000000000000000000000 * * *", "H/60 H(2-5)/24 * * *"),
    ("*/60  */24\t*/31 */12 */8", "*/60  */24\t*/31 */12 */8"),     # as wide as allowed
    ("@hourly", "@hourly"),
    # month names hold a v: the split and the trim must not take it for a blank
    ("*/90 * * nov *", "*/60 * * nov *"),
    ("0 0 * jan,nov/13 *", "0 0 * jan,nov/12 *"),
    ("0 0 * nov-dec/13 *", "0 0 * nov-dec/12 *"),
    ("\v*/90\v*\v*\vnov\v* \v", "*/60 * * nov *"),              # vertical tabs are blanks
    # the hour field keeps its '/': fixed_time (the DST rules) reads it
    ("0 */25 * * *", "0 */24 * * *"),
    ("30 2/30 * * *", "30 2/24 * * *"),
    ("15 1-3/99,5 * * *", "15 1-3/24,5 * * *"),
    ("0 H/90 * * *", "0 H/24 * * *"),
]


def _old_step(text: str, field: Any) -> int:
    """The step as the parser read it before steps were bounded (commit 90c6751)."""
    from crondepot.timetable import cron as C
    if not C._NUMBER.fullmatch(text):
        raise C._error(field, f"step '{text}' is not a number")
    step = int(text)
    if step == 0:
        raise C._error(field, "step 0 is not allowed")
    return step


@pytest.mark.parametrize(("before", "after"), WIDE_STEPS)
def test_a_rewritten_cron_fires_when_the_old_one_did_across_dst(
        monkeypatch: pytest.MonkeyPatch, before: str, after: str) -> None:
    from datetime import UTC, datetime

    from crondepot.timetable import cron as C
    from crondepot.timetable.table import Timetable

    starts = [datetime(2026, 3, 28, tzinfo=UTC), datetime(2026, 10, 24, tzinfo=UTC),
              datetime(2026, 10, 31, tzinfo=UTC)]
    new = Timetable(after, "Europe/Berlin", hash_key="k")
    C._parse.cache_clear()
    try:
        with monkeypatch.context() as patched:
            patched.setattr(C, "_step", _old_step)
            old = Timetable(before, "Europe/Berlin", hash_key="k")
            assert old.fixed_time == new.fixed_time
            for start in starts:
                assert new.next_fires(start, 60) == old.next_fires(start, 60), start
    finally:
        C._parse.cache_clear()


def test_migration_0013_rewrites_steps_wider_than_their_field_to_the_field_s_range(
        db_url: str, tenant_id: int) -> None:
    from crondepot.db import connect, migrate
    from crondepot.timetable.cron import parse_cron

    with connect(db_url) as conn:
        ids = [conn.execute(
            "INSERT INTO jobs (tenant_id, cron, tz, target) VALUES (%s, %s, 'UTC', '{}') "
            "RETURNING id", (tenant_id, cron)).fetchone()[0] for cron, _ in WIDE_STEPS]
        conn.execute("INSERT INTO job_timetables (job_id, tenant_id, cron, tz, since, until) "
                     "VALUES (%s, %s, '*/90 * * nov *', 'UTC', now(), now())",
                     (ids[0], tenant_id))
        conn.execute("DROP VIEW stored_jobs, job_inserts")        # 0013 again, as on upgrade
        conn.execute("DELETE FROM crondepot_schema_migrations WHERE version = 13")
        migrate(conn)
        rows = {id_: (cron, version) for id_, cron, version in conn.execute(
            "SELECT id, cron, version FROM jobs WHERE id = ANY(%s)", (ids,))}
        (past,) = conn.execute("SELECT cron FROM job_timetables").fetchone()
        audited = {int(subject) for (subject,) in conn.execute(
            "SELECT subject FROM audit_log WHERE actor = 'migration 0013' "
            "AND action = 'job.update'")}
    assert audited == {i for i, (before, after) in zip(ids, WIDE_STEPS, strict=True)
                       if before != after}
    assert [rows[i][0] for i in ids] == [after for _, after in WIDE_STEPS]
    # a rewritten job's ETag changes; an untouched one's does not
    assert [rows[i][1] for i in ids] == [1 if before == after else 2
                                         for before, after in WIDE_STEPS]
    assert past == "*/60 * * nov *"
    for cron, _ in rows.values():          # every one readable by the bounded parser
        parse_cron(cron, hash_key="k")
