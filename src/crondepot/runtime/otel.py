"""The OpenTelemetry SDK behind ``runtime/tracing.py``: imported by ``tracing.configure``
only when tracing is on, so a process with tracing off never loads it.

Spans go to the exporters the environment names through a batch processor (its own
thread: a slot never waits on the collector), or to a test's exporter as they end. The
provider is also made the process's global one, so that a Python handler's own spans
(through the OpenTelemetry API) nest under its call and leave with crondepot's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from crondepot.base.version import __version__
from crondepot.runtime.tracing import NOOP, RUN_ID, Noop, run_ids, span_failed

# No parent: a span started in it is the root of a trace of its own.
_ROOT = otel_context.Context()
# The broker kinds: the messaging system, and the target member naming the destination.
_MESSAGING = {"amqp": ("rabbitmq", "exchange"), "nats": ("nats", "subject"),
              "redis": ("redis", "stream")}


class RunIds(RandomIdGenerator):
    """Random ids, except for a run's root span, which takes the ids derived from its run
    id (``tracing.run_ids``), set for this thread by ``fixed`` while it starts."""

    def __init__(self) -> None:
        self._fixed = threading.local()

    @contextmanager
    def fixed(self, ids: tuple[int, int]) -> Iterator[None]:
        self._fixed.ids = ids
        try:
            yield
        finally:
            self._fixed.ids = None

    def _ids(self) -> tuple[int, int] | None:
        ids: tuple[int, int] | None = getattr(self._fixed, "ids", None)
        return ids

    def generate_trace_id(self) -> int:
        ids = self._ids()
        return super().generate_trace_id() if ids is None else ids[0]

    def generate_span_id(self) -> int:
        ids = self._ids()
        return super().generate_span_id() if ids is None else ids[1]

    def is_trace_id_random(self) -> bool:
        return self._ids() is None


class Current:
    """A span made current in this thread inside ``with`` (not ended on leaving: an attempt
    ends when its outcome is written, maybe in the outcome writer's thread), ended once by
    ``end``."""

    __slots__ = ("_ended", "_token", "span")

    def __init__(self, span: Span) -> None:
        self.span = span
        self._token: object = None
        self._ended = False

    def __enter__(self) -> Current:
        self._token = otel_context.attach(trace.set_span_in_context(self.span))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: object) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]
        if error is not None and self.span.is_recording():
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            code = getattr(error, "status_code", None)
            if isinstance(code, int):
                self.span.set_attribute("http.response.status_code", code)

    def set(self, key: str, value: Any) -> None:
        self.span.set_attribute(key, value)

    def end(self, outcome: str | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            if outcome is not None:
                self.span.set_attribute("crondepot.outcome", outcome)
            self.span.end()
        except Exception:       # a trace is never worth a run (tracing.py)
            span_failed("end of a")

    def then(self, callback: Callable[[], None]) -> Callable[[], None]:
        def ended() -> None:
            try:
                self.end()
            finally:
                callback()      # the slot is given back whatever the span did
        return ended


class Scoped(Current):
    """A span current inside ``with`` and ended on leaving it."""

    __slots__ = ()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: object) -> None:
        super().__exit__(kind, error, tb)
        self.end()


class Tracing:
    """Tracing on: the provider, its tracer, and the spans of runs."""

    def __init__(self, service: str, names: Iterable[str],
                 exporter: SpanExporter | None = None) -> None:
        resource = Resource.create()      # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: service}))
        self._ids = RunIds()
        self.provider = TracerProvider(resource=resource, id_generator=self._ids)
        if exporter is not None:
            self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        for name in names:
            self.provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
        trace.set_tracer_provider(self.provider)
        self._tracer = self.provider.get_tracer("crondepot", __version__)
        self._sampler = self.provider.sampler

    def ticked(self, scheduler: str, started_ns: int, counts: Mapping[str, int],
               runs: Iterable[tuple[str, str | None]]) -> None:
        ended_ns = time.time_ns()
        tick = self._tracer.start_span(
            "crondepot.tick", context=_ROOT, start_time=started_ns,
            attributes={"crondepot.scheduler": scheduler,
                        **{f"crondepot.{name}": count for name, count in counts.items()}})
        tick.end(ended_ns)
        links = [Link(tick.get_span_context())]
        for run_id, skip_reason in runs:
            attributes: dict[str, Any] = {RUN_ID: run_id}
            if skip_reason is not None:
                attributes["crondepot.skip_reason"] = skip_reason
            with self._ids.fixed(run_ids(run_id)):
                span = self._tracer.start_span("crondepot.run", context=_ROOT, links=links,
                                               start_time=started_ns, attributes=attributes)
            span.end(ended_ns)

    def claimed(self, worker: str, started_ns: int, claimed: list[str]) -> SpanContext:
        span = self._tracer.start_span(
            "crondepot.claim", context=_ROOT, start_time=started_ns,
            attributes={"crondepot.worker": worker, "crondepot.claimed": len(claimed),
                        "crondepot.run_ids": claimed})
        span.end()
        return span.get_span_context()

    def attempt(self, run_id: str, number: int, claim: SpanContext | None,
                attributes: Mapping[str, Any]) -> Current:
        trace_id, root = run_ids(run_id)
        # The run's root as a remote parent: written by a scheduler, maybe on another host.
        # Sampled as the scheduler's sampler sampled the root, from the same trace id.
        flags = self._flags(trace_id)
        root_context = SpanContext(trace_id, root, is_remote=True, trace_flags=flags)
        if not flags.sampled:
            # Not traced: no span of its own, nor of its call or outcome (call, outcome);
            # the root's context goes on as the current span, so the target still gets the
            # run's trace id, marked not sampled.
            return Current(NonRecordingSpan(root_context))
        span = self._tracer.start_span(
            "crondepot.attempt",
            context=trace.set_span_in_context(NonRecordingSpan(root_context)),
            links=[Link(claim)] if claim is not None else (),
            attributes={RUN_ID: run_id, "crondepot.attempt": number, **attributes})
        return Current(span)

    def _flags(self, trace_id: int) -> TraceFlags:
        decision = self._sampler.should_sample(_ROOT, trace_id, "crondepot.run").decision
        sampled = decision is Decision.RECORD_AND_SAMPLE
        return TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)

    def call(self, run_id: str, target: Mapping[str, Any]) -> Scoped | Noop:
        if not trace.get_current_span().is_recording():     # the attempt is not sampled
            return NOOP
        kind, attributes = _call_attributes(run_id, target)
        return Scoped(self._tracer.start_span("crondepot.call", kind=kind,
                                              attributes=attributes))

    def outcome(self, run_id: str) -> Current | Noop:
        if not trace.get_current_span().is_recording():
            return NOOP
        return Current(self._tracer.start_span("crondepot.outcome",
                                               attributes={RUN_ID: run_id}))

    def headers(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier


def _exporter(name: str) -> SpanExporter:
    if name == "console":
        return ConsoleSpanExporter()
    # Imported for "otlp" only: it brings protobuf and requests. It reads the
    # OTEL_EXPORTER_OTLP_* variables itself (endpoint, headers, timeout, compression).
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def _call_attributes(run_id: str, target: Mapping[str, Any]) -> tuple[SpanKind, dict[str, Any]]:
    """The call span's kind and attributes (OpenTelemetry's semantic conventions where one
    fits). Never a webhook's full URL: its query may hold a token."""
    kind = str(target.get("type"))
    attributes: dict[str, Any] = {RUN_ID: run_id, "crondepot.target.type": kind}
    if kind == "http":
        attributes["http.request.method"] = "POST"
        try:
            url = urlsplit(str(target.get("url", "")))
            attributes["server.address"] = url.hostname or ""
            attributes["server.port"] = url.port or (443 if url.scheme == "https" else 80)
        except ValueError:      # a port out of range: the call fails and says so
            pass
        return SpanKind.CLIENT, attributes
    if kind in _MESSAGING:
        system, member = _MESSAGING[kind]
        attributes.update({"messaging.system": system, "messaging.operation.type": "send",
                           "messaging.destination.name": str(target.get(member, "")),
                           "messaging.message.id": run_id})
        if kind == "amqp":
            attributes["messaging.rabbitmq.destination.routing_key"] = str(
                target.get("routing_key", ""))
        return SpanKind.PRODUCER, attributes
    if kind == "python":
        attributes["code.function.name"] = str(target.get("handler", ""))
    return SpanKind.INTERNAL, attributes
