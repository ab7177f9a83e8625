"""Domain values as the JSON the API returns (the shapes ``schemas`` documents)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from crondepot.job.store import StoredJob, job_document
from crondepot.runs.deadletter import DeadRun


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def job_json(job: StoredJob) -> dict[str, Any]:
    return {
        "id": job.id, **job_document(job.spec), "paused": job.paused,
        "next_run_at": iso(job.next_run_at), "next_nominal_at": iso(job.next_nominal_at),
        "version": job.version, "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at), "cancelled_at": iso(job.cancelled_at),
        "fire_count": job.fire_count, "ended_at": iso(job.ended_at),
        "ended_reason": job.ended_reason,
        "pause": None if job.pause is None else {
            "note": job.pause.note, "paused_at": iso(job.pause.at), "paused_by": job.pause.by},
    }


def run_json(row: dict[str, Any]) -> dict[str, Any]:
    return {name: iso(value) if isinstance(value, datetime) else value
            for name, value in row.items()}


def dead_json(run: DeadRun) -> dict[str, Any]:
    return {"run_id": run.run_id, "job_id": run.job_id, "job_key": run.job_key,
            "priority": run.priority, "nominal_at": iso(run.nominal_at),
            "due_at": iso(run.due_at), "attempt": run.attempt,
            "finished_at": iso(run.finished_at), "error_class": run.error_class,
            "last_error": run.last_error}
