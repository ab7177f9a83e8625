"""The periodic ledger check: ``crondepot verify`` over the recent past, recorded in
``ledger_checks`` (whence the metric ``crondepot_fires_unaccounted``), and logged."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import psycopg

from crondepot.maintenance.config import MaintenanceConfig
from crondepot.scheduler import ledger

log = logging.getLogger("crondepot.maintenance")


def check_ledger(conn: psycopg.Connection[Any], config: MaintenanceConfig) -> None:
    # check_if_due keeps its own lock and its own clock (the last recorded check), so a
    # second leader, or a manual `crondepot verify`, never doubles the work.
    report = ledger.check_if_due(conn, every=timedelta(seconds=config.verify_every),
                                 window=timedelta(seconds=config.verify_window))
    if report is None:
        return
    fields = {"fires": report.fires, "unaccounted": report.unaccounted_count,
              "duplicated": report.duplicated_count, "pending": report.pending,
              "unreadable": [u.cron for u in report.unreadable],
              "seconds": round(report.seconds, 3),
              "since": report.since.isoformat(), "until": report.until.isoformat()}
    if report.clean:
        log.info("ledger check: every fire accounted for", extra=fields)
    else:
        examples = [f.run_id for f in report.unaccounted + report.duplicated]
        log.error("ledger check: fires unaccounted or duplicated, or timetables unreadable "
                  "(crondepot verify lists them)", extra=fields | {"run_ids": examples})
