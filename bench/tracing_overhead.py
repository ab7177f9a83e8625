"""Tracing's cost on the worker's path (runtime/tracing.py): the workers benchmark's drain
(``bench/workers.py``: ``size`` ready runs of the no-op Python handler in a fresh database,
P real ``crondepot worker`` processes at 100 slots) with tracing off and on, interleaved
round by round so the machine's drift falls on every variant alike.

Variants (``--variants``, comma-separated, in the order they run each round; reversed in
odd rounds):

- ``off``: no OTEL_* variable, the default: every span is one shared no-op and no
  OpenTelemetry module is loaded;
- ``otlp``: ``OTEL_EXPORTER_OTLP_ENDPOINT`` names a loopback sink in this process that
  answers every export and counts its spans: the SDK, its batch processor and the
  OTLP/HTTP exporter's encoding and POSTs run in the worker, as in production (the sink's
  own CPU is not counted);
- ``otlp-1pct``: the same with ``OTEL_TRACES_SAMPLER=parentbased_traceidratio`` at 0.01:
  one run in a hundred traced whole, the others' spans not recorded;
- ``before``: tracing absent, the code of another commit (``--baseline REV``, say the
  commit before tracing came), as bench/worker_ab.py runs it.

Run it (PostgreSQL 15+, an admin URL that may CREATE DATABASE):

    python bench/tracing_overhead.py                        # off,otlp; P=1; 4 rounds
    python bench/tracing_overhead.py --variants before,off,otlp,otlp-1pct --baseline 07e52f4

It prints one idle worker's start-up CPU per variant, each drain, then per variant the
medians of first->last runs/s, worker CPU µs per run (net of start-up) and the spans the
sink received per run (3 a run, plus a claim's: fewer means the batch processor dropped
some; ``otlp-1pct``: about 0.03). Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from common import (
    DEFAULT_ADMIN_URL,
    BenchDatabases,
    compile_crondepot,
    run_interruptibly,
    variants_and_baseline,
)
from worker_ab import source_of
from workers import BEST_CONCURRENCY, Drain, drain, load_line, server_report, startup_cpu

VARIANTS = ("off", "otlp", "otlp-1pct", "before")


class SpanSink:
    """An OTLP/HTTP trace receiver on loopback that keeps nothing but a count of spans."""

    def __init__(self) -> None:
        self.spans = 0
        self._lock = threading.Lock()
        sink = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
                    ExportTraceServiceRequest,
                )

                request = ExportTraceServiceRequest()
                request.ParseFromString(self.rfile.read(int(self.headers["Content-Length"])))
                count = sum(len(scope.spans) for resource in request.resource_spans
                            for scope in resource.scope_spans)
                with sink._lock:
                    sink.spans += count
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def take(self) -> int:
        with self._lock:
            count, self.spans = self.spans, 0
        return count

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextlib.contextmanager
def _environment(name: str, sink: SpanSink) -> Iterator[None]:
    """The variant's OTEL_* variables, for the children started meanwhile."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("OTEL_")}
    for key in saved:
        del os.environ[key]
    if name.startswith("otlp"):
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.endpoint
    if name == "otlp-1pct":
        os.environ.update(OTEL_TRACES_SAMPLER="parentbased_traceidratio",
                          OTEL_TRACES_SAMPLER_ARG="0.01")
    try:
        yield
    finally:
        for key in [k for k in os.environ if k.startswith("OTEL_")]:
            del os.environ[key]
        os.environ.update(saved)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL)
    parser.add_argument("--variants", default="off,otlp",
                        help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--processes", type=int, default=1, help="worker processes (1)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--size", type=int, default=20_000, help="runs per drain (20000)")
    parser.add_argument("--baseline", metavar="REV",
                        help="the commit whose code the 'before' variant's workers run")
    args = parser.parse_args(argv)
    names = variants_and_baseline(parser, args, VARIANTS, "before")
    with source_of(args.baseline) as source:
        return run_interruptibly(lambda: run(args, names, source), load_line)


def run(args: argparse.Namespace, names: list[str], baseline: str | None) -> None:
    for line in server_report(args.db):
        print(line)
    print(f"command: {' '.join(['python', *sys.argv])}\n", flush=True)
    compile_crondepot()
    databases = BenchDatabases(args.db, "crondepot_trace_")
    sink = SpanSink()
    system, p = "crondepot-best", args.processes
    try:
        startup: dict[str, float] = {}
        for name in names:
            source = baseline if name == "before" else None
            with _environment(name, sink):
                startup[name] = startup_cpu(databases, system, BEST_CONCURRENCY, source)
            sink.take()
            print(f"  {name:>6}: one idle worker process, start-up CPU {startup[name]:.2f} s",
                  flush=True)
        results: dict[str, list[tuple[Drain, int]]] = {name: [] for name in names}
        for round_ in range(max(1, args.rounds)):
            for name in names if round_ % 2 == 0 else names[::-1]:
                source = baseline if name == "before" else None
                with _environment(name, sink):
                    d = drain(databases, system, args.size, p, BEST_CONCURRENCY, (), source)
                d.startup_cpu = startup[name]
                spans = sink.take()
                results[name].append((d, spans))
                print(f"  {name:>6} P={p}: first->last {d.rate_f2l:>7,.0f} runs/s, worker "
                      f"{d.worker_cpu / d.size * 1e6:5.1f} us/run (net {d.net_worker_us:5.1f})"
                      f", spans {spans / d.size:4.2f}/run", flush=True)
    finally:
        sink.close()
    print(f"\nmedians of {args.rounds} rounds, {args.size:,} runs, P={p}:")
    for name in names:
        drains = results[name]
        print(f"  {name:>6}: first->last "
              f"{statistics.median(d.rate_f2l for d, _ in drains):>7,.0f} runs/s, worker "
              f"{statistics.median(d.net_worker_us for d, _ in drains):5.1f} us/run net of "
              f"start-up ({startup[name]:.2f} s), spans "
              f"{statistics.median(s / d.size for d, s in drains):4.2f}/run")


if __name__ == "__main__":
    sys.exit(main())
