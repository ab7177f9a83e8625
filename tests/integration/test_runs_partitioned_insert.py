"""Every insert of runs keeps a fire to one row on `runs` partitioned by nominal time too.

The inserts name no conflict target (queries/tick.sql, insert_runs): on a partitioned `runs`
no index on run_id alone can be unique on the parent, so ``ON CONFLICT (run_id)`` would be
an error there. Here a test database's `runs` is turned into that layout by hand, the old
table attached as the history partition, a day partition and a default beside it, each
with its own primary key on run_id, and the tick, a manual trigger and a backfill are each
run twice over the same fires; the ledger check reads them there.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from crondepot.job.store import trigger_job
from crondepot.runs.backfill import backfill
from crondepot.scheduler.ledger import verify
from crondepot.scheduler.tick import tick
from tests.integration.test_ledger import add, drain
from tests.support.jobs import add_job

DAY = datetime(2026, 10, 5, tzinfo=UTC)


def _partition_runs(conn: psycopg.Connection[Any]) -> None:
    conn.execute("""
        ALTER TABLE runs RENAME TO runs_flat;
        CREATE TABLE runs (LIKE runs_flat INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
            PARTITION BY RANGE (nominal_at);
        ALTER TABLE runs ATTACH PARTITION runs_flat
            FOR VALUES FROM (MINVALUE) TO ('2026-10-01 00:00+00');
        CREATE TABLE runs_day PARTITION OF runs
            FOR VALUES FROM ('2026-10-05 00:00+00') TO ('2026-10-06 00:00+00');
        ALTER TABLE runs_day ADD PRIMARY KEY (run_id);
        CREATE TABLE runs_rest PARTITION OF runs DEFAULT;
        ALTER TABLE runs_rest ADD PRIMARY KEY (run_id);
    """)


def _rows(conn: psycopg.Connection[Any], job_id: int) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in conn.execute(
        "SELECT run_id, tableoid::regclass::text FROM runs WHERE job_id = %s ORDER BY run_id",
        (job_id,))]


def test_the_tick_trigger_and_backfill_write_a_fire_once_on_partitions(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    _partition_runs(conn)
    nine = DAY.replace(hour=9)
    ticked = add_job(conn, tenant_id, cron="0 9 * * *", key="emi")
    for second in (1, 2):       # the advance lost between the two: the same fire again
        conn.execute("UPDATE jobs SET next_nominal_at = %s, next_run_at = %s WHERE id = %s",
                     (nine, nine, ticked))
        tick(conn, batch=10, now=nine + timedelta(seconds=second))
    assert _rows(conn, ticked) == [(f"{ticked}:{int(nine.timestamp())}", "runs_day")]

    triggered = add_job(conn, tenant_id, cron="0 3 1 1 *", key="manual")
    at = nine + timedelta(minutes=5, microseconds=250_000)
    first = trigger_job(conn, tenant_id, triggered, now=at)
    again = trigger_job(conn, tenant_id, triggered, now=at + timedelta(microseconds=500_000))
    assert (first.created, again.created, first.run_id) == (True, False, again.run_id)
    assert [p for _, p in _rows(conn, triggered)] == ["runs_day"]

    # The scheduler wrote 08:10 .. 09:00; two rows lost, the backfill writes them once.
    ten = add(conn, tenant_id, DAY.replace(hour=8), cron="*/10 * * * *")
    drain(conn, nine)
    lost = [DAY.replace(hour=8, minute=20), DAY.replace(hour=8, minute=40)]
    conn.execute("DELETE FROM runs WHERE job_id = %s AND nominal_at = ANY(%s)", (ten, lost))
    written = backfill(conn, tenant_id, ten, since=DAY.replace(hour=8), until=nine,
                       now=nine + timedelta(minutes=5))
    repeated = backfill(conn, tenant_id, ten, since=DAY.replace(hour=8), until=nine,
                        now=nine + timedelta(minutes=6))
    assert (len(written.written), len(repeated.written), repeated.had_row) == (2, 0, 5)
    rows = _rows(conn, ten)
    assert len(rows) == 6 and {p for _, p in rows} == {"runs_day"}, rows
    report = verify(conn, since=DAY.replace(hour=8), until=nine,
                    now=nine + timedelta(minutes=7))
    assert not report.unaccounted and not report.duplicated_count, report.document()
