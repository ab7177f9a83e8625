"""Jobs: the standing instructions. ``spec`` validates documents; ``store`` persists them.

The names below are loaded on first use (PEP 562), not with the package: importing
``crondepot.job.fields`` (the maintenance services do, through ``holds``) must not load the
document validator and the HTTP client it checks URLs with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crondepot.base.lazy import on_first_use

if TYPE_CHECKING:
    from crondepot.job.spec import PRIORITIES, JobSpec, Misfire, Priority
    from crondepot.job.store import CreatedJob, create_jobs

_WHERE = {"PRIORITIES": "spec", "JobSpec": "spec", "Misfire": "spec", "Priority": "spec",
          "CreatedJob": "store", "create_jobs": "store"}

__all__ = ["PRIORITIES", "CreatedJob", "JobSpec", "Misfire", "Priority", "create_jobs"]


if not TYPE_CHECKING:     # for mypy, the names are the imports above: a misspelling is an error
    __getattr__ = on_first_use(__name__, _WHERE)
