"""The leader's mark of the cluster and timeline crondepot runs on (crondepot.db.restore):
refreshed every turn, so a restored database's newest mark dates its restore point; a
restore noticed while processes run is logged every turn until the operator resolves it
(the running processes are not stopped: stop them before restoring). The leader judges by
the last mark it wrote itself (ClusterWatch), so a failover however long is not taken for
a restore."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from crondepot.db.restore import ClusterWatch
from crondepot.maintenance.config import MaintenanceConfig

log = logging.getLogger("crondepot.maintenance")


class ClusterMark:
    """The service: one watch per process, kept across its turns (ClusterWatch)."""

    def __init__(self) -> None:
        self._watch = ClusterWatch()

    def __call__(self, conn: psycopg.Connection[Any], config: MaintenanceConfig) -> None:
        mark_cluster(conn, self._watch)


def mark_cluster(conn: psycopg.Connection[Any], watch: ClusterWatch) -> None:
    found = watch.check(conn)
    if found is not None:
        log.error("the database looks restored (newest mark %s, timeline %s): new processes "
                  "refuse to start until `crondepot db restored --skip-repeats | --resend`; "
                  "stop the running ones", found.last_seen_at.isoformat(timespec="seconds"),
                  found.timeline_id)
