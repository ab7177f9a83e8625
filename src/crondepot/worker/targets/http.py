"""The HTTP webhook target: one signed POST per attempt, and what its outcome means.

Owns the request (body, Standard Webhooks headers, ``Idempotency-Key: <run_id>``, and with
tracing on the call span's W3C ``traceparent``: runtime/tracing.py) and the
classification of what came back: 2xx done; 408, 429 and 5xx temporary (``Retry-After``
honoured); other statuses permanent. A failure before anything was sent is temporary. A
failure after the request may have reached the target is ambiguous: it is retried only
when the target drops repeated Idempotency-Keys, otherwise it is ``OutcomeUnknown`` and a
person decides, because a second SMS is worse than a missing one.

It must never follow a redirect, use a proxy or ``.netrc`` from the environment, or connect
to an address the ``AddressGuard`` has not checked at connect time (``GuardedBackend``).
"""

from __future__ import annotations

import email.utils
import itertools
import json
import math
import ssl
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

from crondepot.base.errors import PermanentError, TargetError, TemporaryError
from crondepot.db import UNAVAILABLE
from crondepot.job.guard import AddressGuard, Resolver, resolve
from crondepot.runtime import tracing
from crondepot.worker.targets.backend import GuardedBackend
from crondepot.worker.targets.base import OutcomeUnknown
from crondepot.worker.targets.webhook_signature import sign_all
from crondepot.worker.webhook_keys import SigningKeys

if TYPE_CHECKING:
    from crondepot.queue import ClaimedRun
    from crondepot.worker.targets.base import TargetSetup

RETRY_AFTER_CAP_SECONDS = 3600.0
EXCERPT_CHARS = 200
# Enough of a response to drain a typical reply (so the connection is reused) and to
# quote an error; a target that sends more gets its connection closed instead.
_MAX_BODY_BYTES = 64 * 1024
# An idle connection is dropped before the shortest common server keep-alive (gunicorn: 2 s).
# Reusing one the server is closing fails *after* sending, which for a target that does not
# dedupe is an OutcomeUnknown; expiring early keeps that race rare.
KEEPALIVE_EXPIRY_SECONDS = 1.5
# Idle connections kept besides one per slot (to the other hosts slots called lately).
SPARE_CONNECTIONS = 100


