"""One attempt of one run: call its target, classify the result, record the outcome.

The order matters:
1. refuse, as a permanent failure, a run whose tenant may no longer use its handler or its
   rate limit (a grant revoked after the run was queued; the tenant's grants are cached for
   a few seconds, crondepot.tenancy.grants.GrantCache), or whose limit does not exist;
2. wait for a rate-limit token if the job names a limit (waiting never fails the run; but a
   run that waited long is checked against its misfire deadline again, and recorded
   skipped if it passed meanwhile: "never after noon" holds for a slow rate limit too);
3. refuse to start the call if our lease deadline has passed (we may no longer own the run:
   another worker may be calling it right now); give the run back, due at the next opening,
   if its job's delivery window is closed now (before the rate-limit wait and after it);
4. call the target through its kind's ``Target`` (worker/targets/: http, python), passing
   the run id as the idempotency key (and, to a handler, the tenant's name), with the
   attempt's ``Cancellation`` current (overlap ``replace``: the heartbeat requests it when a
   newer run of the job asks this one to give way);
5. record the outcome, fenced by the lease token; a refused write is counted and logged. A
   call given up for a newer run (an async handler cancelled, an HTTP call abandoned) is
   recorded skipped 'replaced'; one that could not be (a sync handler) is recorded as it
   ended, with why it was not given up.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

import psycopg
from psycopg_pool import ConnectionPool

from crondepot.base.errors import PermanentError, TargetError, TemporaryError
from crondepot.db import UNAVAILABLE, Q
from crondepot.limits.buckets import HOLD_SECONDS, RateLimiter, UnknownLimit
from crondepot.queue import (
    ClaimedRun,
    LostLease,
    Success,
    defer_queued_run,
    defer_run,
    record_final_failure,
    record_replaced,
    retry_later,
    skip_past_deadline,
)
from crondepot.queue.claim import deadline_passed
from crondepot.queue.lease import DEFAULT_MAX_LEASE_SECONDS, Deadline
from crondepot.queue.retry import decide
from crondepot.runtime import metrics, tracing
from crondepot.runtime.lifecycle import Backoff
from crondepot.tenancy.connections import ConnectionUrls
from crondepot.tenancy.grants import GrantCache, run_refusal
from crondepot.timetable.delivery import DeliveryWindow
from crondepot.worker.handlers import UnknownHandler
from crondepot.worker.outcome_writer import OutcomeWriter
from crondepot.worker.targets import AbandonedCalls, OutcomeUnknown, Targets, default_targets
from crondepot.worker.targets.base import CallReplaced, Cancellation, calling
from crondepot.worker.webhook_keys import SigningKeys, fetch_from

if TYPE_CHECKING:
    from crondepot.worker.targets.http import WebhookTarget

log = logging.getLogger("crondepot.worker")

Kind = Literal["temporary", "permanent", "unknown"]
# What an outcome write returns: a retry's status and wait, a status, or nothing.
Written = tuple[str, float] | str | None
LOGGED_OUTCOMES = {"retry": "retried", "failed": "failed", "dead": "dead"}
RECORD_TRIES = 12           # about 40 s of backoff for a retry or failure write
# A run that waited this long for a rate-limit token has its misfire deadline checked again
# before the call (one fenced statement; the claim checked it when it was taken).
DEADLINE_RECHECK_AFTER = 1.0


@dataclass
class Attempt:
    run: ClaimedRun
    deadline: Deadline
    lost: bool = False            # set by the heartbeat when the lease was not renewed
    started: bool = False         # the target call has begun
    call_over: bool = False       # its slot is done with it (a success may await the writer)
    # the job's delivery window and zone (queue.claimed_windows); None: no window
    window: tuple[DeliveryWindow, str] | None = None
    claimed_at: float = 0.0       # monotonic time the claim was sent (run.db_now is its answer)
    # requested by the heartbeat when a newer run of the job asks this one to give way
    cancel: Cancellation = field(default_factory=Cancellation)
    # the span context of the claim that took the run (tracing.claimed); None while off
    claim: Any = None

    def db_now(self) -> datetime:
        """The database's clock now, from the claim's answer: ahead of it by at most the
        claim's way there (timed from the send), so a run is held back a few milliseconds
        early at a window's closing, never sent after it."""
        return self.run.db_now + timedelta(seconds=time.monotonic() - self.claimed_at)


