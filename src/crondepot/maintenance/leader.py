"""Leadership of maintenance: one PostgreSQL session advisory lock, held by one process.

A follower asks with ``pg_try_advisory_lock`` every ``elect_seconds`` (2 s); the holder keeps
the lock as long as its session lives. The session ends, and the lock with it:

- at once when the leader dies (kill -9 closes its socket; the server sees the FIN);
- after ``IDLE_SECONDS`` when the leader stalls (SIGSTOP, a frozen VM) or is partitioned
  from the database: the leader's session sets ``idle_session_timeout``, and a live leader
  touches it every ``elect_seconds``, so only a leader that stopped talking is cut off.

So a stalled leader is replaced within ``TAKEOVER_SECONDS`` of its last statement (its
session's end, then the next election round; plus the new leader's round trips). What it
held inside a service's turn goes no later than its lock: a leader can stall between two
statements of a turn's transaction, holding locks that other processes wait for (the
restore check's, which every process takes before it starts and so before it stands for
election; the holds' lock of the rescuer's sweep). So the services' sessions set
``idle_in_transaction_session_timeout`` to ``IDLE_SECONDS`` too (``bound_stall``), not the
60 s every session gets (db/connect.py): a process starting while the leader stalls there
waits for its start check no longer than the lock stays taken.

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
from crondepot.maintenance.config import ELECT_SECONDS
from crondepot.runtime import metrics

log = logging.getLogger("crondepot.maintenance")

IDLE_SECONDS = 15
# The bound on a stalled leader's replacement at the default election interval
# (docs/operations.md, "Maintenance: one elected process").
TAKEOVER_SECONDS = IDLE_SECONDS + ELECT_SECONDS


def bound_stall(conn: psycopg.Connection[Any], seconds: float = IDLE_SECONDS) -> None:
    """Have the server end ``conn``'s session once it sits ``seconds`` inside a transaction
    (a service's turn on the leader: the module's docstring)."""
    conn.execute(Q.maintenance_turn_session, {"idle_ms": int(seconds * 1000)})


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
