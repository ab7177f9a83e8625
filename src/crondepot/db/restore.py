"""Noticing a restored database before anything is sent from it.

A database restored to a point in time (or from a dump) has forgotten the runs written
after that point, while the targets remember them: crondepot, started as it is, writes
those fires again under the same run ids and sends them late, a second time to a target
that does not drop repeats (docs/operations.md, "Restoring from a backup").

The sign of a restore: crondepot keeps marks of the PostgreSQL cluster and WAL timeline it
runs on (``crondepot_cluster_marks``, refreshed by the maintenance leader every few
seconds). A restore brings back an older mark, and the database is on another timeline (a
point-in-time restore promotes a new one) or another cluster (a dump restored elsewhere).
A standby's promotion changes the timeline too, but with nothing lost: its newest mark is
as old as the failover took, seconds; a restore's is as old as its restore point. So a
change of cluster or timeline whose newest mark is older than ``RESTORE_GAP`` is taken for
a restore, and recorded; until the operator resolves it (``crondepot db restored``), every
scheduler, worker and API process refuses to start.

A process that outlives the restore (it reconnects to the restored database) is not
stopped: stop every process before restoring, as any restore procedure does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.db.queries import Q

# Longer than a failover takes to leave its newest mark behind (a partition of the primary
# with Patroni's ttl, plus the new leader's first maintenance turn: about a minute at the
# worst measured), shorter than a restore point is usually behind.
RESTORE_GAP = timedelta(minutes=5)
RESTORE_GAP_ENV = "CRONDEPOT_RESTORE_GAP_SECONDS"


class RestoredDatabase(CrondepotError):
    """The database looks restored, and the operator has not said what to do yet."""


@dataclass(frozen=True, slots=True)
class Restore:
    id: int
    detected_at: datetime
    system_identifier: int
    timeline_id: int
    last_seen_at: datetime     # the newest mark the restored data held: its restore point

    def document(self) -> dict[str, Any]:
        return {"id": self.id, "detected_at": self.detected_at.isoformat(),
                "system_identifier": str(self.system_identifier),
                "timeline_id": self.timeline_id,
                "last_seen_at": self.last_seen_at.isoformat()}


def restore_gap() -> timedelta:
    seconds = os.environ.get(RESTORE_GAP_ENV)
    return timedelta(seconds=float(seconds)) if seconds else RESTORE_GAP


def inspect(conn: psycopg.Connection[Any], gap: timedelta | None = None) -> Restore | None:
    """Mark this cluster and timeline as seen now, or, if the database looks restored,
    record the restore; the restore not yet resolved, or None. For a process starting: it
    knows no mark of its own, so a newest mark older than ``gap`` on the clock says
    restored (a failover while no crondepot process ran for that long says so too: the
    operator answers ``--resend``)."""
    return _check(conn, gap, None)[0]


class ClusterWatch:
    """The maintenance leader's check, every turn. It remembers the last mark it wrote, so
    it judges by what the database lost rather than by the clock: after a standby's
    promotion the newest mark is the leader's own last one (a strict synchronous standby
    had it) or a few seconds older, however long the failover took; after a restore it is
    as old as the restore point."""

    def __init__(self) -> None:
        self.last_written: datetime | None = None

    def check(self, conn: psycopg.Connection[Any]) -> Restore | None:
        found, written = _check(conn, None, self.last_written)
        if written is not None:
            self.last_written = written
        return found


def _check(conn: psycopg.Connection[Any], gap: timedelta | None,
           last_written: datetime | None) -> tuple[Restore | None, datetime | None]:
    """(the open restore, None), or (None, the mark written now)."""
    gap = restore_gap() if gap is None else gap
    with conn.transaction():
        conn.execute(Q.lock_restore_check)
        found = open_restore(conn)
        if found is not None:
            return found, None
        row = conn.execute(Q.cluster_identity).fetchone()
        assert row is not None
        system_identifier, timeline_id, now = row
        newest = conn.execute(Q.newest_mark).fetchone()
        here = {"system_identifier": system_identifier, "timeline_id": timeline_id}
        if newest is not None and (newest[0], newest[1]) != (system_identifier, timeline_id):
            lost = (last_written if last_written is not None else now) - newest[2]
            if lost > gap:
                conn.execute(Q.record_restore, {**here, "last_seen_at": newest[2]})
                return open_restore(conn), None
        written = conn.execute(Q.touch_mark, here).fetchone()
        assert written is not None
        return None, written[0]


def open_restore(conn: psycopg.Connection[Any]) -> Restore | None:
    row = conn.execute(Q.open_restore).fetchone()
    return None if row is None else Restore(*row)


def refuse_if_restored(conn: psycopg.Connection[Any]) -> None:
    """Before a process starts: refuse while a restore is unresolved."""
    found = inspect(conn)
    if found is not None:
        raise RestoredDatabase(
            f"the database looks restored: its newest sign of crondepot is from "
            f"{found.last_seen_at.isoformat(timespec='seconds')}, on another PostgreSQL "
            f"cluster or timeline than this one (timeline {found.timeline_id}). Fires since "
            "then may have been sent already, and would be sent again. Stop every crondepot "
            "process, then run `crondepot db restored --skip-repeats` (those fires of jobs "
            "whose targets do not drop repeats are recorded skipped, reason restored) or "
            "`crondepot db restored --resend` (send them all again; also the answer when no "
            "restore happened, only a standby's promotion while no crondepot process ran), "
            "and start again (docs/operations.md, \"Restoring from a backup\")")


def resolve(conn: psycopg.Connection[Any], restore: Restore, resolution: str, actor: str,
            runs_skipped: int) -> None:
    """Record the operator's decision and mark this cluster and timeline as seen."""
    row = conn.execute(Q.cluster_identity).fetchone()
    assert row is not None
    conn.execute(Q.resolve_restore, {"id": restore.id, "resolution": resolution,
                                     "actor": actor, "runs_skipped": runs_skipped})
    conn.execute(Q.touch_mark, {"system_identifier": row[0], "timeline_id": row[1]})
