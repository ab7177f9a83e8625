"""Leadership of maintenance: one PostgreSQL session advisory lock, held by one process.

A follower asks with ``pg_try_advisory_lock`` every few seconds; the holder keeps the lock
as long as its session lives. The session ends, and the lock with it:

- at once when the leader dies (kill -9 closes its socket; the server sees the FIN);
- after ``IDLE_SECONDS`` when the leader stalls (SIGSTOP, a frozen VM) or is partitioned
  from the database: the leader's session sets ``idle_session_timeout``, and a live leader
  touches it every ``elect_seconds``, so only a leader that stopped talking is cut off.

A stalled leader that wakes up finds its session gone at its next touch, and stands for
election again like any follower.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import psycopg

from crondepot.db import Q, connect
from crondepot.runtime import metrics

log = logging.getLogger("crondepot.maintenance")

IDLE_SECONDS = 15


class Leadership:
    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name
        self._conn: psycopg.Connection[Any] | None = None
        self._quiet_until = 0.0     # monotonic: no second "cannot stand" warning before

    @property
    def held(self) -> bool:
        return self._conn is not None

    def refresh(self) -> bool:
        """Take the lock if free, or prove it is still ours; return whether we lead."""
        try:
            if self._conn is None:
                conn = connect(self.url, application_name=f"crondepot-{self.name}-maintenance")
                conn.execute(Q.maintenance_session, {"idle_ms": IDLE_SECONDS * 1000})
                row = conn.execute(Q.maintenance_try_lead).fetchone()
                if not (row and row[0]):
                    conn.close()
                    return False
                self._conn = conn
                metrics.maintenance_leader.set(1)
                log.info("maintenance leader: this process now runs the maintenance services")
            else:
                self._conn.execute(Q.maintenance_still_lead)
            return True
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if self._conn is not None:
                log.warning("maintenance leadership lost: %s", reason)
            elif time.monotonic() >= self._quiet_until:
                # A follower that cannot even ask (no connection, too many clients): said once
                # a minute, since maintenance stops if no process can ask.
                log.warning("cannot stand for maintenance leader: %s", reason)
                self._quiet_until = time.monotonic() + 60
            self.release()
            return False

    def release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()   # closing the session releases its advisory lock
            self._conn = None
            metrics.maintenance_leader.set(0)
