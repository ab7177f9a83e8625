"""The leader's mark of the cluster and timeline crondepot runs on (crondepot.db.restore):
refreshed every turn, so a restored database's newest mark dates its restore point; a
restore noticed while processes run is logged every turn until the operator resolves it
(the running processes are not stopped: stop them before restoring)."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from crondepot.db.restore import inspect
from crondepot.maintenance.config import MaintenanceConfig

log = logging.getLogger("crondepot.maintenance")


def mark_cluster(conn: psycopg.Connection[Any], config: MaintenanceConfig) -> None:
    found = inspect(conn)
    if found is not None:
        log.error("the database looks restored (newest mark %s, timeline %s): new processes "
                  "refuse to start until `crondepot db restored --skip-repeats | --resend`; "
                  "stop the running ones", found.last_seen_at.isoformat(timespec="seconds"),
                  found.timeline_id)
