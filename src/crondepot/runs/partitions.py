"""Partitions of ``runs`` (migration 0040; docs/operations.md, "Partitions of runs").

``runs`` is partitioned by range of ``nominal_at``, a partition a UTC day. The maintenance
leader makes the days ahead (``make_ahead``) and drops a day whole once retention has passed
its end (``retire_ended``), after moving out the runs the row pruner would keep. A database
whose ``runs`` is still one table (it had runs when migration 0040 came) is converted
online by ``convert`` (``crondepot db partition-runs``): the table becomes the history
partition, behind a CHECK validated while writes go on, so that no step reads it under a
lock that stops them.

Every DDL statement here waits at most ``LOCK_TIMEOUT_MS`` for its lock: while it waits,
every query of ``runs`` queues behind it, so a busy moment costs a later turn, not a stall.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.db import Q
from crondepot.runs.retention import retention_cutoff

log = logging.getLogger("crondepot.runs")

DAYS_AHEAD = 7          # days made ahead: a week of maintenance outage costs nothing
LOCK_TIMEOUT_MS = 500   # a DDL statement's longest wait for the parent's lock
CONVERT_ATTEMPTS = 40   # the conversion's brief-lock steps: tries, half a second apart


class ConversionError(CrondepotError):
    """The conversion could not be made; nothing of it is left behind."""


@dataclass(frozen=True, slots=True)
class Retired:
    name: str
    moved: int          # runs the row pruner would keep, moved to runs_default first
    estimated: int      # runs in it by the last ANALYZE (dropped with it, less ``moved``)


@dataclass(slots=True)
class Conversion:
    already: bool                       # runs was partitioned before
    history_until: datetime | None = None
    validate_seconds: float = 0.0       # the read of every run, writes going on
    attach_seconds: float = 0.0         # the step under the lock
    made: list[str] = field(default_factory=list)


def partitioned(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(Q.runs_partitioned).fetchone()
    return bool(row and row[0])


def make_ahead(conn: psycopg.Connection[Any], *, days: int = DAYS_AHEAD,
               now: datetime | None = None) -> list[str]:
    """Make the day partitions from ``now``'s UTC day (the database clock's by default) to
    ``days`` later that do not exist; return their names. Nothing on a one-table ``runs``."""
    if not partitioned(conn):
        return []
    with conn.transaction():
        conn.execute(Q.runs_lock_timeout, {"ms": LOCK_TIMEOUT_MS})
        made = [row[0] for row in conn.execute(Q.runs_partitions_ahead,
                                               {"now": now, "days": days})]
    if made:
        log.info("runs partitions made ahead: %s", ", ".join(made))
    return made


def retire_ended(conn: psycopg.Connection[Any], keep: timedelta, *,
                 now: datetime | None = None) -> list[Retired]:
    """Drop every partition whose end is ``keep`` or more before ``now``, one transaction
    each, oldest first; stop at one whose lock is busy (the next turn goes on from it)."""
    cutoff = retention_cutoff(conn, keep, now)
    names = [row[0] for row in conn.execute(Q.runs_partitions_ended, {"cutoff": cutoff})]
    done: list[Retired] = []
    for name in names:
        try:
            with conn.transaction():
                conn.execute(Q.runs_lock_timeout, {"ms": LOCK_TIMEOUT_MS})
                row = conn.execute(Q.runs_partition_retire,
                                   {"name": name, "cutoff": cutoff}).fetchone()
        except psycopg.errors.LockNotAvailable:
            log.info("runs partition %s: its lock was busy; retired at a later turn", name)
            break
        except psycopg.errors.UndefinedTable:
            continue            # dropped between the list and the lock by another leader
        assert row is not None
        done.append(Retired(name=name, moved=row[0], estimated=row[1]))
        log.info("runs partition %s retired: ~%d runs dropped, %d kept (moved to "
                 "runs_default)", name, max(row[1] - row[0], 0), row[0])
    return done


def convert(conn: psycopg.Connection[Any], *, now: datetime | None = None,
            attempts: int = CONVERT_ATTEMPTS) -> Conversion:
    """Partition a one-table ``runs`` online. ``conn``: the schema owner's, autocommit.

    1. A CHECK that every run is before the switch (the UTC day after tomorrow), NOT VALID:
       a moment's lock.
    2. Its validation: reads every run, under a lock that lets the writes go on.
    3. The table renamed runs_history and attached to a new partitioned ``runs`` for every
       nominal time before the switch; the CHECK proves the attach needs no read, and its
       indexes are adopted, not built (migration 0040, crondepot_runs_partition). A moment's
       lock again.
    Then the days from today are made (those before the switch are the history's). Every
    process must run this release first (docs/operations.md, "Upgrading"): an earlier one
    writes ``ON CONFLICT (run_id)``, which a partitioned ``runs`` refuses.
    """
    if not conn.autocommit:
        raise ValueError("convert() needs an autocommit connection")
    conn.execute(Q.lock_migrations)
    try:
        if partitioned(conn):
            return Conversion(already=True)
        row = conn.execute(Q.runs_history_switch, {"now": now}).fetchone()
        assert row is not None
        until: datetime = row[0]
        _briefly(conn, attempts, lambda: (conn.execute(Q.runs_history_unmark),
                                          conn.execute(Q.runs_history_mark, {"until": until})))
        # From here until the attach, a failure takes the CHECK away again: left behind, it
        # would refuse every run of the switch's day. (A kill leaves it: running the
        # command again drops it first.)
        try:
            started = time.monotonic()
            try:
                conn.execute(Q.runs_history_validate)
            except psycopg.errors.CheckViolation as exc:
                raise ConversionError(
                    f"runs holds runs at or after {until.isoformat()}, the conversion's "
                    "switch; nothing was changed") from exc
            validated = time.monotonic() - started
            started = time.monotonic()
            _briefly(conn, attempts, lambda: conn.execute(Q.runs_partition, {"until": until}))
            attached = time.monotonic() - started
        except BaseException:
            _briefly(conn, attempts, lambda: conn.execute(Q.runs_history_unmark))
            raise
        made = make_ahead(conn, now=now)
        return Conversion(already=False, history_until=until, validate_seconds=validated,
                          attach_seconds=attached, made=made)
    finally:
        conn.execute(Q.unlock_migrations)


def _briefly(conn: psycopg.Connection[Any], attempts: int,
             step: Callable[[], object]) -> None:
    """Run ``step`` in a transaction of its own whose locks wait at most LOCK_TIMEOUT_MS;
    try again half a second later while the lock is busy."""
    for attempt in range(attempts):
        try:
            with conn.transaction():
                conn.execute(Q.runs_lock_timeout, {"ms": LOCK_TIMEOUT_MS})
                step()
            return
        except psycopg.errors.LockNotAvailable:
            if attempt + 1 == attempts:
                raise ConversionError(
                    f"the lock of runs stayed busy for {attempts} tries; nothing of this "
                    "step was changed: run it again at a quieter moment") from None
            time.sleep(0.5)
