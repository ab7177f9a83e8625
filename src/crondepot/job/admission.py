"""Admission: whether a tenant may write these jobs, checked in the writing transaction.

Three rules, after the document itself was validated (``JobSpec.from_document``, pure):
grants (``crondepot.tenancy.grants``: the handler and the rate limit a job names must be usable by
its tenant), calendars (a job's ``calendar.exclude`` names one of its tenant's,
``crondepot.tenancy.calendars``) and quotas (``crondepot.tenancy.quotas``: the operator's
caps). The store's entry points
for tenants, ``create_job``, ``update_job`` and ``import_batch`` (the API and the CLI go
through them), call these before they write; ``create_jobs`` itself is the plain batch
writer for the operator's own code (seeds, the demo, benchmarks) and checks neither, but
the worker still refuses a run whose handler or limit is not granted.

``admit`` locks the tenant's row (``quotas.lock``) for the rest of the transaction: the
insert that follows moves the counts (a trigger) before any other admission of the same
tenant can read them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from crondepot.base.errors import InvalidJob
from crondepot.db import Q
from crondepot.db.clock import database_now
from crondepot.job.spec import JobSpec
from crondepot.tenancy import calendars, grants, quotas


def admit(conn: psycopg.Connection[Any], tenant_id: int,
          specs: Sequence[JobSpec]) -> list[InvalidJob | None]:
    """For each spec, in order, None if it may be written or why not. Call inside the
    transaction that writes the admitted ones."""
    quota = quotas.lock(conn, tenant_id)
    uses = grants.tenant_uses(conn, tenant_id)
    results: list[InvalidJob | None] = [grants.refusal(spec, uses) for spec in specs]
    _refuse_unknown_calendars(conn, tenant_id, specs, results)
    _refuse_passed(conn, specs, results)
    if not quota.caps_anything:
        return results
    granted = [i for i, refused in enumerate(results) if refused is None]
    candidates = [specs[i] for i in granted]
    existing = _existing_keys(conn, tenant_id, candidates)
    fits = quotas.admit(quota, candidates,
                        [spec.key is not None and spec.key in existing for spec in candidates])
    for i, refused in zip(granted, fits, strict=True):
        results[i] = refused
    return results


def admit_change(conn: psycopg.Connection[Any], tenant_id: int, before: JobSpec,
                 after: JobSpec) -> None:
    """Raise why ``before`` may not become ``after`` (a PATCH): the new document as a whole
    must name only what the tenant may use, and a job becoming urgent must fit the quotas."""
    refused: InvalidJob | None = grants.refusal(after, grants.tenant_uses(conn, tenant_id))
    if refused is None:
        results: list[InvalidJob | None] = [None]
        _refuse_unknown_calendars(conn, tenant_id, [after], results)
        refused = results[0]
    if refused is None and quotas.needs_lock(before, after):
        refused = quotas.admit_change(quotas.lock(conn, tenant_id), before, after)
    if refused is not None:
        raise refused


def _refuse_unknown_calendars(conn: psycopg.Connection[Any], tenant_id: int,
                              specs: Sequence[JobSpec], results: list[InvalidJob | None]) -> None:
    """A job naming a calendar the tenant does not have (another tenant's included)."""
    names = [spec.calendar["exclude"] if spec.calendar is not None and results[i] is None
             else None for i, spec in enumerate(specs)]
    refusals = calendars.refuse_unknown(conn, tenant_id, names)
    for i, name in enumerate(names):
        if name is not None and name in refusals:
            results[i] = refusals[name]


def _existing_keys(conn: psycopg.Connection[Any], tenant_id: int,
                   specs: Sequence[JobSpec]) -> set[str]:
    keys = [spec.key for spec in specs if spec.key is not None]
    if not keys:
        return set()
    return {row[0] for row in conn.execute(Q.existing_job_keys,
                                           {"tenant_id": tenant_id, "keys": keys})}


def _refuse_passed(conn: psycopg.Connection[Any], specs: Sequence[JobSpec],
                   results: list[InvalidJob | None]) -> None:
    """An ``at`` or ``end_at`` already passed on the database's clock leaves the job no
    fire: refused, naming the field, rather than stored ended. (Only documents that set
    one are looked at; an H job's own fire times are checked again at the insert.)"""
    bounded = [i for i, spec in enumerate(specs)
               if results[i] is None and (spec.at is not None or spec.end_at is not None)]
    if not bounded:
        return
    now = database_now(conn)
    for i in bounded:
        spec = specs[i]
        if not spec.timetable().next_fires(now, 1):
            field = "at" if spec.at is not None else "end_at"
            moment = spec.at if spec.at is not None else spec.end_at
            assert moment is not None
            results[i] = InvalidJob(
                f"no fire is left after now ({now.isoformat()}): {field} is "
                f"{moment.isoformat()}" + ("" if spec.at is not None else
                                           ", and the schedule has no fire before it"),
                field=field)
