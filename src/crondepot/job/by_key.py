"""A tenant's job by its key: the second way to address a job (the CLI's ``JOB`` arguments,
``GET /v1/jobs/by-key/{key}``). A key names one job of a tenant for good (it cannot be
patched), so key -> id is stable."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row

from crondepot.db import Q


def job_id_by_key(conn: psycopg.Connection[Any], tenant_id: int, key: str) -> int | None:
    """The id of the tenant's job with this key, cancelled ones included; None if none."""
    row = conn.cursor(row_factory=dict_row).execute(
        Q.get_job_by_key, {"tenant_id": tenant_id, "key": key}).fetchone()
    return None if row is None else int(row["id"])
