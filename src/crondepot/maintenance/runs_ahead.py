"""Days of runs made ahead: the leader keeps a partition for each of the next week's UTC
days (runs/partitions.py), so a fire never lands in the default partition for want of one.
Soon after start and every ten minutes; a turn that finds them made costs a catalog read."""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.maintenance.config import MaintenanceConfig
from crondepot.runs.partitions import make_ahead


def make_runs_ahead(conn: psycopg.Connection[Any], config: MaintenanceConfig) -> list[str]:
    return make_ahead(conn)