class Executor:
    def __init__(self, pool: ConnectionPool, outcomes: OutcomeWriter, limiter: RateLimiter,
                 webhooks: WebhookTarget | Callable[[], WebhookTarget], *,
                 stopping: Callable[[], bool],
                 max_lease_seconds: int = DEFAULT_MAX_LEASE_SECONDS,
                 grants: GrantCache | None = None,
                 signing_keys: SigningKeys | None = None,
                 targets: Targets | None = None,
                 abandoned: AbandonedCalls | None = None) -> None:
        self._pool = pool
        self._grants = grants or GrantCache(pool)
        self._max_lease_seconds = max_lease_seconds
        self._outcomes = outcomes
        self._limiter = limiter
        # A factory is called for the first HTTP run (the worker's: a worker whose jobs only
        # call handlers never loads the HTTP client).
        self._targets = targets or default_targets(
            webhooks if callable(webhooks) else lambda: webhooks,
            signing_keys or SigningKeys(fetch_from(pool)), abandoned,
            ConnectionUrls(pool).url)
        self._stopping = stopping

    def close(self) -> None:
        """Close the targets' broker connections (at worker stop, once no slot calls)."""
        self._targets.close()

    def run(self, attempt: Attempt,
            recorded: Callable[[], None]) -> Literal["done", "not-started", "recording"]:
        """Call the target and record the outcome. A success is handed to the outcome writer
        ("recording"): ``recorded`` is called once it is written (or known unwritable). The
        other outcomes are written before this returns, and ``recorded`` is not called.

        The attempt's span (runtime/tracing.py) is current in this thread meanwhile, so the
        call's and the outcome's spans are its children; it ends with the outcome's write."""
        run = attempt.run
        span = tracing.attempt(run.run_id, run.attempt, attempt.claim, _span_fields(run)) \
            if tracing.enabled() else tracing.NOOP
        with span:
            try:
                outcome = self._attempt(attempt, span.then(recorded))
            except BaseException:
                span.end()
                raise
            if outcome != "recording":
                span.set("crondepot.started", attempt.started)
                span.end()
        return outcome

    def _attempt(self, attempt: Attempt,
                 recorded: Callable[[], None]) -> Literal["done", "not-started", "recording"]:
        run = attempt.run
        try:
            uses = self._grants.get(run.tenant_id)
        except UNAVAILABLE as exc:
            # No view of the tenant's grants and no database to read one: the run goes
            # back to the queue (or comes back after its lease), never called unchecked.
            log.warning("grants unavailable, run not started: %s", exc, extra=_fields(run))
            return "not-started"
        refused: PermanentError | None = run_refusal(run.target, run.rate_limit, uses)
        # before a rate-limit token is taken for a run that cannot go now, and again after
        # the wait, which may have run past closing
        if refused is None and attempt.window is not None and self._outside_window(attempt):
            return "done"
        try:
            if refused is None and not self._ready_to_call(attempt):
                return "not-started"
        except UnknownLimit as exc:
            refused = exc
        if refused is not None:
            self._refuse(run, refused)
            return "done"
        if attempt.window is not None and self._outside_window(attempt):
            return "done"
        if attempt.cancel.requested:      # replaced while it waited for a token: not called
            self._replaced(run, "given way before its call started: a newer run of the job "
                                "replaced it (overlap replace)")
            return "done"
        attempt.started = True
        began = time.perf_counter()
        kind: Kind | None = None
        retry_after: float | None = None
        error: BaseException | None = None
        result: dict[str, Any] | None = None
        try:
            with calling(attempt.cancel), tracing.call(run.run_id, run.target) as call:
                result = self._targets.call(run, uses.tenant)
                if result and "status_code" in result:
                    call.set("http.response.status_code", result["status_code"])
        except CallReplaced as exc:
            self._replaced(run, str(exc), took=time.perf_counter() - began)
            return "done"
        except OutcomeUnknown as exc:
            kind, error = "unknown", exc
        except PermanentError as exc:
            kind, error = "permanent", exc
        except TemporaryError as exc:
            kind, error, retry_after = "temporary", exc, exc.retry_after_seconds
        except UnknownHandler as exc:
            kind, error = "temporary", exc     # another worker may have the handler
        except Exception as exc:  # a handler's bug: retried, never silently dropped
            kind, error = "temporary", exc
            log.warning("handler raised %s", type(exc).__name__,
                        extra=_fields(run) | {"trace": traceback.format_exc(limit=5)})
        took = time.perf_counter() - began
        cancel = attempt.cancel
        failure_note = ""
        if cancel.acted is not None and error is not None:
            # the target gave the call up (an HTTP call's connection shut down): the error
            # is that, not the target's answer
            self._replaced(run, f"{cancel.acted}; the call ended {type(error).__name__}: "
                                f"{error}", took=took)
            return "done"
        if cancel.requested:
            # asked to give way, but the call ended as it would have: say why
            note = cancel.note or "the call ended before it could be given up"
            log.info("run %s not replaced: %s", run.run_id, note, extra=_fields(run))
            if error is None:
                result = (result or {}) | {"replace": f"not replaced: {note}"}
            else:
                failure_note = f" (replace asked; not replaced: {note})"
        if kind is None or error is None:
            code = result.get("status_code") if result else None
            # Counted by the outcome writer's one thread as it takes the success: these
            # metrics' locks, taken from every slot thread for every run, were about a tenth
            # of a busy worker's Python (py-spy --gil, no-op runs, 100 slots).
            self._record_success(run, result, recorded,
                                 lambda: _count_attempt(run, "ok", code, took))
            return "recording"
        else:
            code = error.status_code if isinstance(error, TargetError) else None
            _count_attempt(run, kind, code, took)
            self._record_failure(run, kind, error, retry_after, attempt.window,
                                 note=failure_note)
        return "done"

    def _replaced(self, run: ClaimedRun, why: str, *, took: float | None = None) -> None:
        """overlap ``replace``: record the run skipped 'replaced' (its slot and its job's
        turn are free: the waiting run is claimed next). ``took``: the call's time, if one
        was made (counted as an attempt, outcome replaced)."""
        if took is not None:
            _count_attempt(run, "replaced", None, took)
        log.info("run %s replaced: %s", run.run_id, why, extra=_fields(run))
        self._record(run, lambda conn: _replaced_written(conn, run, why), "skipped")

    def _ready_to_call(self, attempt: Attempt) -> bool:
        """Take a rate-limit token if the job names a limit, then check the lease. A token
        that went stale while this thread waited to run is not used: another is taken, so
        calls never bunch above the limit."""
        limit = attempt.run.rate_limit
        waited_from = time.monotonic()
        while True:
            taken_at = time.monotonic()
            if limit:
                taken = self._limiter.acquire(
                    limit, give_up=lambda: self._must_not_start(attempt))
                if taken is None:
                    return False
                taken_at = taken
            if self._must_not_start(attempt):
                return False
            if taken_at - waited_from >= DEADLINE_RECHECK_AFTER and self._past_deadline(attempt):
                return False
            if time.monotonic() - taken_at <= HOLD_SECONDS:
                return True

    def _past_deadline(self, attempt: Attempt) -> bool:
        """Record the run skipped if its misfire deadline passed while it waited; True if
        so (the run is no longer ours to call or release)."""
        run = attempt.run
        try:
            with self._pool.connection() as conn:
                skipped = skip_past_deadline(conn, run.run_id, run.lease_token)
        except psycopg.Error as exc:    # cannot tell: the lease and the claim's check stand
            log.warning("could not check the misfire deadline: %s", exc, extra=_fields(run))
            return False
        if skipped:
            attempt.lost = True
            deadline_passed(run.run_id, run.job_id, run.tenant_id, when="it waited for a "
                                                                      "rate-limit token")
        return skipped

    def _outside_window(self, attempt: Attempt) -> bool:
        """Give the run back, due at its window's next opening, if its window is closed now
        (a backlog that ran past closing, a retry that came due after it); True if so. The
        attempt does not count. Checked after the rate-limit wait, just before the call."""
        assert attempt.window is not None
        window, tz = attempt.window
        opening = window.opening(attempt.db_now(), tz)
        if opening is None:
            return False
        run = attempt.run
        try:
            with self._pool.connection() as conn:
                defer_run(conn, run.run_id, run.lease_token, opening)
        except LostLease:
            metrics.stale_writes.inc()
        except psycopg.Error as exc:   # not called either way: it comes back after its lease
            log.warning("could not defer the run to its window: %s", exc, extra=_fields(run))
        attempt.lost = True            # no longer ours to call or release
        metrics.labelled(metrics.runs_deferred, "worker").inc()
        log.info("run %s outside its delivery window, deferred to %s", run.run_id,
                 opening.isoformat(), extra=_fields(run))
        return True

    def _must_not_start(self, attempt: Attempt) -> bool:
        if attempt.lost or attempt.deadline.passed():
            if not attempt.lost:
                metrics.calls_not_started.inc()
                log.warning("lease deadline passed before the call; not calling",
                            extra=_fields(attempt.run))
            attempt.lost = True
            return True
        return self._stopping()

    def _refuse(self, run: ClaimedRun, error: PermanentError) -> None:
        """Fail a run without calling its target: it is not the tenant's to make."""
        # no line of its own: the failure's WARNING line says why (one line per run)
        self._record_failure(run, "permanent", error, None)

    def _record_failure(self, run: ClaimedRun, kind: Kind, error: BaseException,
                        retry_after: float | None,
                        window: tuple[DeliveryWindow, str] | None = None, *,
                        note: str = "") -> None:
        decision = decide(kind=kind, attempt=run.attempt, max_attempts=run.max_attempts,
                          retry_after=retry_after)
        message = f"{decision.reason}: {error}" if str(error) else decision.reason
        message += note
        error_class = type(error).__name__
        logged = f"{error_class}: {message}"
        if decision.action == "retry":
            metrics.retries.inc()
            # The wait is the job's curve at this jitter, computed by the statement that
            # records the retry (the job's retry.base_s and cap_s are not in the claim).
            def retry(conn: Any) -> Written:
                written = retry_later(
                    conn, run.run_id, run.lease_token, jitter=decision.jitter,
                    at_least=decision.at_least, error=message, error_class=error_class,
                    max_lease_seconds=self._max_lease_seconds)
                if window is not None and written[0] == "queued":
                    _retry_in_window(conn, run, window, written[1])
                return written
            self._record(run, retry, "retry", error=logged,
                when=lambda delay: f" (attempt {run.attempt} of {run.max_attempts}, again "
                                   f"in {delay:.1f} s)")
        else:
            status = "failed" if decision.action == "fail" else "dead"
            self._record(run, lambda conn: record_final_failure(
                conn, run.run_id, run.lease_token, status=status, error=message,
                error_class=error_class), status, error=logged)

    def _record_success(self, run: ClaimedRun, result: dict[str, Any] | None,
                        then: Callable[[], None], count: Callable[[], None]) -> None:
        span = tracing.outcome(run.run_id)      # ended by the writer's thread

        def done(recorded: bool, error: BaseException | None) -> None:
            if error is not None:
                span.end("not recorded")
                log.warning("success not recorded; the run comes back after its lease: %s",
                            error, extra=_fields(run))
            else:
                span.end("succeeded" if recorded else "lease lost")
                self._finished(run, "succeeded", recorded=recorded)
            then()

        self._outcomes.submit(Success(run.run_id, run.lease_token, run.attempt, result), done,
                              count=count)

    def _record(self, run: ClaimedRun, write: Callable[[Any], Written], outcome: str, *,
                error: str | None = None, when: Callable[[float], str] | None = None) -> None:
        """Write a retry or a final failure. A database that is briefly away (a restart, a
        pooled connection that died with it) is waited out: a "dead, outcome unknown" that
        is never written would bring the run back after its lease and call the target a
        second time. The run stays in hand meanwhile, so its lease is renewed."""
        span = tracing.outcome(run.run_id)
        try:
            recorded = self._write_outcome(run, write, outcome, error, when)
        except BaseException:
            span.end("not recorded")
            raise
        span.end(recorded)

    def _write_outcome(self, run: ClaimedRun, write: Callable[[Any], Written], outcome: str,
                       error: str | None, when: Callable[[float], str] | None) -> str:
        """``_record``'s writes; the outcome recorded, or "lease lost"."""
        backoff = Backoff(first=0.2, cap=5.0)
        for tries_left in range(RECORD_TRIES - 1, -1, -1):
            try:
                written = self._write(write)
            except LostLease:
                self._finished(run, outcome, recorded=False)
                return "lease lost"
            except UNAVAILABLE as exc:
                if not tries_left:
                    raise
                wait = backoff.next()
                log.warning("could not record the outcome, retrying in %.1fs: %s", wait, exc,
                            extra=_fields(run) | {"outcome": outcome})
                time.sleep(wait)
                continue
            # a retry writes its status and the wait it computed; a failure, its status
            status, delay = written if isinstance(written, tuple) else (written, 0.0)
            if status == "skipped":         # a retry would have come after the deadline
                deadline_passed(run.run_id, run.job_id, run.tenant_id, when="retried")
                outcome = "skipped"
            elif status == "dead":           # a retry, but the run's lease time is used up
                outcome, error = "dead", f"lease time cap reached; last error {error}"
            elif outcome == "retry" and error is not None and when is not None:
                error += when(delay)         # when it comes back
            self._finished(run, outcome, recorded=True, error=error)
            return outcome
        raise AssertionError("unreachable: the last try returns or raises")

    def _write(self, write: Callable[[Any], Written]) -> Written:
        with self._pool.connection() as conn:
            return write(conn)

    @staticmethod
    def _finished(run: ClaimedRun, outcome: str, *, recorded: bool,
                  error: str | None = None) -> None:
        if not recorded:
            metrics.stale_writes.inc()
            log.warning("outcome not recorded: the run's lease was lost",
                        extra=_fields(run) | {"outcome": outcome})
            return
        metrics.labelled(metrics.runs_finished, outcome).inc()
        if outcome in LOGGED_OUTCOMES:
            # One WARNING line per failed, retried or dead run, with what an operator greps
            # for. The job key came with the claim: no query for it.
            log.warning("run %s %s: job %s: %s", run.run_id, LOGGED_OUTCOMES[outcome],
                        run.job_key or run.job_id, error or "no error text",
                        extra=_fields(run) | {"outcome": outcome, "job_key": run.job_key})
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("run finished", extra=_fields(run) | {"outcome": outcome})


