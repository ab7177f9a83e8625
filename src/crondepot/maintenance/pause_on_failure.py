"""Pause on failure: a job whose latest fires failed ``pause_after_failures`` times in a row
(the count per-job health keeps, ``jobs.failing_fires``) is paused, with a note saying so,
by the maintenance leader within one turn (``reap_seconds``, 5 s by default). The pause is an
ordinary one (the fires up to it are settled first, those after it are written ``skipped``,
``paused``), made under the actor ``crondepot:pause_after_failures``, so the audit log, the
API and the console say who paused it. Its resume starts the count again (queries/jobs.sql,
resume_job): the operator has seen the failures, and the job would otherwise pause again at
once."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from crondepot.db import Q
from crondepot.maintenance.config import MaintenanceConfig
from crondepot.runtime import metrics
from crondepot.tenancy.audit import act_as

log = logging.getLogger("crondepot.maintenance")

ACTOR = "crondepot:pause_after_failures"


def pause_failing_jobs(conn: psycopg.Connection[Any], config: MaintenanceConfig) -> int:
    """Pause every job that reached its ``pause_after_failures``; how many were paused."""
    # Imported here: the job store brings the job validator (and httpx, through the URL
    # check), which a worker's start-up does not load until it needs it (test_layers.py).
    from crondepot.job.store import JobCancelled, JobNotFound, pause_job

    act_as(conn, ACTOR)
    paused = 0
    for job_id, tenant_id, failures in conn.execute(Q.jobs_to_pause_for_failures).fetchall():
        note = f"paused after {failures} failed fires in a row (pause_after_failures)"
        try:
            pause_job(conn, tenant_id, job_id, note=note)
        except (JobNotFound, JobCancelled):     # cancelled or ended since it was read
            continue
        paused += 1
        metrics.jobs_paused_for_failures.inc()
        log.warning("job %d paused after %d failed fires in a row", job_id, failures,
                    extra={"job_id": job_id, "tenant_id": tenant_id})
    return paused
