"""OpenTelemetry traces of the scheduler and the worker: the switch, and spans that cost
nothing while it is off.

Off unless the environment asks (``exporters``): ``OTEL_TRACES_EXPORTER`` (``otlp``,
``console``), or an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); ``OTEL_SDK_DISABLED=true`` wins over both. Off,
nothing of OpenTelemetry is imported: every function here returns ``NOOP`` (or no headers),
a global read and a call on the worker's path. On, ``configure`` loads
``runtime/otel.py``, the only module that imports the OpenTelemetry SDK, and the rest of
the standard variables (endpoint, headers, sampler, batch sizes, resource) are the SDK's.

One run, one trace, whichever processes touch it. A run's trace id, and the span id of its
root, are derived from the run id (``run_ids``), so the scheduler that wrote the run and
each worker that attempts it put their spans in one trace with nothing shared but the
run id:

    crondepot.run           scheduler: the tick that wrote it (the root; links to crondepot.tick)
    └ crondepot.attempt     worker: one per attempt (links to the crondepot.claim that took it)
      ├ crondepot.call      the target's call; sent on as W3C ``traceparent`` (``headers``)
      └ crondepot.outcome   the outcome's record, until it is committed

Every span of a run has ``crondepot.run_id``. Deriving rather than storing a trace context
in the run's row needs no column, no write and no migration, and whoever holds a run id (a
log line, ``crondepot runs show``) can compute its trace id (``trace_id_hex``). A tick or
a claim serves many runs, so it is linked, not a parent.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crondepot.runtime.otel import Tracing

RUN_ID = "crondepot.run_id"
EXPORTERS = ("otlp", "console")
# The OTLP exporter installed sends protobuf over HTTP (opentelemetry-exporter-otlp-proto-http).
OTLP_PROTOCOL = "http/protobuf"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


def exporters(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The exporters the environment asks for: () while tracing is off. ValueError, naming
    the variable, for a value crondepot cannot honour."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    text = env.get("OTEL_TRACES_EXPORTER", "").strip()
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        if not any(env.get(name, "").strip() for name in _ENDPOINTS):
            return ()
        names = ["otlp"]
    if names == ["none"]:
        return ()
    if any(name not in EXPORTERS for name in names):
        raise ValueError(f"OTEL_TRACES_EXPORTER: expected otlp, console or none (or otlp and "
                         f"console, comma-separated), got {text!r}")
    if "otlp" in names:
        for name in _PROTOCOLS:
            protocol = env.get(name, "").strip()
            if protocol:
                if protocol.lower() != OTLP_PROTOCOL:
                    raise ValueError(f"{name}: crondepot sends traces as {OTLP_PROTOCOL}, "
                                     f"got {protocol!r}")
                break
    return tuple(dict.fromkeys(names))


_on: Tracing | None = None
_configured = False
_lock = threading.Lock()


def configure(service: str, environ: Mapping[str, str] | None = None, *,
              exporter: Any = None) -> bool:
    """Start tracing for this process if the environment asks, once: a later call changes
    nothing. ``service`` is the ``service.name`` unless ``OTEL_SERVICE_NAME`` or
    ``OTEL_RESOURCE_ATTRIBUTES`` names one. ``exporter`` (an SDK ``SpanExporter``: tests,
    benchmarks) turns tracing on whatever the environment says, spans handed to it as they
    end. True if tracing is on. ValueError for a setting crondepot cannot honour."""
    global _on, _configured
    with _lock:
        if _configured:
            return _on is not None
        names = exporters(environ) if exporter is None else ()
        if names or exporter is not None:
            # The SDK is imported here, and only here: a process with tracing off never
            # loads it.
            from crondepot.runtime.otel import Tracing

            _on = Tracing(service, names, exporter)
        _configured = True
        return _on is not None


def enabled() -> bool:
    return _on is not None


def run_ids(run_id: str) -> tuple[int, int]:
    """The trace id of run ``run_id`` and the span id of its root: the first 16 and the next
    8 bytes of a SHA-256 of the run id (never zero, which W3C reserves for "invalid")."""
    digest = hashlib.sha256(b"crondepot.run:" + run_id.encode()).digest()
    return (int.from_bytes(digest[:16], "big") or 1), (int.from_bytes(digest[16:24], "big") or 1)


def trace_id_hex(run_id: str) -> str:
    """Run ``run_id``'s trace id as a trace viewer shows it (32 hex digits)."""
    return f"{run_ids(run_id)[0]:032x}"


class Noop:
    """What the functions here return while tracing is off: a context manager and a span
    that does nothing."""

    __slots__ = ()

    def __enter__(self) -> Noop:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def set(self, key: str, value: Any) -> None:
        return None

    def end(self, outcome: str | None = None) -> None:
        return None

    def then(self, callback: Callable[[], None]) -> Callable[[], None]:
        return callback


NOOP = Noop()
_NO_HEADERS: Mapping[str, str] = MappingProxyType({})


log = logging.getLogger("crondepot.tracing")

# A trace is never worth a run: whatever the SDK raises while making spans is logged (once
# a minute at most) and the run goes on without them. The tick, the claim and the slots call
# these functions outside the error handling of their own work.
_complained_at = -1e9


def span_failed(what: str) -> None:
    """Log (at most once a minute) that making a span failed; the caller goes on."""
    global _complained_at
    now = time.monotonic()
    if now - _complained_at >= 60:
        _complained_at = now
        log.warning("tracing: making the %s span failed; the run goes on without it", what,
                    exc_info=True)


def ticked(scheduler: str, started_ns: int, counts: Mapping[str, int],
           runs: Iterable[tuple[str, str | None]]) -> None:
    """Record a tick that claimed jobs (``started_ns``, wall clock, to now), and the root
    span of each run it wrote: (run id, skip reason or None)."""
    if _on is not None:
        try:
            _on.ticked(scheduler, started_ns, counts, runs)
        except Exception:
            span_failed("tick")


def claimed(worker: str, started_ns: int, run_ids: list[str]) -> Any:
    """Record a claim that took runs (``started_ns`` to now); the context its runs'
    attempts link to (None while off)."""
    if _on is None:
        return None
    try:
        return _on.claimed(worker, started_ns, run_ids)
    except Exception:
        span_failed("claim")
        return None


def attempt(run_id: str, number: int, claim: Any, attributes: Mapping[str, Any]) -> Any:
    """The span of one attempt of a run: current in this thread inside ``with`` (not ended
    there), ended by ``end()`` or by the callback ``then(callback)`` returns, from any
    thread."""
    if _on is None:
        return NOOP
    try:
        return _on.attempt(run_id, number, claim, attributes)
    except Exception:
        span_failed("attempt")
        return NOOP


def call(run_id: str, target: Mapping[str, Any]) -> Any:
    """The span of a target's call, current inside ``with`` and ended on leaving it; an
    exception leaving it marks it failed."""
    if _on is None:
        return NOOP
    try:
        return _on.call(run_id, target)
    except Exception:
        span_failed("call")
        return NOOP


def outcome(run_id: str) -> Any:
    """The span of an outcome's record, started now, a child of the current span; ended by
    ``end(outcome)``, from any thread."""
    if _on is None:
        return NOOP
    try:
        return _on.outcome(run_id)
    except Exception:
        span_failed("outcome")
        return NOOP


def headers() -> Mapping[str, str]:
    """The current span's context as message headers (W3C ``traceparent``, and
    ``tracestate``, or what ``OTEL_PROPAGATORS`` names): none while off."""
    if _on is None:
        return _NO_HEADERS
    try:
        return _on.headers()
    except Exception:
        span_failed("headers")
        return _NO_HEADERS