def connection_limits(slots: int) -> httpx.Limits:
    """Pool limits for ``slots`` threads calling at once: as many connections kept alive as
    may be open, and room for every slot's call.

    httpcore's sync pool (1.0.9, encode/httpcore#1110) can close a connection it has just
    handed to a request whose thread has not started using it yet: it does so when it trims
    idle connections above ``max_keepalive_connections``, or closes one to make room at
    ``max_connections``. The request then fails after it was sent ("[Errno 9] Bad file
    descriptor", seen in a chaos run with two gateways x 15 slots against a keep-alive limit
    of 20): an OutcomeUnknown for a target that does not dedupe. With the two limits equal
    the pool never trims, and with room for every slot it never makes room while calls are
    in flight."""
    size = slots + SPARE_CONNECTIONS
    return httpx.Limits(max_connections=size, max_keepalive_connections=size,
                        keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookCall:
    url: str
    run_id: str
    body: bytes            # the JSON document, already encoded
    signing_secret: str
    timeout_s: float
    dedupes: bool          # the target drops repeated Idempotency-Keys
    # Secrets that sign too, after signing_secret: the old one during a rotation's overlap.
    also_signed_with: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WebhookResult:
    status_code: int
    duration_s: float


def webhook_body(
    *,
    run_id: str,
    job_id: int,
    job_key: str | None,
    scheduled_at: datetime,
    due_at: datetime,
    attempt: int,
    payload: dict[str, Any],
) -> bytes:
    """The JSON document a webhook receives, compact, instants in UTC with ``Z``."""
    document = {
        "run_id": run_id,
        "job_id": job_id,
        "job_key": job_key,
        "scheduled_at": _utc_text(scheduled_at, "scheduled_at"),
        "due_at": _utc_text(due_at, "due_at"),
        "attempt": attempt,
        "payload": payload,
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _utc_text(instant: datetime, name: str) -> str:
    if instant.tzinfo is None or instant.utcoffset() is None:
        raise ValueError(f"{name}: expected an aware datetime, got naive {instant.isoformat()}")
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


# Threads per httpx client. httpcore's sync pool walks every connection it holds, under one
# lock, on each request and each response close: one pool for a worker's hundreds of slots
# cost milliseconds of CPU per call and capped a 320-slot worker near 140 calls/s
# (bench/webhook_pool.py, bench/fullday.py). Slots are spread over clients of about this
# many threads each, so a walk stays short.
THREADS_PER_CLIENT = 32


class WebhookTarget:
    """Sends webhook calls through pooled, thread-safe ``httpx.Client``s: one per
    ``THREADS_PER_CLIENT`` slots, each calling thread keeping to the one it was given.

    ``guard`` defaults to ``AddressGuard.from_env()``. ``resolver`` (host, port → addresses)
    and ``clock`` (unix seconds) are seams for tests; ``ssl_context`` is for private CAs
    (by default certifi's roots, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set).
    ``slots``: how many threads call at once (the worker's concurrency), which sizes the
    clients and their connection pools (``connection_limits``).
    """

    def __init__(
        self,
        guard: AddressGuard | None = None,
        *,
        user_agent: str = "crondepot/0.1",
        resolver: Resolver = resolve,
        ssl_context: ssl.SSLContext | None = None,
        clock: Callable[[], float] = time.time,
        limits: httpx.Limits | None = None,
        slots: int = 20,
    ) -> None:
        backend = GuardedBackend(guard if guard is not None else AddressGuard.from_env(), resolver)
        self._clock = clock
        context = ssl_context or httpx.create_ssl_context()
        count = max(1, math.ceil(slots / THREADS_PER_CLIENT))
        # Threads take the clients in turn, so each has at most ceil(slots / count) of the
        # slots' threads, which its limits leave room for (connection_limits says why).
        self._clients = [httpx.Client(
            transport=_GuardedTransport(
                backend, context, limits or connection_limits(math.ceil(slots / count))
            ),
            headers={"User-Agent": user_agent},
            follow_redirects=False,
            trust_env=False,  # no proxy or .netrc: either would bypass or leak past the guard
        ) for _ in range(count)]
        self._turn = itertools.count()
        self._mine = threading.local()

    @property
    def _client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._mine, "client", None)
        if client is None:
            client = self._mine.client = self._clients[next(self._turn) % len(self._clients)]
        return client

    def call(self, call: WebhookCall) -> WebhookResult:
        """POST the call; raise TemporaryError, PermanentError or OutcomeUnknown on failure."""
        url = _target_url(call.url)
        started = time.perf_counter()
        try:
            with self._client.stream(
                "POST", url, content=call.body, headers=self._headers(call),
                timeout=call.timeout_s,
            ) as response:
                excerpt = _excerpt(response)
        except httpx.TransportError as exc:
            raise _transport_failure(exc, call, url) from exc
        duration = time.perf_counter() - started
        _raise_for_status(response, excerpt, url, now=self._clock())
        return WebhookResult(status_code=response.status_code, duration_s=duration)

    def _headers(self, call: WebhookCall) -> dict[str, str]:
        # A fresh timestamp (and so signature) per attempt, as Standard Webhooks expects;
        # the id and the Idempotency-Key stay the run id on every attempt.
        timestamp = int(self._clock())
        try:
            signature = sign_all((call.signing_secret, *call.also_signed_with), call.run_id,
                                 timestamp, call.body)
        except ValueError as exc:
            raise PermanentError(str(exc)) from None
        return {
            "Content-Type": "application/json",
            "Idempotency-Key": call.run_id,
            "webhook-id": call.run_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": signature,
            **tracing.headers(),
        }

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def __enter__(self) -> WebhookTarget:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _GuardedTransport(httpx.HTTPTransport):
    """httpx's own transport, its connection pool rebuilt on the guarded backend.

    httpx offers no public way to pass an httpcore network backend, so the pool is
    replaced after construction; everything else (exception mapping, streaming) is
    httpx's. The tests that refuse ``localhost`` fail if this ever stops taking effect.
    """

    def __init__(
        self, backend: GuardedBackend, ssl_context: ssl.SSLContext, limits: httpx.Limits
    ) -> None:
        super().__init__(verify=ssl_context, trust_env=False, limits=limits)
        self._pool.close()
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )


def _target_url(text: str) -> httpx.URL:
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise PermanentError(f"target url {text!r} is not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise PermanentError(f"target url: expected an http:// or https:// URL, got {text!r}")
    return url


def _where(url: httpx.URL) -> str:
    """The URL for messages, without credentials or a query that may hold a token."""
    return str(url.copy_with(username=None, password=None, query=None, fragment=None))


def _excerpt(response: httpx.Response) -> str:
    """The start of the response body, read up to a bound; best effort.

    The body is read raw (``iter_raw``) and decoded here with a bound on the *decoded*
    size: httpx's own decoding (``iter_bytes``) inflates each network chunk whole, so a
    target answering 64 KiB of gzip would hand the worker 64 MiB in one piece (a 260 KB
    gzip bomb cost a worker ~200 MB). At most ``_MAX_BODY_BYTES`` are read and kept."""
    raw = bytearray()
    try:
        for chunk in response.iter_raw():
            raw += chunk
            if len(raw) >= _MAX_BODY_BYTES:
                break
    except httpx.TransportError:
        pass  # the status already decides the outcome; the body is only for the message
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    return _decoded(bytes(raw), encoding).decode("utf-8", "replace")[:EXCERPT_CHARS]


def _decoded(raw: bytes, encoding: str) -> bytes:
    """At most ``_MAX_BODY_BYTES`` of ``raw`` decoded; a note for an encoding not read."""
    if encoding in ("", "identity"):
        return raw[:_MAX_BODY_BYTES]
    wbits = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16,
             "deflate": zlib.MAX_WBITS}.get(encoding)
    if wbits is None:
        return f"({encoding}-encoded body not shown)".encode()
    try:
        return zlib.decompressobj(wbits).decompress(raw, _MAX_BODY_BYTES)
    except zlib.error:
        if encoding != "deflate":
            return b"(undecodable body)"
    try:   # "deflate" is often sent without the zlib header, as httpx's decoder allows
        return zlib.decompressobj(-zlib.MAX_WBITS).decompress(raw, _MAX_BODY_BYTES)
    except zlib.error:
        return b"(undecodable body)"


