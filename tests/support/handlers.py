"""Handlers for worker tests. Each call is written to the ``test_calls`` table of the
database in $CRONDEPOT_TEST_CALLS_URL, so a test counts calls per run id across processes."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import psycopg

from crondepot import PermanentError, TemporaryError
from crondepot.worker.handlers import RunContext, handler

_local = threading.local()


def _conn() -> psycopg.Connection[Any]:
    conn = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["CRONDEPOT_TEST_CALLS_URL"], autocommit=True)
        _local.conn = conn
    return conn


def _record(run: RunContext) -> None:
    # Stamped when the call starts (what a gateway would see), not when this insert gets
    # through to a busy database.
    started = time.time()
    _conn().execute("INSERT INTO test_calls (run_id, attempt, pid, at, tenant) "
                    "VALUES (%s, %s, %s, to_timestamp(%s), %s)",
                    (run.run_id, run.attempt, os.getpid(), started, run.tenant))


@handler("test.record")
def record(run: RunContext) -> None:
    _record(run)
    time.sleep(float(run.payload.get("sleep", 0)))


@handler("test.fail")
def fail(run: RunContext) -> None:
    _record(run)
    if run.payload.get("permanent"):
        raise PermanentError("invalid number")
    raise TemporaryError("gateway said 503")


@handler("test.async")
async def record_async(run: RunContext) -> None:
    import asyncio

    await asyncio.sleep(0.01)
    _record(run)


@handler("test.async_blocking")
async def record_async_blocking(run: RunContext) -> None:
    """Blocks in asyncio's default executor: a thread the interpreter waits for at exit."""
    import asyncio

    _record(run)
    await asyncio.to_thread(time.sleep, float(run.payload.get("sleep", 0)))


@handler("test.async_sleep")
async def sleep_async(run: RunContext) -> None:
    """Records the call, sleeps the payload's ``sleep`` seconds, then records it again
    (attempt -1): a second row says the sleep was not cancelled."""
    import asyncio

    _record(run)
    await asyncio.sleep(float(run.payload.get("sleep", 0)))
    _conn().execute("INSERT INTO test_calls (run_id, attempt, pid) VALUES (%s, -1, %s)",
                    (run.run_id, os.getpid()))


@handler("test.overlap_slow")
async def overlap_slow(run: RunContext) -> None:
    """Records the call's start (its attempt) and end (minus its attempt), stamped with the
    time: a test reads from them which calls of a job overlapped. Sleeps the payload's
    ``sleep`` seconds, or $CRONDEPOT_TEST_SLOW_SECONDS when the worker has it (a worker the
    test will SIGKILL mid-call)."""
    import asyncio

    _record(run)
    await asyncio.sleep(float(os.environ.get("CRONDEPOT_TEST_SLOW_SECONDS")
                              or run.payload.get("sleep", 0)))
    _conn().execute("INSERT INTO test_calls (run_id, attempt, pid, at, tenant) "
                    "VALUES (%s, %s, %s, to_timestamp(%s), %s)",
                    (run.run_id, -run.attempt, os.getpid(), time.time(), run.tenant))


@handler("test.replace_async")
async def replace_async(run: RunContext) -> None:
    """overlap replace: records the call's start (its attempt), sleeps the payload's
    ``sleep`` seconds, and records its end (minus its attempt); cancelled, it records
    attempt 0 ("saw CancelledError") and lets the cancellation through."""
    import asyncio

    _record(run)
    try:
        await asyncio.sleep(float(run.payload.get("sleep", 0)))
    except asyncio.CancelledError:
        _conn().execute("INSERT INTO test_calls (run_id, attempt, pid, at, tenant) "
                        "VALUES (%s, 0, %s, to_timestamp(%s), %s)",
                        (run.run_id, os.getpid(), time.time(), run.tenant))
        raise
    _conn().execute("INSERT INTO test_calls (run_id, attempt, pid, at, tenant) "
                    "VALUES (%s, %s, %s, to_timestamp(%s), %s)",
                    (run.run_id, -run.attempt, os.getpid(), time.time(), run.tenant))


@handler("test.replace_sync")
def replace_sync(run: RunContext) -> None:
    """overlap replace, a sync handler (cannot be cancelled): records its start and end as
    test.replace_async does."""
    _record(run)
    time.sleep(float(run.payload.get("sleep", 0)))
    _conn().execute("INSERT INTO test_calls (run_id, attempt, pid, at, tenant) "
                    "VALUES (%s, %s, %s, to_timestamp(%s), %s)",
                    (run.run_id, -run.attempt, os.getpid(), time.time(), run.tenant))
