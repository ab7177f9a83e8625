"""A run's attempt history: what each call of the run did (start, end, outcome, error,
worker), oldest first.

The run row is the record of its latest attempt; the attempts before it that did not end
the run (retried, lease expired, or failed/dead before someone queued the run again) are
rows of run_attempts, written by the statement that wrote their outcome (migration 0017).
This module joins the two; it never writes.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from crondepot.base.vocab import ATTEMPTED_STATES
from crondepot.db import Q


def run_attempts(conn: psycopg.Connection[Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    """The attempts of ``run`` (a row of the API's run reads, already scoped to a tenant)."""
    earlier = conn.cursor(row_factory=dict_row).execute(
        Q.run_attempts, {"run_id": run["run_id"]}).fetchall()
    latest = _latest(run, earlier, run_worker(conn, run["run_id"]))
    return earlier + ([latest] if latest else [])


def run_worker(conn: psycopg.Connection[Any], run_id: str) -> str | None:
    row = conn.execute(Q.run_worker, {"run_id": run_id}).fetchone()
    return None if row is None else row[0]


def _latest(run: dict[str, Any], earlier: list[dict[str, Any]],
            worker: str | None) -> dict[str, Any] | None:
    """The attempt the run row records, if it records one: a queued run's last attempt is
    already in run_attempts, and a run skipped before its call (deadline passed while it
    waited) gave its attempt number back, so the row's attempt is the last stored one."""
    if run["attempt"] < 1 or run["status"] not in ATTEMPTED_STATES:
        return None
    if run["status"] == "skipped" and earlier and earlier[-1]["attempt"] == run["attempt"]:
        return None
    return {"attempt": run["attempt"], "started_at": run["started_at"],
            "ended_at": run["finished_at"], "outcome": run["status"],
            "error": run["last_error"], "error_class": run["error_class"], "worker": worker}
