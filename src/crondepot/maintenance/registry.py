"""The worker registry's cleanup: workers stopped, or silent, for a day are forgotten."""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.db import Q
from crondepot.maintenance.config import MaintenanceConfig


def forget_old_workers(conn: psycopg.Connection[Any], config: MaintenanceConfig) -> None:
    conn.execute(Q.forget_old_workers)
