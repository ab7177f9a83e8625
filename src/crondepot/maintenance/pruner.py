"""The pruner: partitions of runs that ended before the retention cut-off are dropped whole
(runs/partitions.py), then finished runs past it elsewhere are deleted, a bounded pass at a
time, until a pass finds less than a full batch (dead-lettered runs are kept)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import psycopg

from crondepot.maintenance.config import MaintenanceConfig
from crondepot.runs.partitions import retire_ended
from crondepot.runs.retention import PRUNE_BATCH, prune_cutoff, prune_finished_runs

log = logging.getLogger("crondepot.maintenance")

MAX_PASSES = 20   # per turn: a first prune of a large backlog goes on at the next turn


def prune(conn: psycopg.Connection[Any], config: MaintenanceConfig) -> int:
    if not config.retention_days:
        return 0
    keep = timedelta(days=config.retention_days)
    retire_ended(conn, keep)              # first: what is dropped whole is not deleted
    cutoff = prune_cutoff(conn, keep)     # one cut-off for the turn's passes
    total = 0
    for _ in range(MAX_PASSES):
        pruned = prune_finished_runs(conn, keep, cutoff=cutoff)
        total += pruned
        if pruned < PRUNE_BATCH:
            break
    if total:
        log.info("pruned %d finished runs past retention", total)
    return total
