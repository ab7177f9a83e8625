"""``POST /v1/apply``: schedules as code over HTTP (crondepot.job.apply): make the caller's
tenant's jobs what a set of job documents says, in one transaction, and answer the plan
(the fires each change adds and removes). ``dry_run`` plans and changes nothing."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from crondepot.api.auth import Conn, Writer
from crondepot.api.body import json_body
from crondepot.api.models import EMI_REMINDER, MAX_APPLY_JOBS, ApplyRequest
from crondepot.api.openapi import problems, request_body
from crondepot.api.problems import Invalid
from crondepot.job.apply import DEFAULT_DAYS, MAX_DAYS, Scope, apply_set, read_documents

router = APIRouter(prefix="/v1", tags=["jobs"])
Body = Annotated[Any, Depends(json_body)]
MAX_JOBS = MAX_APPLY_JOBS
_MEMBERS = ("scope", "prune", "dry_run", "days", "jobs")

_EMI = {**EMI_REMINDER, "key": "bank42:70001:emi"}
_BILL = {**EMI_REMINDER, "key": "bank42:70001:bill", "cron": "0 10 1 * *"}
REVIEW = {"scope": {"deploy": "reminders"}, "prune": True, "dry_run": True, "days": 7,
          "jobs": [_EMI, _BILL]}
DEPLOY = {"scope": {"deploy": "reminders"}, "prune": True, "jobs": [_EMI, _BILL]}


class ApplyPlan(BaseModel):
    scope: dict[str, str] | None
    prune: bool
    dry_run: bool
    days: int
    counts: dict[str, int] = Field(description="created, updated, cancelled, unchanged, "
                                               "changes, runs_cancelled, fires_added, "
                                               "fires_removed")
    changes: list[dict[str, Any]] = Field(
        description="by key: action (create, update, cancel), id, fields (update), "
                    "fires_added/fires_removed and the first of them (added, removed: at, "
                    "local, note), runs_cancelled (cancel)")


@router.post("/apply", summary="Apply a set of job documents (schedules as code)",
             description="Upsert each document by key (unchanged jobs are not touched), stamp "
                         "the scope's label, and with `prune` cancel the scope's jobs the set "
                         "no longer names: one transaction, all or nothing. Answers the plan: "
                         "the fires each change adds and removes over the next `days`. "
                         "Grants and quotas apply as for creates.",
             responses={200: {"model": ApplyPlan}, **problems(401, 403, 412, 413, 415, 422,
                                                              429)},
             openapi_extra=request_body(ApplyRequest, {"review_a_pull_request": REVIEW,
                                                       "deploy": DEPLOY}))
def apply(who: Writer, conn: Conn, body: Body) -> JSONResponse:
    if not isinstance(body, dict):
        raise Invalid(f"expected a JSON object, got {type(body).__name__}", field="body")
    unknown = sorted(set(body) - set(_MEMBERS))
    if unknown:
        raise Invalid(f"unknown member {unknown[0]!r}; allowed: {', '.join(_MEMBERS)}",
                      field=unknown[0])
    scope = _scope(body.get("scope"))
    prune, dry_run = _flag(body, "prune"), _flag(body, "dry_run")
    days = body.get("days", DEFAULT_DAYS)
    if isinstance(days, float) and days.is_integer():
        days = int(days)           # 7.0 is an integer to JSON Schema
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS:
        raise Invalid(f"expected days to be an integer from 1 to {MAX_DAYS}, got {days!r}",
                      field="days")
    jobs = body.get("jobs")
    if not isinstance(jobs, list):
        raise Invalid("expected jobs to be a list of job documents", field="jobs")
    if len(jobs) > MAX_JOBS:
        raise Invalid(f"expected at most {MAX_JOBS} jobs, got {len(jobs)}", field="jobs")
    declared = read_documents(((f"jobs[{i}]", f"jobs[{i}]", doc)
                               for i, doc in enumerate(jobs)), scope)
    plan = apply_set(conn, who.tenant_id, declared, scope=scope, prune=prune,
                     dry_run=dry_run, days=days)
    return JSONResponse(plan.document())


def _scope(value: Any) -> Scope | None:
    if value is None:
        return None
    if not isinstance(value, dict) or len(value) != 1:
        raise Invalid("expected scope to be an object of one label, like "
                      "{\"deploy\": \"reminders\"}", field="scope")
    ((label, text),) = value.items()
    return Scope.checked(label, text)


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise Invalid(f"expected {name} to be true or false, got {value!r}", field=name)
    return value
