"""Recording what happened to a claimed run, fenced by its lease token.

Each write names the state it expects ('running') and the token it holds. A write that
changes no row means the run is no longer ours (reaped after our lease expired, and maybe
claimed by another worker): ``LostLease`` is raised so the caller counts and logs it. It
never overwrites the new holder's state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from crondepot.db import Q
from crondepot.errors import CrondepotError


class LostLease(CrondepotError):
    """The run's lease token no longer matches: another worker holds it, or it was reaped."""


def _fenced(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> None:
    if conn.execute(query, params).rowcount != 1:
        raise LostLease(f"run {params['run_id']}: lease token {params['token']} no longer "
                        "holds the run; not recording over its new state")


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
    rows = conn.execute(Q.record_successes, {
        "run_ids": [s.run_id for s in successes], "tokens": [s.token for s in successes],
        "attempts": [s.attempt for s in successes],
        "results": [Jsonb(s.result) if s.result is not None else None for s in successes],
    }).fetchall()
    return {run_id for (run_id,) in rows}


def record_success(conn: psycopg.Connection[Any], run_id: str, token: UUID, attempt: int,
                   result: dict[str, Any] | None = None) -> None:
    if not record_successes(conn, [Success(run_id, token, attempt, result)]):
        raise LostLease(f"run {run_id}: lease token {token} no longer holds the run; not "
                        "recording over its new state")


def record_retry(conn: psycopg.Connection[Any], run_id: str, token: UUID, *, delay: float,
                 error: str, error_class: str) -> None:
    _fenced(conn, Q.record_retry, {"run_id": run_id, "token": token, "delay": delay,
                                   "error": error[:2000], "error_class": error_class})


def record_final_failure(conn: psycopg.Connection[Any], run_id: str, token: UUID, *,
                         status: str, error: str, error_class: str) -> None:
    assert status in ("failed", "dead")
    _fenced(conn, Q.record_final_failure, {"run_id": run_id, "token": token, "status": status,
                                           "error": error[:2000], "error_class": error_class})


def release_run(conn: psycopg.Connection[Any], run_id: str, token: UUID) -> None:
    _fenced(conn, Q.release_run, {"run_id": run_id, "token": token})
