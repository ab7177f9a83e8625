"""The scheduler process: ticks in a loop, sleeps until the next due job, survives outages.

Any number of copies run this loop against one database; the claim's row locks keep them
apart, so there is no leader and nothing to fail over. The loop
- drains: while a tick's batch comes back full, it ticks again at once, each batch twice
  the last, from ``FIRST_BATCH`` up to ``--batch`` (small first ticks commit the first
  runs of a burst within milliseconds), and half the last when a tick took longer than
  ``TICK_TARGET_SECONDS`` (an urgent job that falls due during a tick waits for its end);
- sleeps until the earliest due job or the tick interval, whichever is sooner, and wakes at
  once on ``NOTIFY crondepot_jobs`` (a new or changed job);
- survives the database going away: the error is logged and counted, connections are
  dropped, and it reconnects with capped, jittered backoff;
- on SIGTERM/SIGINT finishes the tick in hand (the transaction commits or rolls back whole)
  and exits;
- stands for election as the maintenance leader (``crondepot.maintenance``), as every
  worker does: the one elected process reaps expired leases, prunes old runs and checks the
  ledger (the result goes to ``ledger_checks``, whence the metric
  ``crondepot_fires_unaccounted`` is served).
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from crondepot.db import ALL_TENANTS, Q, connect
from crondepot.db.connect import connect_pooled
from crondepot.maintenance import Maintainer, MaintenanceConfig
from crondepot.runtime import metrics, tracing
from crondepot.runtime.lifecycle import Stoppable, TurnErrors
from crondepot.scheduler.tick import TickResult, tick

log = logging.getLogger("crondepot.scheduler")

_MIN_WAIT = 0.05   # jobs still due after a short batch are locked by another copy
# A drain's first tick claims this many jobs (or --batch, if smaller), and each full tick
# after it twice as many, up to --batch. A tick's runs become visible when it commits, so
# the first runs of a burst wait for the whole first tick: a small one commits them soon,
# while the other copies, woken at the same instant, take the next slices in parallel
# (SKIP LOCKED); a large burst still reaches --batch after a few doublings.
FIRST_BATCH = 100
# How long a full tick should take at most. Urgent jobs are claimed first (tick.py), but one
# that falls due while a copy writes a batch of a burst waits for that tick to commit, so a
# tick's length bounds that wait. Ticks slower than this halve the next batch (down to
# FIRST_BATCH); ticks under half of it double it, up to --batch.
TICK_TARGET_SECONDS = 0.25


def next_batch(batch: int, took: float, most: int) -> int:
    """The batch after a full tick of ``batch`` jobs that took ``took`` seconds."""
    if took > TICK_TARGET_SECONDS:
        return max(min(FIRST_BATCH, most), batch // 2)
    if took < TICK_TARGET_SECONDS / 2:
        return min(batch * 2, most)
    return batch


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    url: str
    # A transaction-mode pooler's URL for the ticks (None: ``url``); the LISTEN connection
    # and maintenance keep ``url`` (db/connect.py).
    pooled_url: str | None = None
    tick_seconds: float = 2.0
    batch: int = 2000
    name: str = "scheduler"
    # The maintenance services' settings, should this copy be elected to run them (None:
    # the defaults, with this copy's database).
    maintenance: MaintenanceConfig | None = None


class Scheduler(Stoppable):
    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__()
        self.config = config
        self._conn: psycopg.Connection[Any] | None = None
        self._listener: psycopg.Connection[Any] | None = None

    def run(self) -> None:
        errors = TurnErrors(log, "tick", metrics.scheduler_errors)
        log.info("scheduler started", extra={"batch": self.config.batch,
                                             "tick_seconds": self.config.tick_seconds})
        maintainer = Maintainer(self.config.maintenance or MaintenanceConfig(
            url=self.config.url, name=self.config.name), self._stop)
        maintainer.start()
        while not self._stop.is_set():
            try:
                self._connect()
                self._cycle()
                errors.reset()
            except Exception as exc:   # any error: counted, logged, retried (TurnErrors)
                wait = errors.wait_after(exc)
                self._disconnect()
                self._stop.wait(wait)
        self._disconnect()
        maintainer.join()
        log.info("scheduler stopped")

    def _cycle(self) -> None:
        """Drain what is due, then wait for the next due job or a change."""
        assert self._conn is not None
        batch = min(FIRST_BATCH, self.config.batch)
        while not self._stop.is_set():
            started, started_ns = time.perf_counter(), time.time_ns()
            result = tick(self._conn, batch=batch)
            took = time.perf_counter() - started
            self._observe(result, took)
            if result.claimed:
                self._trace(result, started_ns)
            if not result.full:
                break
            batch = next_batch(batch, took, self.config.batch)
        if not self._stop.is_set():
            self._wait(self._seconds_until_due())

    def _seconds_until_due(self) -> float:
        assert self._conn is not None
        row = self._conn.execute(Q.seconds_until_next_due, {"now": None}).fetchone()
        until = row[0] if row and row[0] is not None else self.config.tick_seconds
        return max(_MIN_WAIT, min(float(until), self.config.tick_seconds))

    def _wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``, waking early for NOTIFY crondepot_jobs or a stop."""
        assert self._listener is not None
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            # Short slices so a SIGTERM is noticed promptly even without a notification.
            for _ in self._listener.notifies(timeout=min(left, 0.5), stop_after=1):
                return

    def _observe(self, result: TickResult, seconds: float) -> None:
        metrics.tick_duration.observe(seconds)
        metrics.jobs_claimed.observe(result.claimed)
        metrics.runs_written.observe(result.written)
        metrics.scheduler_last_tick.set_to_current_time()
        if result.unreadable:
            metrics.scheduler_unreadable_jobs.inc(len(result.unreadable))
        if result.groups and result.now is not None:
            self._observe_runs(result)
        if result.claimed:
            log.debug("tick", extra={"claimed": result.claimed, "written": result.written,
                                     "inserted": result.inserted,
                                     "seconds": round(seconds, 4)})

    def _trace(self, result: TickResult, started_ns: int) -> None:
        """The tick's span and its runs' roots (runtime/tracing.py): nothing while off."""
        if tracing.enabled():
            tracing.ticked(self.config.name, started_ns,
                           {"claimed": result.claimed, "written": result.written,
                            "inserted": result.inserted},
                           ((run.run_id, run.skip_reason)
                            for group in result.groups for run in group.runs()))

    def _observe_runs(self, result: TickResult) -> None:
        """Counts and enqueue delays, a group of jobs at a time: a group's runs share their
        due times, so a burst's 2,000 runs a tick are a few additions, not 2,000 lookups."""
        assert result.now is not None
        deferred = 0
        for group in result.groups:
            members = len(group.job_ids)
            for run in group.plan.runs:
                if run.skip_reason is not None:
                    metrics.runs_skipped.labels(run.skip_reason).inc(members)
                    continue
                metrics.runs_created.labels(group.priority).inc(members)
                if run.deferred:     # due at its window's opening, not late by now - due
                    deferred += members
                    continue
                histogram = metrics.enqueue_delay.labels(group.priority)
                delay = (result.now - run.due_at).total_seconds()
                for _ in range(members):
                    histogram.observe(delay)
        if deferred:
            metrics.runs_deferred.labels("scheduler").inc(deferred)

    def _connect(self) -> None:
        if self._conn is None or self._conn.closed:
            name = f"crondepot-{self.config.name}"
            self._conn = (connect_pooled(self.config.pooled_url, application_name=name)
                          if self.config.pooled_url else
                          connect(self.config.url, application_name=name, tenants=ALL_TENANTS))
        if self._listener is None or self._listener.closed:
            self._listener = connect(self.config.url,
                                     application_name=f"crondepot-{self.config.name}-listen")
            self._listener.execute(Q.listen_jobs_changed)

    def _disconnect(self) -> None:
        for conn in (self._conn, self._listener):
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
        self._conn = self._listener = None
