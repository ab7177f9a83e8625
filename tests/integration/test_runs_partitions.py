"""Partitions of runs (migration 0040, runs/partitions.py): days made ahead, the default for
what no day holds, a day retired whole (its kept runs moved out first), the claim and the
overlap rule across days, and the online conversion of a database whose runs is one table.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from crondepot.db import connect, migrations
from crondepot.queue import claim_runs
from crondepot.runs import partitions
from crondepot.runs.retention import prune_cutoff, prune_finished_runs
from crondepot.scheduler.tick import tick
from tests.support.jobs import add_job, tenant

DAY = datetime(2026, 10, 5, tzinfo=UTC)
FINISHED = ("succeeded", "failed", "skipped", "cancelled")


def _run(conn: psycopg.Connection[Any], job_id: int, tenant_id: int, nominal: datetime, *,
         status: str = "queued", created: datetime | None = None, overlap: str = "allow",
         priority: str = "normal") -> str:
    """A run written as the tick names it, ``created`` its created_at (its nominal time by
    default), finished then when ``status`` is final."""
    run_id = f"{job_id}:{int(nominal.timestamp())}"
    created = created or nominal
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "available_at, status, created_at, finished_at, overlap) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (run_id, job_id, tenant_id, priority, nominal, nominal, nominal, status, created,
         created if status in (*FINISHED, "dead") else None, overlap))
    return run_id


def _where(conn: psycopg.Connection[Any], run_id: str) -> str | None:
    row = conn.execute("SELECT tableoid::regclass::text FROM runs WHERE run_id = %s",
                       (run_id,)).fetchone()
    return row[0] if row else None


def _days(conn: psycopg.Connection[Any]) -> list[str]:
    return [row[0] for row in conn.execute("SELECT name FROM crondepot_runs_partitions() "
                                           "ORDER BY lo")]


def test_a_fresh_database_is_partitioned_and_days_are_made_ahead_once(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    assert partitions.partitioned(conn) and _days(conn) == []
    made = partitions.make_ahead(conn, days=2, now=DAY + timedelta(hours=9))
    assert made == ["runs_p20261005", "runs_p20261006", "runs_p20261007"] == _days(conn)
    assert partitions.make_ahead(conn, days=2, now=DAY + timedelta(hours=9)) == []
    # The tick writes the day's fire into the day's partition, a week later into the default.
    job = add_job(conn, tenant_id, cron="0 9 * * *", key="emi")
    for day in (DAY, DAY + timedelta(days=7)):
        nine = day.replace(hour=9)
        conn.execute("UPDATE jobs SET next_nominal_at = %s, next_run_at = %s WHERE id = %s",
                     (nine, nine, job))
        tick(conn, batch=10, now=nine + timedelta(seconds=1))
    assert _where(conn, f"{job}:{int(DAY.replace(hour=9).timestamp())}") == "runs_p20261005"
    late = DAY.replace(hour=9) + timedelta(days=7)
    assert _where(conn, f"{job}:{int(late.timestamp())}") == "runs_default"
    # Its day is not made while the default holds a run of it: the run stays where it is.
    assert partitions.make_ahead(conn, days=1, now=late) == ["runs_p20261013"]
    assert _where(conn, f"{job}:{int(late.timestamp())}") == "runs_default"


def test_every_partition_has_its_own_key_guard_and_tenant_policy(
        conn: psycopg.Connection[Any]) -> None:
    partitions.make_ahead(conn, days=0, now=DAY)
    for part in ("runs_default", "runs_p20261005"):
        rows = conn.execute(
            "SELECT i.relname, x.indisunique FROM pg_index AS x "
            "JOIN pg_class AS i ON i.oid = x.indexrelid "
            "WHERE x.indrelid = %s::regclass ORDER BY 1", (part,)).fetchall()
        assert (f"{part}_pkey", True) in rows and (f"{part}_overlap_running", True) in rows
        assert (f"{part}_queued", False) in rows and len(rows) == 11, rows
        secured = conn.execute(
            "SELECT c.relrowsecurity, count(p.*) FROM pg_class AS c "
            "LEFT JOIN pg_policy AS p ON p.polrelid = c.oid "
            "WHERE c.oid = %s::regclass GROUP BY 1", (part,)).fetchone()
        assert secured == (True, 1)


def test_a_day_past_retention_goes_whole_and_its_kept_runs_move_to_the_default(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    partitions.make_ahead(conn, days=2, now=DAY)
    at = DAY + timedelta(hours=9)
    gone = _run(conn, 1, tenant_id, at, status="succeeded")
    conn.execute("INSERT INTO run_attempts (run_id, attempt, ended_at, outcome) "
                 "VALUES (%s, 1, %s, 'retried')", (gone, at))
    dead = _run(conn, 2, tenant_id, at, status="dead")
    queued = _run(conn, 3, tenant_id, at)
    later = _run(conn, 4, tenant_id, at, status="succeeded",       # a backfill, written late
                 created=DAY + timedelta(days=30, hours=12))
    conn.execute("INSERT INTO run_attempts (run_id, attempt, ended_at, outcome) "
                 "VALUES (%s, 1, %s, 'retried')", (later, at))
    next_day = _run(conn, 5, tenant_id, at + timedelta(days=1), status="succeeded")
    now = DAY + timedelta(days=31, hours=1)            # the cut-off: 1 October + 1 h

    retired = partitions.retire_ended(conn, timedelta(days=30), now=now)

    assert [(r.name, r.moved) for r in retired] == [("runs_p20261005", 3)]
    assert _days(conn) == ["runs_p20261006", "runs_p20261007"]
    assert _where(conn, gone) is None
    assert {_where(conn, r) for r in (dead, queued, later)} == {"runs_default"}
    assert _where(conn, next_day) == "runs_p20261006"
    attempts = conn.execute("SELECT run_id FROM run_attempts ORDER BY 1").fetchall()
    assert attempts == [(later,)]
    # The rows of the days left are not pruned one by one: the row prune stops at the
    # oldest day's start, and the late run moved out is not yet past retention.
    assert prune_cutoff(conn, timedelta(days=30), now) == DAY + timedelta(days=1)
    assert prune_finished_runs(conn, timedelta(days=30), now=now) == 0
    assert _where(conn, next_day) == "runs_p20261006"
    # Nothing more to retire at the same instant; a retired name asked for again is no error.
    assert partitions.retire_ended(conn, timedelta(days=30), now=now) == []


def test_a_day_not_yet_past_retention_is_refused(conn: psycopg.Connection[Any]) -> None:
    partitions.make_ahead(conn, days=0, now=DAY)
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="does not end before"):
        conn.execute("SELECT crondepot_runs_retire('runs_p20261005', %s)",
                     (DAY + timedelta(hours=23),))
    assert _days(conn) == ["runs_p20261005"]


def test_the_claim_takes_the_oldest_ready_runs_of_every_day_first(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    partitions.make_ahead(conn, days=2, now=DAY)
    ready = datetime.now(UTC) - timedelta(minutes=1)
    # Nine urgent runs, their nominal times in three partitions, ready a second apart in an
    # order that crosses them: the claim merges every partition's runs_queued copy.
    jobs = [add_job(conn, tenant_id, cron="0 9 * * *", key=f"k{n}", priority="urgent")
            for n in range(9)]
    ids = {job: _run(conn, job, tenant_id, DAY + timedelta(days=n % 3, hours=n),
                     priority="urgent") for n, job in enumerate(jobs)}
    conn.execute("UPDATE runs SET available_at = %s - make_interval(secs => job_id)", (ready,))
    oldest = sorted(jobs, reverse=True)
    claimed = claim_runs(conn, owner="w", shares={"urgent": 4}, lend=False)
    assert {r.run_id for r in claimed} == {ids[j] for j in oldest[:4]}
    assert len({_where(conn, ids[j]) for j in oldest[:4]}) == 3
    claimed = claim_runs(conn, owner="w", shares={"urgent": 9}, lend=False)
    assert {r.run_id for r in claimed} == {ids[j] for j in oldest[4:]}


def test_a_ruled_job_never_runs_twice_across_days(db_url: str) -> None:
    """Two runs of one `skip` job in two day partitions, claimed by two workers at once: the
    job's advisory lock and its running probe span the partitions (no unique index can)."""
    with connect(db_url) as conn:
        t = tenant(conn)
        partitions.make_ahead(conn, days=1, now=DAY)
        (job,) = conn.execute(
            "INSERT INTO jobs (tenant_id, key, cron, tz, priority, target, overlap, active) "
            "VALUES (%s, 'ruled', '* * * * *', 'UTC', 'normal', "
            "'{\"type\": \"python\", \"handler\": \"test.record\"}', 'skip', false) "
            "RETURNING id", (t,)).fetchone() or (0,)
        ids = [_run(conn, job, t, DAY + timedelta(days=d, hours=23, minutes=59), overlap="skip")
               for d in (0, 1)]
        conn.execute("UPDATE runs SET available_at = now() - interval '1 minute'")
    claimed: list[list[str]] = []
    go = threading.Barrier(2)

    def worker(name: str) -> None:
        with connect(db_url) as own:
            go.wait()
            claimed.append([r.run_id for r in claim_runs(own, owner=name,
                                                        shares={"normal": 1})])

    threads = [threading.Thread(target=worker, args=(f"w{n}",)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with connect(db_url) as conn:
        running = conn.execute("SELECT count(*) FROM runs WHERE status = 'running'").fetchone()
        assert running == (1,) and sum(len(c) for c in claimed) == 1, claimed
        assert {_where(conn, r) for r in ids} == {"runs_p20261005", "runs_p20261006"}


# -- The conversion of a database that had runs before migration 0040 ----------------------

@pytest.fixture
def one_table_url(empty_db_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A database migrated as the previous release left it (through 0039), with runs, then
    migrated to this release: 0040 leaves a runs that holds runs as one table."""
    every = migrations.available
    monkeypatch.setattr(migrations, "available",
                        lambda: [m for m in every() if m.version < 40])
    with connect(empty_db_url) as conn:
        migrations.migrate(conn)
        t = tenant(conn)
        conn.execute(
            "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
            "available_at, status, finished_at) "
            "SELECT g || ':' || extract(epoch FROM n)::bigint, g, %s, 'normal', n, n, n, "
            "       CASE WHEN g %% 4 = 0 THEN 'queued' ELSE 'succeeded' END, "
            "       CASE WHEN g %% 4 = 0 THEN NULL ELSE n END "
            "FROM generate_series(1, 2000) AS g, "
            "     LATERAL (SELECT now() - make_interval(mins => g)) AS x(n)", (t,))
    monkeypatch.setattr(migrations, "available", every)
    with connect(empty_db_url) as conn:
        assert [m.version for m in migrations.migrate(conn)][:1] == [40]
        assert not partitions.partitioned(conn)
    return empty_db_url


def _index_oids(conn: psycopg.Connection[Any], table: str) -> dict[str, int]:
    return {name.removeprefix(table): oid for name, oid in conn.execute(
        "SELECT c.relname, c.oid::bigint FROM pg_index AS x JOIN pg_class AS c "
        "ON c.oid = x.indexrelid WHERE x.indrelid = %s::regclass", (table,))}


def test_the_conversion_keeps_every_run_and_builds_no_index_while_the_tick_writes(
        one_table_url: str) -> None:
    with connect(one_table_url) as conn:
        before = _index_oids(conn, "runs")
        t = conn.execute("SELECT id FROM tenants LIMIT 1").fetchone()
        assert t is not None
        jobs = [add_job(conn, t[0], cron="* * * * *", key=f"k{n}") for n in range(50)]
    stop = threading.Event()
    errors: list[BaseException] = []
    ticks = [0]

    def writer() -> None:
        # The tick keeps writing runs, a minute of fires at a time, through the conversion.
        with connect(one_table_url) as own:
            minute = datetime.now(UTC).replace(second=0, microsecond=0)
            while not stop.is_set():
                minute += timedelta(minutes=1)
                own.execute("UPDATE jobs SET next_nominal_at = %s, next_run_at = %s "
                            "WHERE id = ANY(%s)", (minute, minute, jobs))
                try:
                    tick(own, batch=100, now=minute)
                    ticks[0] += 1
                except BaseException as exc:
                    errors.append(exc)
                    return

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        with connect(one_table_url) as owner:
            done = partitions.convert(owner)
            assert not done.already and done.history_until is not None
            written_at_switch = ticks[0]
            # A few more ticks after the switch, then stop.
            deadline = written_at_switch + 3
            while ticks[0] < deadline and not errors:
                stop.wait(0.05)
    finally:
        stop.set()
        thread.join()
    assert errors == [], errors
    with connect(one_table_url) as conn:
        assert partitions.partitioned(conn)
        after = _index_oids(conn, "runs_history")
        assert after == before            # every index adopted as it was: nothing built
        counts = conn.execute("SELECT tableoid::regclass::text, count(*) FROM runs "
                              "GROUP BY 1").fetchall()
        by_part = dict(counts)
        assert by_part.get("runs_history", 0) >= 2000
        total = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM runs").fetchone()
        assert total is not None and total[0] == total[1] == 2000 + 50 * ticks[0]
        # The tick's runs from the switch on go to the days the conversion made.
        assert set(by_part) <= {"runs_history", "runs_default", *done.made}
        # The runtime role's inserts still name no conflict target: a tick writes again.
        assert partitions.convert(conn).already


def test_a_conversion_that_finds_a_run_past_its_switch_changes_nothing(
        one_table_url: str) -> None:
    with connect(one_table_url) as conn:
        conn.execute("INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, "
                     "due_at, available_at) SELECT '9:1', 9, tenant_id, 'normal', "
                     "now() + interval '5 days', now(), now() FROM runs LIMIT 1")
        with pytest.raises(partitions.ConversionError, match="switch; nothing was changed"):
            partitions.convert(conn)
        assert not partitions.partitioned(conn)
        left = conn.execute("SELECT count(*) FROM pg_constraint "
                            "WHERE conname = 'runs_history_until'").fetchone()
        assert left == (0,)
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (2001,)
