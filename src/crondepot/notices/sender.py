"""The notice sender: a maintenance service that composes the outbox's events into messages
and delivers them, one message at a time, each call bounded by a timeout.

It runs on the maintenance leader, in a thread of its own (``maintenance/maintainer.py``),
never in a worker's slots: a channel that hangs or refuses costs this thread its timeout,
and no run waits for it. A failed delivery is tried again with backoff
(``outbox.retry_delay``) up to ``outbox.MAX_ATTEMPTS`` times; a refusal that cannot change
(an HTTP 4xx, an address the guard refuses, an SMTP 5xx) fails the message at once. Both
leave the error for the tenant to read.

Webhooks go out as runs do (``worker/targets/http.py``'s ``WebhookTarget``): signed with
the tenant's secret (both during a rotation's overlap, ``worker/webhook_keys.py``), no
redirect, no proxy, and the address guard applied to the address connected to. E-mail goes
through the operator's SMTP relay (``SmtpRelay``, ``--smtp-url``).
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import psycopg

from crondepot.base.errors import PermanentError, TargetError
from crondepot.job.guard import AddressGuard
from crondepot.notices import message as render
from crondepot.notices import outbox
from crondepot.worker.webhook_keys import SigningKeys, fetch_on

if TYPE_CHECKING:
    from crondepot.maintenance import MaintenanceConfig
    from crondepot.worker.targets.http import WebhookTarget

log = logging.getLogger("crondepot.notices")

SMTP_URL_ENV = "CRONDEPOT_SMTP_URL"
SMTP_FROM_ENV = "CRONDEPOT_SMTP_FROM"
DEFAULT_FROM = "crondepot@localhost"
TIMEOUT_SECONDS = 10.0
TURN_SECONDS = 30.0     # a turn stops claiming after this; the rest is the next turn's
_SCHEMES = {"smtp": "plain", "smtp+starttls": "starttls", "smtps": "tls"}


class SmtpError(TargetError):
    """An e-mail not handed to the relay; ``final``: the relay refused it for good."""

    def __init__(self, message: str, *, final: bool) -> None:
        super().__init__(message)
        self.final = final


@dataclass(frozen=True, slots=True, kw_only=True)
class SmtpRelay:
    """The operator's SMTP relay. ``smtp://host:port`` (plain, for a relay on the same
    host or network), ``smtp+starttls://`` (STARTTLS, port 587 by default) or ``smtps://``
    (TLS from the start, port 465 by default); ``user:password@`` logs in; ``?from=``
    overrides the sender address."""
    host: str
    port: int
    security: str                   # plain | starttls | tls
    sender: str = DEFAULT_FROM
    username: str | None = None
    password: str | None = None
    timeout_s: float = TIMEOUT_SECONDS

    @classmethod
    def from_url(cls, url: str, *, sender: str | None = None) -> SmtpRelay:
        """Raise ValueError naming what is wrong with ``url``."""
        parts = urlsplit(url)
        security = _SCHEMES.get(parts.scheme)
        if security is None:
            raise ValueError(f"{SMTP_URL_ENV}: expected smtp://, smtp+starttls:// or "
                             f"smtps://, got {parts.scheme or 'no'} scheme")
        if not parts.hostname:
            raise ValueError(f"{SMTP_URL_ENV}: no host in the URL")
        try:
            port = parts.port or {"plain": 25, "starttls": 587, "tls": 465}[security]
        except ValueError:
            raise ValueError(f"{SMTP_URL_ENV}: the port is not a number from 1 to 65535") \
                from None
        given = parse_qs(parts.query).get("from", [None])[0]
        return cls(host=parts.hostname, port=port, security=security,
                   sender=sender or given or DEFAULT_FROM,
                   username=unquote(parts.username) if parts.username else None,
                   password=unquote(parts.password) if parts.password else None)

    def describe(self) -> str:
        """The relay without its credentials, for logs and help."""
        return f"{self.security} {self.host}:{self.port} from {self.sender}"

    def send(self, mail: Any) -> None:
        try:
            self._send(mail)
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            raise SmtpError(f"the SMTP relay refused the recipient: {exc.recipients}",
                            final=all(code >= 500 for code in codes)) from None
        except smtplib.SMTPResponseException as exc:
            text = exc.smtp_error.decode("utf-8", "replace") \
                if isinstance(exc.smtp_error, bytes) else str(exc.smtp_error)
            raise SmtpError(f"the SMTP relay answered {exc.smtp_code} {text}",
                            final=exc.smtp_code >= 500) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise SmtpError(f"cannot reach the SMTP relay {self.host}:{self.port}: "
                            f"{exc or type(exc).__name__}", final=False) from None

    def _send(self, mail: Any) -> None:
        context = ssl.create_default_context()
        smtp: smtplib.SMTP
        if self.security == "tls":
            smtp = smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout_s,
                                    context=context)
        else:
            smtp = smtplib.SMTP(self.host, self.port, timeout=self.timeout_s)
        with smtp:
            if self.security == "starttls":
                smtp.starttls(context=context)
            if self.username is not None:
                smtp.login(self.username, self.password or "")
            smtp.send_message(mail)


@dataclass(frozen=True, slots=True)
class TurnResult:
    composed: int
    sent: int
    retried: int
    failed: int


class NoticeSender:
    """One per process that may lead; called by the maintainer with the turn's connection.
    ``guard`` defaults to ``AddressGuard.from_env()`` (``CRONDEPOT_TARGET_ALLOWLIST``), as
    the worker's; ``smtp`` None: e-mail messages wait, with that as their error."""

    def __init__(self, *, smtp: SmtpRelay | None = None, guard: AddressGuard | None = None,
                 window_seconds: float = outbox.WINDOW_SECONDS,
                 timeout_s: float = TIMEOUT_SECONDS,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.smtp = smtp
        self.window_seconds = window_seconds
        self.timeout_s = timeout_s
        self._guard = guard if guard is not None else AddressGuard.from_env()
        self._monotonic = monotonic
        self._webhooks: WebhookTarget | None = None

    def __call__(self, conn: psycopg.Connection[Any], config: MaintenanceConfig) -> TurnResult:
        if config.retention_days:
            outbox.prune(conn, max(1, int(config.retention_days)))
        return self.turn(conn)

    def turn(self, conn: psycopg.Connection[Any], *, now: datetime | None = None,
             jitter: float | None = None) -> TurnResult:
        """Compose, then deliver what is due (``now``: the database clock by default)."""
        composed = outbox.compose(conn, now=now, window_seconds=self.window_seconds)
        keys = SigningKeys(fetch_on(conn))
        counts = {"sent": 0, "retried": 0, "failed": 0}
        deadline = self._monotonic() + TURN_SECONDS
        while self._monotonic() < deadline:
            claimed = outbox.claim(conn, now=now)
            for message in claimed:
                counts[self._deliver(conn, keys, message, now=now, jitter=jitter)] += 1
            if len(claimed) < outbox.CLAIM_BATCH:
                break
        return TurnResult(composed=composed, **counts)

    def _deliver(self, conn: psycopg.Connection[Any], keys: SigningKeys,
                 message: outbox.Claimed, *, now: datetime | None,
                 jitter: float | None) -> str:
        try:
            if message.kind == "webhook":
                self._call_webhook(keys, message)
            else:
                self._mail(message)
        except (TargetError, ValueError) as exc:
            final = isinstance(exc, PermanentError) or getattr(exc, "final", False)
            outbox.record_failure(conn, message, str(exc), final=final, now=now,
                                  jitter=jitter)
            gone = final or message.attempts >= outbox.MAX_ATTEMPTS
            log.warning("notice %d to %s channel not delivered (attempt %d%s): %s",
                        message.id, message.kind, message.attempts,
                        ", given up" if gone else ", will retry", exc,
                        extra={"tenant_id": message.tenant_id, "job_id": message.job_id})
            return "failed" if gone else "retried"
        outbox.record_sent(conn, message, now=now)
        return "sent"

    def _call_webhook(self, keys: SigningKeys, message: outbox.Claimed) -> None:
        from crondepot.worker.targets.http import WebhookCall

        current, *previous = keys.secrets_for(message.tenant_id, message.signing_secret,
                                              message.db_now)
        self._open_webhooks().call(WebhookCall(
            url=message.address, run_id=render.message_id(message),
            body=render.webhook_body(message), signing_secret=current,
            also_signed_with=tuple(previous), timeout_s=self.timeout_s,
            # The id is the same on every attempt: a receiver may drop a repeat, so a
            # timed-out call is retried, never left unknown.
            dedupes=True))

    def _mail(self, message: outbox.Claimed) -> None:
        if self.smtp is None:
            raise SmtpError(f"no SMTP relay configured (the operator sets {SMTP_URL_ENV})",
                            final=False)
        self.smtp.send(render.email(message, sender=self.smtp.sender,
                                    recipient=message.address))

    def _open_webhooks(self) -> WebhookTarget:
        # Imported on the first webhook notice: a process that sends none loads no HTTP
        # client (tests/unit/test_layers.py checks a worker's start-up).
        from crondepot.worker.targets.http import WebhookTarget

        if self._webhooks is None:
            self._webhooks = WebhookTarget(self._guard, slots=1)
        return self._webhooks

    def close(self) -> None:
        if self._webhooks is not None:
            self._webhooks.close()
