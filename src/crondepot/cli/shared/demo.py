"""``crondepot up --demo``: a demo tenant and a few reminder jobs, so a newcomer sees runs
flow within a minute. The jobs use the built-in ``crondepot.log`` handler, which only logs
the run: nothing leaves the machine. The demo tenant is granted that handler, as an
operator grants a tenant the handlers its jobs name (crondepot.tenancy.grants)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from crondepot.db import Q
from crondepot.job import JobSpec, create_jobs
from crondepot.job.store import trigger_job
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant, issue_token

TENANT = "demo"
# The module ``up --demo`` has its workers import: the demo SMS gateway (``sms.send``).
SMS_HANDLERS = "crondepot.cli.shared.demo_sms"
_LOG = {"type": "python", "handler": "crondepot.log"}

DOCUMENTS: list[dict[str, Any]] = [
    {"key": "demo:bounced-payment", "cron": "* * * * *", "tz": "Asia/Kolkata",
     "priority": "urgent", "target": _LOG,
     "payload": {"template": "payment_bounced", "customer": "48213"}},
    {"key": "demo:emi-reminder", "cron": "* * * * *", "tz": "Asia/Kolkata",
     "priority": "normal", "target": _LOG, "spread": {"seconds": 30, "key": "48213"},
     "misfire": {"policy": "skip_after_local_time", "until": "20:00"},
     "payload": {"template": "emi_due", "customer": "48213"}},
    {"key": "demo:renewal-notice", "cron": "*/2 * * * *", "tz": "Europe/London",
     "priority": "bulk", "target": _LOG, "catchup": "latest",
     "payload": {"template": "policy_renewal", "customer": "51007"}},
    {"key": "demo:new-york-1-30am", "cron": "30 1 * * *", "tz": "America/New_York",
     "priority": "normal", "target": _LOG,
     "payload": {"note": "fires once on 2026-11-01 although 01:30 happens twice"}},
]


@dataclass(frozen=True, slots=True)
class Demo:
    tenant_id: int
    token: str
    job_ids: list[int]


def install(conn: psycopg.Connection[Any]) -> Demo:
    """Create (or reuse) the demo tenant and its jobs; trigger the urgent one at once."""
    row = conn.execute(Q.tenant_by_name, {"name": TENANT}).fetchone()
    if row is None:
        created = create_tenant(conn, TENANT)
        tenant_id, token = created.id, created.token
    else:
        tenant_id, token = row[0], issue_token(conn, row[0], label="demo")
    grant(conn, tenant_id, handlers=[_LOG["handler"]])
    specs = [JobSpec.from_document(doc) for doc in DOCUMENTS]
    jobs = create_jobs(conn, tenant_id, specs)
    job_ids = [job.id if job.created else _existing_id(conn, tenant_id, job.key) for job in jobs]
    trigger_job(conn, tenant_id, job_ids[0])
    return Demo(tenant_id=tenant_id, token=token, job_ids=job_ids)


def _existing_id(conn: psycopg.Connection[Any], tenant_id: int, key: str | None) -> int:
    row = conn.execute(Q.get_job_by_key, {"tenant_id": tenant_id, "key": key}).fetchone()
    assert row is not None, f"job {key!r} vanished"
    return int(row[0])
