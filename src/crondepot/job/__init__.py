"""Jobs: the standing instructions. ``spec`` validates documents; ``store`` persists them."""

from __future__ import annotations

from crondepot.job.spec import PRIORITIES, JobSpec, Misfire, Priority
from crondepot.job.store import CreatedJob, create_jobs

__all__ = ["PRIORITIES", "CreatedJob", "JobSpec", "Misfire", "Priority", "create_jobs"]
