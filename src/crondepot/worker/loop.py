"""The worker process: claim runs for free slots, run them, keep their leases alive.

Threads, not asyncio: a slot spends its life waiting on a target (HTTP, a handler that may
block), and psycopg and httpx are both thread-safe, so one thread per slot is the simplest
thing that keeps 20 calls in flight. The main thread claims; a heartbeat thread renews.

- Slots: ``concurrency`` in all, ``urgent_only`` of them reserved for urgent runs, so a
  morning of bulk work never traps an urgent run behind it.
- Claims are batched: one statement claims for all free slots, in the weighted order. A busy
  worker waits a few milliseconds for a quarter of its slots to free before claiming, so
  claims stay large when runs finish one by one.
- Successes go to one writer thread that records them together (``outcome_writer``): one commit
  for many runs.
- Idle, the worker waits on ``LISTEN crondepot_runs`` (the scheduler notifies on commit), with
  a poll interval as the fallback (retries become available without a notification).
- It stands for election as the maintenance leader (``crondepot.maintenance``): the one
  elected process returns runs whose lease expired to the queue, prunes old runs, and
  checks the ledger; the others only claim and call.
- SIGTERM/SIGINT: stop claiming; runs not yet started are released at once (the attempt
  does not count); calls in progress get ``grace_seconds`` to finish; then exit, abandoning
  any call still running (its run comes back after its lease, as after a kill).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.types.json import set_json_loads

from crondepot.base.jsontext import loads_stored
from crondepot.db import ALL_TENANTS, Pool, Q, bounded, connect, idle_check
from crondepot.db.connect import POOLED_CONNECTION, check_pooled, pooled
from crondepot.job.guard import AddressGuard
from crondepot.limits.buckets import RateLimiter
from crondepot.maintenance import Maintainer, MaintenanceConfig
from crondepot.queue import (
    LostLease,
    WeightedOrder,
    WindowedTenants,
    claim_runs,
    claimed_windows,
    release_run,
)
from crondepot.queue.lease import (
    DEFAULT_MAX_LEASE_SECONDS,
    Deadline,
    HeldLease,
    extend_acquired_leases,
)
from crondepot.runtime import metrics, tracing
from crondepot.runtime.lifecycle import Stoppable, TurnErrors
from crondepot.worker.execute import Attempt, Executor
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.slots import Slots
from crondepot.worker.targets import AbandonedCalls, check_tls_environment
from crondepot.worker.targets.base import DEFAULT_MAX_ABANDONED

if TYPE_CHECKING:
    from crondepot.worker.targets.http import WebhookTarget

log = logging.getLogger("crondepot.worker")

CLAIM_GATHER_SECONDS = 0.005
MAX_IN_HAND_FACTOR = 2      # runs in hand (calling or being recorded) per slot, at most


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerConfig:
    url: str
    # A transaction-mode pooler's URL for the pool of claims, heartbeats and outcomes (None:
    # ``url``); LISTEN and maintenance keep ``url`` (db/connect.py).
    pooled_url: str | None = None
    concurrency: int = 20
    urgent_only: int = 4
    weights: tuple[int, int, int] = (6, 3, 1)
    poll_seconds: float = 1.0
    heartbeat_seconds: float = 5.0
    grace_seconds: float = 30.0
    max_lease_seconds: int = DEFAULT_MAX_LEASE_SECONDS
    # Sync handler calls abandoned at their timeout and still running at which the worker
    # drains and restarts itself (worker/targets/base.py, AbandonedCalls).
    max_abandoned: int = DEFAULT_MAX_ABANDONED
    name: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # The maintenance services' settings, should this process be elected to run them
    # (None: the defaults, with this worker's database and max lease).
    maintenance: MaintenanceConfig | None = None


def _configure_connection(conn: psycopg.Connection[Any]) -> None:
    # Every claimed run carries two jsonb documents (target, payload), decoded by the same
    # reader as every stored job document (exact where orjson is, the standard library
    # where it is not).
    set_json_loads(loads_stored, context=conn)
    # And four timestamps, which psycopg converts to the session's time zone: directly for
    # 'UTC', through zoneinfo for any other name (such as 'Etc/UTC'). The worker only takes
    # differences of these instants and writes them out with their offset, so the zone it
    # reads them in changes nothing else.
    conn.execute("SET TimeZone = 'UTC'")


def _configure_pooled_connection(conn: psycopg.Connection[Any]) -> None:
    # TimeZone is one of the parameters PgBouncer keeps per client and sets again on each
    # server connection it lends, so the SET above holds through the pooler too.
    check_pooled(conn)
    _configure_connection(conn)


class Worker(Stoppable):
    def __init__(self, config: WorkerConfig, guard: AddressGuard | None = None) -> None:
        super().__init__()
        if not 0 <= config.urgent_only < config.concurrency:
            raise ValueError(f"urgent-only slots: expected 0 to {config.concurrency - 1}, got "
                             f"{config.urgent_only}")
        self.config = config
        self._done = threading.Event()
        self._slot_freed = threading.Event()
        self._beat_sooner = threading.Event()    # a claim needs the next heartbeat earlier
        self._lock = threading.Lock()
        self._next_beat = float("inf")           # monotonic; under _lock
        self._free = {"urgent": config.urgent_only,
                      "general": config.concurrency - config.urgent_only}
        self._held: dict[str, Attempt] = {}
        self._order = WeightedOrder(config.weights)
        self._windowed = WindowedTenants()     # tenants with a delivery window, cached
        self.abandoned = 0        # calls still running when the grace period ended
        self.restart_wanted = False   # too many hung handler threads: the CLI starts afresh
        self._hung = AbandonedCalls(config.max_abandoned)
        if config.pooled_url:
            conninfo, kwargs = pooled(config.pooled_url), dict(POOLED_CONNECTION)
            configure = _configure_pooled_connection
        else:
            conninfo, kwargs = bounded(config.url, tenants=ALL_TENANTS), {"autocommit": True}
            configure = _configure_connection
        self._pool = Pool(conninfo, min_size=2, max_size=min(config.concurrency, 10) + 2,
                          kwargs={**kwargs, "application_name": "crondepot-worker"},
                          configure=configure, **idle_check(), open=False)
        # Read now, so that a bad CRONDEPOT_TARGET_ALLOWLIST or CA setting stops the worker at
        # start; the HTTP client itself is made for the first HTTP run (_open_webhooks).
        self._guard = guard or AddressGuard.from_env()
        check_tls_environment()
        self._webhooks: WebhookTarget | None = None
        self._outcomes = OutcomeWriter(self._pool)
        self._executor = Executor(self._pool, self._outcomes, RateLimiter(self._pool),
                                  self._open_webhooks, stopping=self._stop.is_set,
                                  max_lease_seconds=config.max_lease_seconds,
                                  abandoned=self._hung)
        # Claim once this many slots are free (or after CLAIM_GATHER_SECONDS): a claim costs a
        # round trip whatever its size, and no-op runs free their slots one by one.
        self._claim_batch = max(1, config.concurrency // 4)
        self._maintainer = Maintainer(
            config.maintenance or MaintenanceConfig(
                url=config.url, name="worker", max_lease_seconds=config.max_lease_seconds),
            self._stop)

    def _open_webhooks(self) -> WebhookTarget:
        # Called once, by the executor's HTTP target, for the first HTTP run.
        from crondepot.worker.targets.http import WebhookTarget

        self._webhooks = WebhookTarget(self._guard, slots=self.config.concurrency)
        return self._webhooks

    def busy_slots(self) -> int:
        # Read without the lock: a gauge sampled at scrape time may be a moment old.
        return self.config.concurrency - self._free["urgent"] - self._free["general"]

    def run(self) -> None:
        # The gauge asks at scrape time: no per-run update from every slot thread.
        metrics.slots_busy.set_function(self.busy_slots)
        self._pool.open(wait=True, timeout=60)
        self._outcomes.start()
        slots: Slots[Attempt] = Slots(self.config.concurrency, self._execute)
        heartbeat = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        heartbeat.start()
        self._maintainer.start()
        log.info("worker started", extra={"worker": self.config.name,
                                          "concurrency": self.config.concurrency,
                                          "urgent_only": self.config.urgent_only})
        try:
            self._claim_loop(slots)
        finally:
            self._shutdown(slots)
            self._outcomes.close(timeout=5)
            self._done.set()
            self._beat_sooner.set()
            heartbeat.join(timeout=5)
            self._maintainer.join()
            self._executor.close()
            if self._webhooks is not None:
                self._webhooks.close()
            self._pool.close()
            log.info("worker stopped", extra={"worker": self.config.name})

    # -- claiming ---------------------------------------------------------------------------

    def _claim_loop(self, slots: Slots[Attempt]) -> None:
        listener: psycopg.Connection[Any] | None = None
        errors = TurnErrors(log, "claim", metrics.worker_claim_errors)
        while not self._stop.is_set():
            try:
                if listener is None or listener.closed:
                    listener = connect(self.config.url,
                                       application_name="crondepot-worker-listen")
                    listener.execute(Q.listen_runs_queued)
                claimed, free_general, free_urgent = self._claim_for_free_slots(slots)
                errors.reset()
                if claimed:
                    continue
                if free_general == 0:
                    # Judged on the counts the claim saw: a slot freed since then has set
                    # _slot_freed (cleared under the same lock), so this wait returns at once.
                    # Idle urgent-only slots must not put the worker to sleep until the next
                    # NOTIFY while runs of other priorities wait for general slots to free.
                    self._slot_freed.wait(0.05 if free_urgent else 0.5)
                else:
                    # Inside the try: an idle worker learns of a database restart here,
                    # from its LISTEN connection, and must back off, not exit.
                    self._wait_for_runs(listener)
            except Exception as exc:   # any error: counted, logged, retried (TurnErrors)
                wait = errors.wait_after(exc)
                if listener is not None:
                    with contextlib.suppress(psycopg.Error):
                        listener.close()
                listener = None
                self._stop.wait(wait)
        if listener is not None:
            with contextlib.suppress(psycopg.Error):
                listener.close()

    def _wait_for_runs(self, listener: psycopg.Connection[Any]) -> None:
        deadline = time.monotonic() + self.config.poll_seconds
        while not self._stop.is_set() and time.monotonic() < deadline:
            for _ in listener.notifies(timeout=min(0.25, deadline - time.monotonic()),
                                       stop_after=1):
                return

    def _claim_for_free_slots(self, slots: Slots[Attempt]) -> tuple[int, int, int]:
        """Claim for every free slot; (runs claimed, free general and urgent-only slots
        seen)."""
        self._gather_free_slots()
        with self._lock:
            free_urgent, free_general = self._free["urgent"], self._free["general"]
            # Successes waiting for the outcome writer are still in hand; a database that
            # takes claims but not writes must not let them pile up without bound.
            room = max(0, MAX_IN_HAND_FACTOR * self.config.concurrency - len(self._held))
            free_general = min(free_general, room)
            free_urgent = min(free_urgent, room - free_general)
            self._slot_freed.clear()
        if not free_urgent + free_general:
            return 0, 0, 0
        seen = (free_general, free_urgent)
        sent_at = time.monotonic()   # the lease is counted from here: before the database's now
        sent_ns = time.time_ns()
        with self._pool.connection() as conn:
            runs = claim_runs(conn, owner=self.config.name, urgent_only=free_urgent,
                              shares=self._order.take(free_general) if free_general else {})
            # the delivery windows of the claimed runs' jobs, checked before each call; only
            # for tenants with a window somewhere (most claims make no look-up)
            windows = claimed_windows(conn, self._windowed.runs_to_check(conn, runs)) \
                if runs else {}
        if not runs:
            return 0, *seen
        # the claim's span, which each run's attempt links to (runtime/tracing.py)
        claim = tracing.claimed(self.config.name, sent_ns, [run.run_id for run in runs]) \
            if tracing.enabled() else None
        # Urgent runs fill the urgent-only slots first; everything else takes general slots.
        claimed: list[tuple[Attempt, str]] = []
        for run in runs:
            slot = "general"
            if run.priority == "urgent" and free_urgent:
                free_urgent -= 1
                slot = "urgent"
            deadline = Deadline.from_lease(run.lease_expires_at, run.db_now, sent_at)
            claimed.append((Attempt(run=run, deadline=deadline, claimed_at=sent_at,
                                    window=windows.get(run.job_id), claim=claim), slot))
        metrics.claim_size.observe(len(claimed))
        # One lock and one gauge update for the whole claim, then one task per run.
        shortest = min(attempt.run.lease_seconds for attempt, _ in claimed)
        beat_by = sent_at + self._beat_interval(shortest)
        with self._lock:
            for attempt, slot in claimed:
                self._free[slot] -= 1
                self._held[attempt.run.run_id] = attempt
            # An idle worker's heartbeat sleeps a full --heartbeat interval; these leases may
            # need renewing before it wakes (a 5 s lease against a 5 s interval, say).
            sooner = beat_by < self._next_beat
            if sooner:
                self._next_beat = beat_by
        if sooner:
            self._beat_sooner.set()
        for attempt, slot in claimed:
            slots.submit(attempt, slot)
        return len(claimed), *seen

    def _gather_free_slots(self) -> None:
        """While runs are in hand, wait briefly until a claim's worth of slots is free. An
        idle worker (nothing in hand) claims at once: that is the latency path."""
        until = time.monotonic() + CLAIM_GATHER_SECONDS
        while True:
            with self._lock:
                free = self._free["urgent"] + self._free["general"]
                if free >= self._claim_batch or not self._held:
                    return
                self._slot_freed.clear()
            left = until - time.monotonic()
            if left <= 0 or self._stop.is_set():
                return
            self._slot_freed.wait(left)

    def _execute(self, attempt: Attempt, slot: str) -> None:
        recording = False
        try:
            outcome = self._executor.run(attempt, lambda: self._forget(attempt))
            recording = outcome == "recording"
            if outcome == "not-started" and not attempt.lost:
                self._release(attempt)
        except Exception:
            log.exception("slot failed", extra={"run_id": attempt.run.run_id})
        finally:
            # The slot is free once the call is over; a success being recorded keeps its run
            # in hand (heartbeats, shutdown) until the writer is done with it.
            attempt.call_over = True
            with self._lock:
                self._free[slot] += 1
                if not recording:
                    self._held.pop(attempt.run.run_id, None)
                self._signal_slot_freed()

    def _forget(self, attempt: Attempt) -> None:
        with self._lock:
            self._held.pop(attempt.run.run_id, None)
            self._signal_slot_freed()   # in-hand room for a claim may have been the limit

    def _signal_slot_freed(self) -> None:
        # Called under self._lock, as every clear() is, so is_set() is exact here and a set
        # that is already set (most of them while the worker is busy) costs no Condition.
        if not self._slot_freed.is_set():
            self._slot_freed.set()

    def _release(self, attempt: Attempt) -> None:
        try:
            with self._pool.connection() as conn:
                release_run(conn, attempt.run.run_id, attempt.run.lease_token)
        except LostLease:
            metrics.stale_writes.inc()
        except psycopg.Error as exc:
            log.warning("could not release run (its lease will expire): %s", exc,
                        extra={"run_id": attempt.run.run_id})

    # -- leases -----------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        # Runs until the worker is done, not merely stopping: calls finishing during the
        # grace period still need their leases renewed. It sleeps until the next beat is due;
        # a claim whose leases need an earlier beat moves that time and wakes it.
        self._announce()
        with self._lock:
            self._next_beat = time.monotonic() + self._heartbeat_interval()
        while not self._done.is_set():
            with self._lock:
                wait = self._next_beat - time.monotonic()
            if wait > 0:
                self._beat_sooner.wait(wait)
                self._beat_sooner.clear()
                continue
            self._heartbeat()
            self._announce()
            self._check_hung_handlers()
            with self._lock:
                self._next_beat = time.monotonic() + self._heartbeat_interval()
        self._announce(stopped=True)

    def _check_hung_handlers(self) -> None:
        running = self._hung.running()
        metrics.handler_threads_running.set(running)
        if running >= self._hung.limit and not self._stop.is_set():
            log.error("%d handler calls abandoned at their timeout are still running (limit "
                      "%d): draining, then restarting this worker", running, self._hung.limit)
            self.restart_wanted = True
            self.stop()

    def _announce(self, *, stopped: bool = False) -> None:
        """Tell the workers table we are alive (or gone), for operators and metrics."""
        with self._lock:
            busy = len(self._held)
        try:
            with self._pool.connection() as conn:
                if stopped:
                    conn.execute(Q.worker_stopped, {"name": self.config.name})
                else:
                    conn.execute(Q.worker_beat, {
                        "name": self.config.name, "host": socket.gethostname(),
                        "pid": os.getpid(), "concurrency": self.config.concurrency,
                        "busy": busy})
        except psycopg.Error as exc:
            log.warning("could not record worker heartbeat: %s", exc)

    def _heartbeat_interval(self) -> float:
        """The configured interval, but at least three beats per lease of any run in hand.
        Called under ``_lock``."""
        shortest = min((a.run.lease_seconds for a in self._held.values()), default=None)
        if shortest is None:
            return self.config.heartbeat_seconds
        return self._beat_interval(shortest)

    def _beat_interval(self, lease_seconds: float) -> float:
        return max(0.2, min(self.config.heartbeat_seconds, lease_seconds / 3))

    def _heartbeat(self) -> None:
        with self._lock:
            attempts = list(self._held.values())
        if not attempts:
            return
        held = [HeldLease(a.run.run_id, a.run.lease_token, a.run.lease_seconds)
                for a in attempts]
        try:
            with self._pool.connection() as conn:
                renewed = extend_acquired_leases(
                    conn, held, max_lease_seconds=self.config.max_lease_seconds)
        except psycopg.Error as exc:
            log.warning("heartbeat failed: %s", exc)
            return
        with self._lock:
            # A call that is over waits only for its outcome's write, which is fenced by the
            # lease token and reports a lost lease itself; one written while this renewal
            # was in flight (or waiting on the write's row locks) is no longer running, so
            # it was not renewed, and that is not a lost lease.
            still_held = [a for a in attempts
                          if self._held.get(a.run.run_id) is a and not a.call_over]
        for attempt in still_held:
            deadline = renewed.get(attempt.run.run_id)
            if deadline is not None:
                attempt.deadline = deadline
                if deadline.replace_requested and not attempt.cancel.requested:
                    # overlap replace: a newer run of the job waits for this one's turn.
                    # The call is given up where its target can (execute.py records it);
                    # the lease stays renewed until the outcome is written.
                    log.info("heartbeat: run replaced by a newer run of its job",
                             extra={"run_id": attempt.run.run_id})
                    attempt.cancel.request()
            elif not attempt.lost:
                attempt.lost = True
                metrics.stale_writes.inc()
                log.warning("heartbeat: lease lost", extra={"run_id": attempt.run.run_id})

    # -- shutdown ---------------------------------------------------------------------------

    def _shutdown(self, slots: Slots[Attempt]) -> None:
        """Runs not started are released by their slots (stopping is set); calls in progress
        get the grace period, with their leases renewed and their successes recorded. A call
        still running after it is abandoned: the process exits, the run's lease expires, and
        the run is called again with the same id (a target that dedupes sees one effect)."""
        deadline = time.monotonic() + self.config.grace_seconds
        while time.monotonic() < deadline:
            with self._lock:
                if not self._held:
                    break
            time.sleep(0.05)
        with self._lock:
            # Successes waiting for the outcome writer are still held, but their calls are
            # over: the writer records them when it closes.
            abandoned = sorted(run_id for run_id, attempt in self._held.items()
                               if not attempt.call_over)
        self.abandoned = len(abandoned)
        if abandoned:
            metrics.calls_abandoned.inc(len(abandoned))
            log.warning("grace period over: abandoning %d calls in progress; their runs come "
                        "back when their leases expire", len(abandoned),
                        extra={"run_ids": abandoned[:20]})
        slots.shutdown()
