"""What the notice tests share: a loopback SMTP server (aiosmtpd, a real one), runs of one
job sent to the dead letter through the worker's own outcome statement, a sender allowed
to call loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes
from email.message import Message
from typing import Any

import psycopg
from aiosmtpd.controller import Controller

from crondepot.job.guard import AddressGuard
from crondepot.notices.sender import NoticeSender, SmtpRelay
from crondepot.queue import claim_runs, record_final_failure
from crondepot_testkit.processes import free_port

LOOPBACK = AddressGuard(["127.0.0.1/32"])


class Inbox:
    """aiosmtpd's handler: every message accepted, kept parsed; ``refuse`` answers 451
    (a temporary refusal) to that many messages first."""

    def __init__(self) -> None:
        self.messages: list[tuple[list[str], Message]] = []
        self.refuse = 0
        self._lock = threading.Lock()

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self._lock:
            if self.refuse:
                self.refuse -= 1
                return "451 4.3.0 try again later"
            self.messages.append((list(envelope.rcpt_tos), message_from_bytes(
                envelope.original_content or envelope.content)))
        return "250 OK"




@contextmanager
def smtp_server() -> Iterator[tuple[Inbox, SmtpRelay]]:
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield inbox, SmtpRelay(host="127.0.0.1", port=controller.port, security="plain",
                               sender="notices@crondepot.test")
    finally:
        controller.stop()


def sender(smtp: SmtpRelay | None = None, **kwargs: Any) -> NoticeSender:
    return NoticeSender(smtp=smtp, guard=LOOPBACK, timeout_s=5.0, **kwargs)


def dead_runs(conn: psycopg.Connection[Any], job_id: int, count: int, *,
              first: int = 1_791_171_000) -> list[str]:
    """``count`` runs of the job queued, claimed and recorded dead by the worker's statement."""
    conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, "
        "available_at) SELECT %(job)s || ':' || (%(first)s + g * 60), j.id, j.tenant_id, "
        "j.priority, now(), now(), now() FROM jobs AS j, generate_series(0, %(n)s - 1) AS g "
        "WHERE j.id = %(job)s", {"job": job_id, "first": first, "n": count})
    killed = []
    for run in claim_runs(conn, owner="test-worker", shares={"normal": count}):
        record_final_failure(conn, run.run_id, run.lease_token, status="dead",
                             error="HTTP 503 from the gateway", error_class="TemporaryError")
        killed.append(run.run_id)
    assert len(killed) == count
    return killed
