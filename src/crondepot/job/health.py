"""Per-job health: the job's last success, its failed fires in a row, and whether that
reached its alert threshold (the job's ``alert_after_failures``, else its tenant's).

Which fires count as failed: those that ended ``failed``, ``dead``, or ``skipped`` because
their misfire deadline passed (``deadline_passed``: the fire was owed and never delivered).
Fires skipped by the job's own rules (paused, cancelled, catch-up ``latest``, a misfire
rule applied when the scheduler wrote the fire) do not count, nor do they reset the count:
they are the operator's choice, not a failure. Counted in the order the runs end; a success
sets the count back to 0.

The count is a column kept by the outcome statements (jobs.failing_fires, migration 0017),
so listing unhealthy jobs and the per-tenant gauge read a small partial index of failing
jobs, never the runs of 2.7 M jobs. The last success is read per job shown, from the job's
runs newest first (index runs_job), so the success path writes nothing for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from crondepot.base.errors import CrondepotError
from crondepot.db import Q
from crondepot.job.store import JobFilter, StoredJob, stored_job

# The tenants' default threshold until an operator sets one (migration 0017's default).
DEFAULT_ALERT_AFTER = 3
MAX_ALERT_AFTER = 10_000


class InvalidThreshold(CrondepotError, ValueError):
    """An alert threshold out of range."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    consecutive_failures: int
    alert_after_failures: int
    threshold_from: str                 # "job" or "tenant"
    last_success_at: datetime | None
    last_success_run_id: str | None

    @property
    def unhealthy(self) -> bool:
        return self.consecutive_failures >= self.alert_after_failures

    def document(self) -> dict[str, Any]:
        return {"unhealthy": self.unhealthy,
                "consecutive_failures": self.consecutive_failures,
                "alert_after_failures": self.alert_after_failures,
                "threshold_from": self.threshold_from,
                "last_success_at": None if self.last_success_at is None
                else self.last_success_at.isoformat().replace("+00:00", "Z"),
                "last_success_run_id": self.last_success_run_id}


def job_health(conn: psycopg.Connection[Any], tenant_id: int, job_id: int) -> Health | None:
    """The health of one of the tenant's jobs; None if the tenant has no such job."""
    row = conn.cursor(row_factory=dict_row).execute(
        Q.job_health, {"job_id": job_id, "tenant_id": tenant_id}).fetchone()
    if row is None:
        return None
    return Health(consecutive_failures=row["failing_fires"],
                  alert_after_failures=row["alert_after"],
                  threshold_from="job" if row["own_threshold"] else "tenant",
                  last_success_at=row["last_success_at"],
                  last_success_run_id=row["last_success_run_id"])


def list_unhealthy_jobs(conn: psycopg.Connection[Any], tenant_id: int, where: JobFilter, *,
                        after: int = 0, limit: int = 100) -> list[StoredJob]:
    """A page of the tenant's unhealthy jobs in id order, strictly after id ``after``, with
    the same filters as ``job.store.list_jobs``."""
    rows = conn.cursor(row_factory=dict_row).execute(Q.list_unhealthy_jobs, {
        "tenant_id": tenant_id, "after": after, "limit": limit, **where.params()}).fetchall()
    return [stored_job(row) for row in rows]


def unhealthy_among(conn: psycopg.Connection[Any], tenant_id: int,
                    job_ids: list[int]) -> set[int]:
    """Which of these jobs of the tenant are unhealthy (a page's marks)."""
    return {job_id for (job_id,) in conn.execute(
        Q.unhealthy_among, {"tenant_id": tenant_id, "job_ids": job_ids})}


def unhealthy_by_tenant(conn: psycopg.Connection[Any]) -> list[tuple[str, int]]:
    """(tenant name, unhealthy active jobs) for every tenant: the gauge's samples."""
    return [(tenant, jobs) for tenant, jobs in conn.execute(Q.unhealthy_jobs_by_tenant)]


def check_threshold(value: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) \
            or not 1 <= value <= MAX_ALERT_AFTER:
        raise InvalidThreshold(f"expected {field} to be an integer from 1 to "
                               f"{MAX_ALERT_AFTER}, got {value!r}")
    return value


def set_tenant_threshold(conn: psycopg.Connection[Any], tenant: str, value: int) -> bool:
    """Set a tenant's default threshold; False if there is no such tenant."""
    check_threshold(value, "alert_after_failures")
    return conn.execute(Q.set_tenant_alert_after,
                        {"tenant": tenant, "alert_after": value}).fetchone() is not None