def _retry_in_window(conn: Any, run: ClaimedRun, window: tuple[DeliveryWindow, str],
                     delay: float) -> None:
    """A retry due outside the job's delivery window waits for its next opening. The
    database's now: the retry's own statement has just read it (one more round trip only
    for runs with a window)."""
    try:
        (now,) = conn.execute(Q.db_now, {"now": None}).fetchone()
        opening = window[0].opening(now + timedelta(seconds=delay), window[1])
        if opening is not None:
            defer_queued_run(conn, run.run_id, opening)
    except psycopg.Error as exc:
        # the retry is recorded: writing it again would find the lease gone. Unmoved, the
        # run is given back to the opening by the worker that claims it (the guard).
        log.warning("retry not moved to its delivery window: %s", exc, extra=_fields(run))


def _replaced_written(conn: Any, run: ClaimedRun, why: str) -> Written:
    record_replaced(conn, run.run_id, run.lease_token, error=why)
    metrics.labelled(metrics.runs_skipped, "replaced").inc()
    return "replaced"


def _count_attempt(run: ClaimedRun, kind: str, code: Any, took: float) -> None:
    """The metrics of one target call: its start lag (a first attempt's), duration and
    outcome."""
    if run.attempt == 1:
        metrics.labelled(metrics.start_lag, run.priority).observe(
            max(0.0, (run.db_now - run.due_at).total_seconds()))
    metrics.labelled(metrics.target_duration, run.target.get("type", "?")).observe(took)
    metrics.labelled(metrics.attempts, kind, _status_class(code)).inc()


def _status_class(code: Any) -> str:
    return f"{code // 100}xx" if isinstance(code, int) else "none"


def _span_fields(run: ClaimedRun) -> dict[str, Any]:
    """An attempt span's attributes besides the run id and the attempt (ids, not names)."""
    return {"crondepot.job_id": run.job_id, "crondepot.tenant_id": run.tenant_id,
            "crondepot.target.type": str(run.target.get("type")),
            "crondepot.priority": run.priority}


def _fields(run: ClaimedRun) -> dict[str, Any]:
    return {"run_id": run.run_id, "job_id": run.job_id, "attempt": run.attempt,
            "tenant_id": run.tenant_id}

