"""Run ids: the one name a run has, ``"{job_id}:{unix seconds of its nominal instant}"``.

This module owns that format. The seconds are computed from the instant by integer
arithmetic, never read off a rendered timestamp, whose text varies with the session's time
zone and precision; so every scheduler names the same run the same way, and
``INSERT ... ON CONFLICT DO NOTHING`` on the run id's unique index makes firing idempotent
(queries/tick.sql, ``insert_runs``: why no conflict target is named).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["format_run_id", "run_id", "unix_seconds"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_SECOND = timedelta(seconds=1)


def run_id(job_id: int, nominal: datetime) -> str:
    """The run id of job ``job_id`` at ``nominal`` (aware; any zone names the same id)."""
    if nominal.tzinfo is None or nominal.utcoffset() is None:
        raise ValueError(
            f"nominal must be an aware datetime, got naive {nominal.isoformat()}; "
            "a naive time names no instant, so it cannot name a run"
        )
    return format_run_id(job_id, unix_seconds(nominal))


def unix_seconds(nominal: datetime) -> int:
    """Whole Unix seconds of an aware instant."""
    # Aware subtraction is exact (whole microseconds); floor division drops any fraction.
    return (nominal - _EPOCH) // _ONE_SECOND


def format_run_id(job_id: int, seconds: int) -> str:
    """The run id from already computed Unix seconds (the scheduler reuses them per group)."""
    return f"{int(job_id)}:{seconds}"
