"""Recording what happened to a claimed run, fenced by its lease token.

Each write names the state it expects ('running') and the token it holds. A write that
changes no row means the run is no longer ours (reaped after our lease expired, and maybe
claimed by another worker): ``LostLease`` is raised so the caller counts and logs it. It
never overwrites the new holder's state.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import orjson
import psycopg
from psycopg.types.json import Jsonb

from crondepot.base.errors import CrondepotError
from crondepot.base.jsontext import storable
from crondepot.db import Q
from crondepot.queue.lease import DEFAULT_MAX_LEASE_SECONDS
from crondepot.queue.retry import BASE_SECONDS, CAP_SECONDS

log = logging.getLogger("crondepot.worker")


class LostLease(CrondepotError):
    """The run's lease token no longer matches: another worker holds it, or it was reaped."""


def _fenced(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> None:
    if conn.execute(query, params).rowcount != 1:
        raise _lost(params["run_id"], params["token"])


def _lost(run_id: str, token: UUID) -> LostLease:
    return LostLease(f"run {run_id}: lease token {token} no longer holds the run; not "
                     "recording over its new state")


@dataclass(frozen=True, slots=True)
class Success:
    """A call that succeeded, to be recorded: the attempt and the token that fence it."""

    run_id: str
    token: UUID
    attempt: int
    result: dict[str, Any] | None = None


def record_successes(conn: psycopg.Connection[Any], successes: Sequence[Success]) -> set[str]:
    """Record many successes in one statement; the run ids recorded (the others lost their
    lease, and nothing was written for them)."""
    if not successes:
        return set()
    # One JSON document for the batch, written by orjson, instead of four arrays, which
    # psycopg would dump element by element in Python; the function unpacks it in SQL.
    batch = [{"run_id": s.run_id, "token": s.token, "attempt": s.attempt,
              "result": None if s.result is None else _stored_result(s)} for s in successes]
    rows = conn.execute(Q.record_successes, {"successes": Jsonb(batch, orjson.dumps)}).fetchall()
    return {run_id for (run_id,) in rows}


def _stored_result(success: Success) -> orjson.Fragment:
    """The result's JSON text, or a note saying why it could not be kept: a handler may
    return anything, and one result PostgreSQL refuses would fail the statement for every
    success recorded with it (each run would come back after its lease and be called
    again). The call succeeded either way; only the detail is lost."""
    try:
        return orjson.Fragment(storable(success.result))
    except ValueError as exc:
        log.warning("handler result not recorded: %s", exc, extra={"run_id": success.run_id})
        return orjson.Fragment(orjson.dumps({"unrecorded_result": str(exc)}))


def record_success(conn: psycopg.Connection[Any], run_id: str, token: UUID, attempt: int,
                   result: dict[str, Any] | None = None) -> None:
    if not record_successes(conn, [Success(run_id, token, attempt, result)]):
        raise _lost(run_id, token)


def record_retry(conn: psycopg.Connection[Any], run_id: str, token: UUID, *, error: str,
                 error_class: str, delay: float | None = None, jitter: float = 0.0,
                 at_least: float = 0.0,
                 max_lease_seconds: int = DEFAULT_MAX_LEASE_SECONDS) -> str:
    """Queue the run again after a fixed ``delay`` (seconds), or after ``retry_later``'s wait
    by the job's curve; or dead-letter it, or record it skipped, as ``retry_later`` says.
    Returns the status written: 'queued', 'dead' or 'skipped'."""
    if delay is not None:
        jitter, at_least = 0.0, delay
    status, _ = retry_later(conn, run_id, token, error=error, error_class=error_class,
                            jitter=jitter, at_least=at_least,
                            max_lease_seconds=max_lease_seconds)
    return status


def retry_later(conn: psycopg.Connection[Any], run_id: str, token: UUID, *, error: str,
                error_class: str, jitter: float, at_least: float = 0.0,
                max_lease_seconds: int = DEFAULT_MAX_LEASE_SECONDS) -> tuple[str, float]:
    """Queue the run again after ``jitter`` (in [0, 1)) of its job's retry curve for this
    attempt, or ``at_least`` seconds (a Retry-After) if longer: the wait is computed by the
    statement, from the job's curve as stored now (``retry.retry_wait``, the same formula).
    Or dead-letter it if its lease time in all has reached ``max_lease_seconds``; or record
    it skipped if the retry would come after its misfire deadline. Returns the status
    written ('queued', 'dead' or 'skipped') and the wait in seconds."""
    row = conn.execute(Q.record_retry, {
        "run_id": run_id, "token": token, "jitter": jitter, "at_least": at_least,
        "base_s": BASE_SECONDS, "cap_s": CAP_SECONDS, "error": error[:2000],
        "error_class": error_class, "max_lease": max_lease_seconds}).fetchone()
    if row is None:
        raise _lost(run_id, token)
    status, delay = row
    return str(status), float(delay)


def record_final_failure(conn: psycopg.Connection[Any], run_id: str, token: UUID, *,
                         status: str, error: str, error_class: str) -> None:
    assert status in ("failed", "dead")
    _fenced(conn, Q.record_final_failure, {"run_id": run_id, "token": token, "status": status,
                                           "error": error[:2000], "error_class": error_class})


def record_replaced(conn: psycopg.Connection[Any], run_id: str, token: UUID, *,
                    error: str) -> None:
    """overlap ``replace``: end a running run that a newer run of its job asked to give way,
    skipped 'replaced' (queries/queue.sql, record_replaced). Raises LostLease if the run
    is no longer ours."""
    _fenced(conn, Q.record_replaced, {"run_id": run_id, "token": token, "error": error[:2000]})


def release_run(conn: psycopg.Connection[Any], run_id: str, token: UUID) -> None:
    _fenced(conn, Q.release_run, {"run_id": run_id, "token": token})


def defer_run(conn: psycopg.Connection[Any], run_id: str, token: UUID,
              opening: datetime) -> None:
    """Give a claimed, not started run back to the queue, due at ``opening`` (its delivery
    window's next); the attempt does not count."""
    _fenced(conn, Q.defer_run, {"run_id": run_id, "token": token, "opening": opening})


def defer_queued_run(conn: psycopg.Connection[Any], run_id: str, opening: datetime) -> None:
    """Move a queued retry to ``opening`` if it was to come earlier (outside its window)."""
    conn.execute(Q.defer_queued_run, {"run_id": run_id, "opening": opening})


def skip_past_deadline(conn: psycopg.Connection[Any], run_id: str, token: UUID) -> bool:
    """Record a claimed run that was not called yet as skipped ('deadline_passed') if its
    misfire deadline has passed; True if it had (and the run is no longer held)."""
    return conn.execute(Q.skip_past_deadline, {"run_id": run_id, "token": token}
                        ).fetchone() is not None
