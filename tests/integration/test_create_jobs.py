"""create_jobs stores a batch the same way whether it is one INSERT or staged by COPY."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from crondepot.job import store
from crondepot.job.spec import JobSpec
from crondepot.job.store import COPY_AT_LEAST, create_jobs

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ROW = ("SELECT key, cron, tz, next_run_at, next_nominal_at, priority, active, target, payload,"
       " misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup, spread_seconds,"
       " spread_key, max_attempts, lease_seconds, rate_limit, paused, version, id - %s"
       " FROM jobs WHERE id BETWEEN %s AND %s ORDER BY id")


def _specs(prefix: str) -> list[JobSpec]:
    """Every kind of column value, a job without a key (no H field: that would hash on its
    id), and one key given twice (the first line wins, the second is 'existing')."""
    docs: list[dict[str, Any]] = [
        {"key": f"{prefix}:emi", "cron": "0 9 5 * *", "tz": "Asia/Kolkata",
         "target": {"type": "http", "url": "https://a.example/x", "timeout_s": 2.5,
                    "dedupes": True},
         "payload": {"account": 123456789012345678901234567890, "f": 1e-05, "s": "é"},
         "misfire": {"policy": "skip_after_local_time", "until": "20:00"},
         "spread": {"seconds": 1800, "key": "48213"}, "rate_limit": "sms"},
        {"cron": "*/7 9 * * *", "tz": "UTC", "target": {"type": "python", "handler": "a.b"},
         "misfire": {"policy": "skip_after", "seconds": 60}, "priority": "urgent",
         "catchup": "latest", "max_catchup": 5, "max_attempts": 3, "lease_seconds": 30},
        {"key": f"{prefix}:twice", "cron": "0 0 1 1 *", "tz": "Europe/London",
         "target": {"type": "python", "handler": "first"}},
        {"key": f"{prefix}:twice", "cron": "0 0 1 1 *", "tz": "Europe/London",
         "target": {"type": "python", "handler": "second"}},
        {"key": f"{prefix}:gone", "cron": "0 0 29 2 *", "tz": "UTC",
         "target": {"type": "python", "handler": "a.b"}, "active": False},
    ]
    return [JobSpec.from_document(d) for d in docs]


def _stored(conn: psycopg.Connection[Any], first_id: int,
            last_id: int) -> list[tuple[Any, ...]]:
    rows = conn.execute(ROW, (first_id, first_id, last_id)).fetchall()
    return [tuple(v.replace("copy", "one") if isinstance(v, str) else v for v in r)
            for r in rows]


def test_copy_and_insert_store_the_same_rows(conn: psycopg.Connection[Any],
                                             tenant_id: int) -> None:
    small = create_jobs(conn, tenant_id, _specs("one"), now=NOW)
    assert len(small) < COPY_AT_LEAST
    filler = [JobSpec.from_document({"key": f"fill:{n}", "cron": "0 9 * * *", "tz": "UTC",
                                     "target": {"type": "python", "handler": "a.b"}})
              for n in range(COPY_AT_LEAST)]
    large = create_jobs(conn, tenant_id, _specs("copy") + filler, now=NOW)
    assert [j.created for j in small] == [j.created for j in large[:5]] == \
        [True, True, True, False, True]
    one = _stored(conn, small[0].id, small[-1].id)
    copied = _stored(conn, large[0].id, large[4].id)
    assert len(one) == 4 and copied == one      # same values, order and offsets between ids
    assert conn.execute("SELECT target->>'handler' FROM jobs WHERE key = 'copy:twice'"
                        ).fetchone() == ("first",)
    assert conn.execute("SELECT payload->>'account' FROM jobs WHERE key = 'copy:emi'"
                        ).fetchone() == ("123456789012345678901234567890",)


def test_two_copied_batches_in_one_transaction_store_each_job_once(
        conn: psycopg.Connection[Any], tenant_id: int) -> None:
    # The staging table is emptied at commit: the second batch must not insert the first's
    # rows again.
    def batch(start: int) -> list[JobSpec]:
        return [JobSpec.from_document({"cron": "0 9 * * *", "tz": "UTC",
                                       "target": {"type": "python", "handler": "a.b"},
                                       "payload": {"n": n}})
                for n in range(start, start + COPY_AT_LEAST)]

    with conn.transaction():
        first = create_jobs(conn, tenant_id, batch(0))
        second = create_jobs(conn, tenant_id, batch(COPY_AT_LEAST))
    assert all(j.created for j in first + second)
    assert conn.execute("SELECT count(*), count(DISTINCT payload) FROM jobs").fetchone() == \
        (2 * COPY_AT_LEAST, 2 * COPY_AT_LEAST)


@pytest.mark.parametrize("count", [COPY_AT_LEAST - 1, COPY_AT_LEAST])
def test_existing_keys_are_reported_by_either_path(conn: psycopg.Connection[Any],
                                                   tenant_id: int, count: int) -> None:
    specs = [JobSpec.from_document({"key": f"k{n}", "cron": "0 9 * * *", "tz": "UTC",
                                    "target": {"type": "python", "handler": "a.b"}})
             for n in range(count)]
    assert all(j.created for j in create_jobs(conn, tenant_id, specs))
    again = store.create_jobs(conn, tenant_id, specs)
    assert not any(j.created for j in again)
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (count,)
