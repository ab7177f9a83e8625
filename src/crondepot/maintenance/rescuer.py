"""The rescuer: runs whose worker stopped renewing their lease go back to the queue (or to
the dead letter after their last attempt), and queued runs past their misfire deadline are
recorded skipped rather than sent late (the claim never leases them; this says why), and
runs queued for a held job since the last turn are moved out of the claim's ready range
(holds.py: a claim never walks a held backlog)."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from crondepot.limits import holds
from crondepot.maintenance.config import MaintenanceConfig
from crondepot.queue.claim import deadline_passed
from crondepot.queue.lease import reap_abandoned_runs, skip_runs_past_deadline
from crondepot.runtime import metrics

log = logging.getLogger("crondepot.maintenance")


def rescue(conn: psycopg.Connection[Any], config: MaintenanceConfig) -> None:
    reaped = reap_abandoned_runs(conn, max_lease_seconds=config.max_lease_seconds)
    late = skip_runs_past_deadline(conn)
    held = holds.sweep(conn)
    if held:
        log.debug("moved %d runs of held jobs out of the claim's way", held)
    for run_id, job_id, tenant_id in late:
        deadline_passed(run_id, job_id, tenant_id, when="it was still queued")
    for status, count in reaped.items():
        if count:
            metrics.leases_expired.labels(status).inc(count)
            log.warning("reaped %d runs with expired leases", count, extra={"to": status})