def _raise_for_status(
    response: httpx.Response, excerpt: str, url: httpx.URL, *, now: float
) -> None:
    status = response.status_code
    if 200 <= status < 300:
        return
    where = _where(url)
    if 300 <= status < 400:
        location = response.headers.get("Location", "(no Location header)")
        raise PermanentError(
            f"HTTP {status} from {where}: redirect to {location} not followed "
            "(point the job at the final URL)", status_code=status
        )
    message = f"HTTP {status} from {where}: {excerpt!r}"
    if status in (408, 429) or 500 <= status < 600:
        hint = response.headers.get("Retry-After")
        raise TemporaryError(
            message, retry_after_seconds=None if hint is None else retry_after(hint, now=now),
            status_code=status,
        )
    raise PermanentError(message, status_code=status)


def retry_after(value: str, *, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (seconds or HTTP-date), capped.

    None when the value cannot be read; a date in the past means 0.
    """
    text = value.strip()
    if text.isascii() and text.isdigit():     # "²".isdigit() is True; float("²") raises
        seconds = float(text)
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # "-0000" zones parse naive; HTTP dates are GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_SECONDS)


# Failures that happen before a byte of the request can have left: safe to retry.
_NOTHING_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Failures that say the request itself is wrong: retrying cannot help.
_REQUEST_INVALID = (httpx.UnsupportedProtocol, httpx.LocalProtocolError)


def _transport_failure(exc: httpx.TransportError, call: WebhookCall, url: httpx.URL) -> TargetError:
    where = _where(url)
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, _NOTHING_SENT):
        return TemporaryError(f"cannot connect to {where}: {detail} (nothing was sent)")
    if isinstance(exc, _REQUEST_INVALID):
        return PermanentError(f"cannot send to {where}: {detail}")
    what = (
        f"no response from {where} within {call.timeout_s:g} s"
        if isinstance(exc, httpx.TimeoutException)
        else f"connection to {where} failed after the request was sent ({detail})"
    )
    if call.dedupes:
        return TemporaryError(f"{what}; retrying, the target drops repeated Idempotency-Keys")
    return OutcomeUnknown(
        f"outcome unknown: {what}; the target may have acted and does not drop repeated "
        "Idempotency-Keys, so the run is not retried automatically"
    )


class HttpTarget:
    """The ``http`` target: the run as a signed webhook POST, through ``WebhookTarget``."""

    kind = "http"

    def __init__(self, webhooks: WebhookTarget, signing_keys: SigningKeys) -> None:
        self._webhooks = webhooks
        self._signing_keys = signing_keys

    def call(self, run: ClaimedRun, tenant: str) -> dict[str, Any] | None:
        target = run.target
        body = webhook_body(run_id=run.run_id, job_id=run.job_id, job_key=run.job_key,
                            scheduled_at=run.nominal_at, due_at=run.due_at,
                            attempt=run.attempt, payload=run.payload)
        current, *previous = self._secrets(run)
        answer = self._webhooks.call(WebhookCall(
            url=target["url"], run_id=run.run_id, body=body, signing_secret=current,
            also_signed_with=tuple(previous), timeout_s=float(target.get("timeout_s", 10)),
            dedupes=bool(target.get("dedupes", False))))
        return {"status_code": answer.status_code}

    def _secrets(self, run: ClaimedRun) -> tuple[str, ...]:
        """The secrets to sign with (two during a rotation's overlap). A database that
        cannot say is a temporary failure: nothing was sent yet."""
        try:
            return self._signing_keys.secrets_for(run.tenant_id, run.signing_secret,
                                                  run.db_now)
        except UNAVAILABLE as exc:
            raise TemporaryError(f"cannot read the tenant's signing secrets: {exc} "
                                 "(nothing was sent)") from None


def make(setup: TargetSetup) -> HttpTarget:
    return HttpTarget(setup.webhooks(), setup.signing_keys)
