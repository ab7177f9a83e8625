"""``python -m crondepot_testkit.traced COMMAND …``: a crondepot command whose spans are kept
in memory (the SDK's InMemorySpanExporter) and written, when the process exits, to the JSON
file ``CRONDEPOT_TEST_SPANS`` names, with the OpenTelemetry modules the process loaded. So a
test follows a run's spans across real scheduler and worker processes.

Tracing is on only with ``CRONDEPOT_TEST_TRACING=on``; otherwise the command runs as it
would from the environment (off, unless an OTEL_* variable says otherwise), and the file
tells which OpenTelemetry modules it loaded all the same.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
from typing import Any


def span_document(span: Any) -> dict[str, Any]:
    """One finished SDK span as JSON: ids in hex, as a ``traceparent`` carries them."""
    return {
        "name": span.name,
        "trace_id": f"{span.context.trace_id:032x}",
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": None if span.parent is None else f"{span.parent.span_id:016x}",
        "parent_trace_id": None if span.parent is None else f"{span.parent.trace_id:032x}",
        "kind": span.kind.name,
        "attributes": {k: list(v) if isinstance(v, tuple) else v
                       for k, v in (span.attributes or {}).items()},
        "links": [{"trace_id": f"{link.context.trace_id:032x}",
                   "span_id": f"{link.context.span_id:016x}"} for link in span.links],
        "status": span.status.status_code.name,
        "service": span.resource.attributes.get("service.name"),
    }


def main() -> int:
    out = os.environ["CRONDEPOT_TEST_SPANS"]
    exporter: Any = None
    if os.environ.get("CRONDEPOT_TEST_TRACING") == "on":
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        from crondepot.runtime import tracing

        exporter = InMemorySpanExporter()
        tracing.configure(f"crondepot-{sys.argv[1]}", exporter=exporter)

    def dump() -> None:
        spans = [] if exporter is None else [span_document(s)
                                             for s in exporter.get_finished_spans()]
        modules = sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")
        with open(out, "w") as file:
            json.dump({"spans": spans, "modules": modules}, file)

    atexit.register(dump)
    from crondepot.cli import main as crondepot

    return crondepot(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
