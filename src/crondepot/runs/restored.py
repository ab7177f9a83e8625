"""The operator's answer to a restored database (``crondepot db restored``).

``skip_repeats``: every job whose target may act twice on a repeated run id (an HTTP or
python target without ``"dedupes": true``, and AMQP) gets its fires from its restored
next fire through now written ``skipped``, reason ``restored``, and moves on from now; its
runs the restored database holds as queued or running, due by now, are skipped the same
way. The lost timeline most likely sent them; a skipped fire keeps its row, so ``verify``
stays clean and ``crondepot backfill`` can send any of them on purpose. Jobs whose targets
drop repeats (``dedupes``, NATS, Redis) catch up as after any outage: a repeat has no
effect there, and a fire the lost timeline never sent is sent.

``resend``: nothing is skipped; every fire is sent again (the operator knows the targets
cope, or that nothing was sent after the restore point).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from crondepot.db import Q
from crondepot.db.clock import database_now
from crondepot.db.restore import Restore, resolve
from crondepot.job.store import skip_owed_fires


@dataclass(frozen=True, slots=True)
class Resolution:
    restore: Restore
    resolution: str
    jobs: int = 0               # jobs whose owed fires were looked at
    fires_skipped: int = 0      # fires written skipped, reason restored
    runs_skipped: int = 0       # queued or running rows skipped

    def document(self) -> dict[str, Any]:
        return {"restore": self.restore.document(), "resolution": self.resolution,
                "jobs": self.jobs, "fires_skipped": self.fires_skipped,
                "runs_skipped": self.runs_skipped}


def skip_repeats(conn: psycopg.Connection[Any], restore: Restore, actor: str) -> Resolution:
    jobs = conn.execute(Q.jobs_without_repeat_guard).fetchall()
    fires = sum(len(skip_owed_fires(conn, tenant_id, job_id, "restored"))
                for job_id, tenant_id, owing in jobs if owing)
    with conn.transaction():
        now = database_now(conn)
        skipped = conn.execute(Q.skip_restored_runs, {
            "job_ids": [job_id for job_id, _, _ in jobs], "now": now}).fetchall()
        resolve(conn, restore, "skip_repeats", actor, fires + len(skipped))
    return Resolution(restore, "skip_repeats", len(jobs), fires, len(skipped))


def resend(conn: psycopg.Connection[Any], restore: Restore, actor: str) -> Resolution:
    with conn.transaction():
        resolve(conn, restore, "resend", actor, 0)
    return Resolution(restore, "resend")
