"""Quotas: the operator's caps on a tenant's jobs (docs/operations.md, "Tenants").

Per tenant: at most ``max_jobs`` jobs that are not cancelled (paused ones count), at most
``max_urgent_jobs`` of them urgent, and whether it may use ``urgent`` at all. None means no
cap. They bound what a tenant *adds*: a create of a new job, a PATCH that makes a job urgent;
lowering a cap below what a tenant has cancels nothing.

The counts are kept on the tenant row by triggers (db/sql/functions/job_counts.sql).
``lock`` reads them with the row locked for the rest of the transaction, so two creates
(two API processes, an API and an import) take turns: the second one sees the count the
first one's insert moved, and the last slot is taken once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

from crondepot.base.errors import CrondepotError, InvalidJob
from crondepot.db import Q

MAX_CAP = 2**31 - 1


class Counted(Protocol):
    """What a quota counts of a job: whether it is active, urgent, and its key (a
    ``JobSpec`` is one). Tenancy sits below the job document and never imports it."""

    @property
    def key(self) -> str | None: ...

    @property
    def active(self) -> bool: ...

    @property
    def priority(self) -> str: ...


class QuotaExceeded(InvalidJob):
    """The job would take the tenant over a cap; ``quota`` names it, ``limit`` is its value."""

    def __init__(self, message: str, *, field: str, quota: str, limit: int) -> None:
        super().__init__(message, field=field)
        self.quota = quota
        self.limit = limit


class UrgentNotAllowed(InvalidJob):
    """The tenant may not use the urgent priority (a permission, not a count)."""

    quota = "urgent_allowed"


class InvalidQuota(CrondepotError, ValueError):
    pass


@dataclass(frozen=True, slots=True, kw_only=True)
class Quota:
    tenant: str
    max_jobs: int | None
    max_urgent_jobs: int | None
    urgent_allowed: bool
    active_jobs: int           # jobs not cancelled, now
    urgent_jobs: int           # of them urgent

    @property
    def caps_anything(self) -> bool:
        return (self.max_jobs is not None or self.max_urgent_jobs is not None
                or not self.urgent_allowed)

    def document(self) -> dict[str, Any]:
        return {"max_jobs": self.max_jobs, "max_urgent_jobs": self.max_urgent_jobs,
                "urgent_allowed": self.urgent_allowed, "active_jobs": self.active_jobs,
                "urgent_jobs": self.urgent_jobs}


def _quota(row: Any) -> Quota:
    return Quota(tenant=row[0], max_jobs=row[1], max_urgent_jobs=row[2],
                 urgent_allowed=row[3], active_jobs=row[4], urgent_jobs=row[5])


def lock(conn: psycopg.Connection[Any], tenant_id: int) -> Quota:
    """The tenant's caps and counts, its row locked until the caller's transaction ends."""
    row = conn.execute(Q.tenant_quota_for_update, {"tenant_id": tenant_id}).fetchone()
    if row is None:
        raise InvalidQuota(f"no tenant with id {tenant_id}")
    return _quota(row)


def read(conn: psycopg.Connection[Any], tenant_id: int) -> Quota:
    row = conn.execute(Q.tenant_quota, {"tenant_id": tenant_id}).fetchone()
    if row is None:
        raise InvalidQuota(f"no tenant with id {tenant_id}")
    return _quota(row)


_UNSET: Any = object()


def set_quota(conn: psycopg.Connection[Any], tenant_id: int, *, max_jobs: int | None = _UNSET,
              max_urgent_jobs: int | None = _UNSET,
              urgent_allowed: bool | None = None) -> Quota:
    """Change the caps given (None removes a cap); the others stay as they are."""
    for name, value in (("max_jobs", max_jobs), ("max_urgent_jobs", max_urgent_jobs)):
        if value is not _UNSET and value is not None and not 0 <= value <= MAX_CAP:
            raise InvalidQuota(f"{name}: expected an integer from 0 to {MAX_CAP}, got {value}")
    with conn.transaction():
        row = conn.execute(Q.set_tenant_quota, {
            "tenant_id": tenant_id, "set_max_jobs": max_jobs is not _UNSET,
            "max_jobs": None if max_jobs is _UNSET else max_jobs,
            "set_max_urgent_jobs": max_urgent_jobs is not _UNSET,
            "max_urgent_jobs": None if max_urgent_jobs is _UNSET else max_urgent_jobs,
            "urgent_allowed": urgent_allowed}).fetchone()
        if row is None:
            raise InvalidQuota(f"no tenant with id {tenant_id}")
        quota = _quota(row)
    return quota


def admit(quota: Quota, specs: Sequence[Counted],
          existing: Sequence[bool]) -> list[InvalidJob | None]:
    """For each new job in order, None if it fits (and then it takes its room) or why not.
    ``existing[i]`` says spec i writes nothing (its key is taken, or by an earlier spec of
    this batch that fits): it takes no room. Pure."""
    jobs, urgent = quota.active_jobs, quota.urgent_jobs
    taken: set[str] = set()
    results: list[InvalidJob | None] = []
    for spec, exists in zip(specs, existing, strict=True):
        if exists or not spec.active or (spec.key is not None and spec.key in taken):
            results.append(None)
            continue
        is_urgent = spec.priority == "urgent"
        refused = (_urgent_refusal(quota) if is_urgent else None) \
            or _over(quota, "max_jobs", quota.max_jobs, jobs, "job", "jobs") \
            or (_over(quota, "max_urgent_jobs", quota.max_urgent_jobs, urgent, "priority",
                      "urgent jobs") if is_urgent else None)
        results.append(refused)
        if refused is None:
            jobs += 1
            urgent += is_urgent
            if spec.key is not None:
                taken.add(spec.key)
    return results


def admit_change(quota: Quota, before: Counted, after: Counted) -> InvalidJob | None:
    """A PATCH adds to what the quotas bound only when it makes a job urgent. Pure."""
    if after.priority != "urgent" or before.priority == "urgent":
        return None
    return _urgent_refusal(quota) or _over(quota, "max_urgent_jobs", quota.max_urgent_jobs,
                                           quota.urgent_jobs, "priority", "urgent jobs")


def needs_lock(before: Counted, after: Counted) -> bool:
    return after.priority == "urgent" and before.priority != "urgent"


def _urgent_refusal(quota: Quota) -> UrgentNotAllowed | None:
    if quota.urgent_allowed:
        return None
    return UrgentNotAllowed(f"tenant {quota.tenant} may not use the urgent priority (an "
                            "operator allows it: crondepot tenants set-quota "
                            f"{quota.tenant} --urgent); use normal or bulk", field="priority")


def _over(quota: Quota, name: str, cap: int | None, count: int, field: str,
          what: str) -> QuotaExceeded | None:
    if cap is None or count < cap:
        return None
    return QuotaExceeded(f"{name}: tenant {quota.tenant} may have at most {cap} {what} "
                         f"(not cancelled) and has {count}; cancel one, or ask an operator "
                         f"to raise the quota (crondepot tenants set-quota)", field=field,
                         quota=name, limit=cap)
