"""The maintenance services' settings: the same on every process that may lead."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from crondepot.queue.lease import DEFAULT_MAX_LEASE_SECONDS
from crondepot.runs.retention import DEFAULT_RETENTION

ELECT_SECONDS = 2.0   # how often a follower asks for the lock (and the leader touches it)


@dataclass(frozen=True, slots=True, kw_only=True)
class MaintenanceConfig:
    url: str
    name: str = "crondepot"               # shown in pg_stat_activity as crondepot-NAME-maintenance
    enabled: bool = True                  # False: never stand for election
    elect_seconds: float = ELECT_SECONDS
    reap_seconds: float = 5.0             # rescuer
    max_lease_seconds: int = DEFAULT_MAX_LEASE_SECONDS
    retention_days: float = DEFAULT_RETENTION.days   # pruner; 0 keeps finished runs forever
    prune_seconds: float = 60.0
    registry_seconds: float = 60.0
    partition_seconds: float = 600.0      # runs' day partitions made ahead (runs_ahead)
    verify_every: float = 300.0           # ledger check; 0 turns it off
    verify_window: float = 3600.0
    # The failure notices' sender (notices/sender.py), handed in by the command line: it
    # sends webhooks as the worker does, a layer this one does not import. None: no notices.
    notices: Callable[[psycopg.Connection[Any], MaintenanceConfig], object] | None = None
    notice_seconds: float = 5.0
