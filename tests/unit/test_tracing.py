"""The tracing switch and a run's ids (runtime/tracing.py); what the SDK path does is run in
subprocesses, since tracing is configured once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from crondepot.runtime import tracing


@pytest.mark.parametrize(("environ", "expected"), [
    ({}, ()),
    ({"OTEL_SERVICE_NAME": "reminders"}, ()),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",)),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ("otlp",)),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, ()),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
    ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
    ({"OTEL_TRACES_EXPORTER": " OTLP , console,otlp"}, ("otlp", "console")),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ()),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, ()),
    ({"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, ()),
    ({"OTEL_SDK_DISABLED": "false", "OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
     ("otlp",)),
    # the traces' own protocol wins over the general one
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
      "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, ("otlp",)),
    ({"OTEL_TRACES_EXPORTER": "console", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
     ("console",)),
])
def test_tracing_is_on_only_when_the_environment_names_an_exporter_or_endpoint(
        environ: dict[str, str], expected: tuple[str, ...]) -> None:
    assert tracing.exporters(environ) == expected


@pytest.mark.parametrize(("environ", "says"), [
    ({"OTEL_TRACES_EXPORTER": "zipkin"},
     "OTEL_TRACES_EXPORTER: expected otlp, console or none (or otlp and console, "
     "comma-separated), got 'zipkin'"),
    ({"OTEL_TRACES_EXPORTER": "otlp,none"}, "got 'otlp,none'"),
    ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
     "OTEL_EXPORTER_OTLP_PROTOCOL: crondepot sends traces as http/protobuf, got 'grpc'"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317",
      "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
     "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: crondepot sends traces as http/protobuf, got "
     "'http/json'"),
])
def test_a_setting_crondepot_cannot_honour_is_an_error_naming_the_variable(
        environ: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError) as raised:
        tracing.exporters(environ)
    assert says in str(raised.value)


def test_a_runs_trace_ids_are_derived_from_its_run_id_alone() -> None:
    trace_id, span_id = tracing.run_ids("42:1791171000")
    assert (trace_id, span_id) == tracing.run_ids("42:1791171000")
    assert 0 < trace_id < 2**128 and 0 < span_id < 2**64
    assert tracing.run_ids("42:1791171001")[0] != trace_id
    assert tracing.trace_id_hex("42:1791171000") == f"{trace_id:032x}"
    assert len({tracing.run_ids(f"7:{s}")[0] for s in range(1000)}) == 1000


def test_while_off_every_span_is_the_no_op_and_no_header_is_sent() -> None:
    assert not tracing.enabled()      # nothing in the test process turns tracing on
    assert dict(tracing.headers()) == {}
    assert tracing.call("1:2", {"type": "http"}) is tracing.NOOP
    assert tracing.outcome("1:2") is tracing.NOOP
    assert tracing.attempt("1:2", 1, None, {}) is tracing.NOOP
    assert tracing.claimed("w", 0, ["1:2"]) is None

    def callback() -> None:
        return None

    assert tracing.NOOP.then(callback) is callback
    with tracing.NOOP as span:
        span.set("crondepot.run_id", "1:2")
        span.end("succeeded")


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env={**clean, **env}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_process_with_tracing_off_loads_no_opentelemetry_module() -> None:
    out = _python("""
        import json, sys
        from crondepot.runtime import tracing
        import crondepot.cli.worker, crondepot.cli.scheduler, crondepot.worker.loop
        import crondepot.scheduler.loop, crondepot.worker.execute
        import crondepot.worker.targets.http, crondepot.worker.targets.python
        import crondepot.worker.targets.amqp, crondepot.worker.targets.nats
        assert tracing.configure("crondepot-worker") is False
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry"))))
    """, OTEL_SDK_DISABLED="true", OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9")
    assert json.loads(out) == []


def test_the_redis_target_loads_no_tracing_sdk_while_off() -> None:
    """redis-py imports OpenTelemetry's metrics SDK itself whenever it is installed
    (redis/observability); the tracing SDK and its exporter stay unloaded."""
    out = _python("""
        import json, sys
        from crondepot.runtime import tracing
        import crondepot.worker.targets.redis
        assert tracing.configure("crondepot-worker") is False
        print(json.dumps(sorted(m for m in sys.modules if m.startswith("opentelemetry")
                                or m == "crondepot.runtime.otel")))
    """)
    loaded = json.loads(out)
    assert [m for m in loaded if m.startswith(("opentelemetry.sdk.trace",
                                               "opentelemetry.exporter",
                                               "crondepot.runtime.otel"))] == []


def test_a_workers_attempts_are_sampled_as_the_schedulers_roots_were() -> None:
    """With a trace-id ratio sampler, the scheduler (a run's root) and the worker (its
    attempts, under the root as a remote parent) decide alike: both from the run's trace
    id, so a run's trace is whole or absent."""
    out = _python("""
        import json, time
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from crondepot.runtime import tracing
        exporter = InMemorySpanExporter()
        assert tracing.configure("both", exporter=exporter)
        runs = [f"7:{1791171000 + i}" for i in range(400)]
        tracing.ticked("s1", time.time_ns(), {"claimed": 400}, [(r, None) for r in runs])
        sent = {}
        for run_id in runs:
            span = tracing.attempt(run_id, 1, None, {})
            with span:
                with tracing.call(run_id, {"type": "python", "handler": "sms.send"}):
                    sent[run_id] = dict(tracing.headers())["traceparent"]
            span.end()
        kept = {}
        for s in exporter.get_finished_spans():
            kept.setdefault(s.name, set()).add(s.attributes.get("crondepot.run_id"))
        print(json.dumps({"sent": sent} | {k: sorted(v, key=str) for k, v in kept.items()}))
    """, OTEL_TRACES_SAMPLER="parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG="0.5")
    kept = json.loads(out)
    roots = set(kept["crondepot.run"])
    assert 100 < len(roots) < 300
    assert set(kept["crondepot.attempt"]) == set(kept["crondepot.call"]) == roots
    # a run left out still sends its trace id on, marked not sampled, under its root's id
    for run_id, traceparent in kept["sent"].items():
        trace_id, root_id = tracing.run_ids(run_id)
        assert traceparent.startswith(f"00-{trace_id:032x}-")
        assert traceparent.endswith("-01" if run_id in roots else f"-{root_id:016x}-00")


def test_the_service_name_is_the_environments_when_it_names_one() -> None:
    code = """
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from crondepot.runtime import tracing
        exporter = InMemorySpanExporter()
        tracing.configure("crondepot-worker", exporter=exporter)
        tracing.claimed("w1", 0, ["7:1"])
        (span,) = exporter.get_finished_spans()
        print(span.resource.attributes["service.name"])
    """
    assert _python(code).strip() == "crondepot-worker"
    assert _python(code, OTEL_SERVICE_NAME="reminders-eu").strip() == "reminders-eu"


def test_a_failing_sdk_never_fails_the_tick_the_claim_or_a_run(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Whatever the tracing backend raises while making spans, the callers go on without
    them, and a slot's callback still runs (its run is given back)."""

    class Broken:
        def __getattr__(self, name: str) -> object:
            def fail(*args: object, **kwargs: object) -> object:
                raise RuntimeError(f"exporter exploded in {name}")
            return fail

    monkeypatch.setattr(tracing, "_on", Broken())
    tracing.ticked("s", 0, {"claimed": 1}, [("1:2", None)])
    assert tracing.claimed("w", 0, ["1:2"]) is None
    assert tracing.attempt("1:2", 1, None, {}) is tracing.NOOP
    assert tracing.call("1:2", {"type": "http"}) is tracing.NOOP
    assert tracing.outcome("1:2") is tracing.NOOP
    assert dict(tracing.headers()) == {}
    assert "the run goes on without it" in caplog.text


def test_a_span_that_fails_to_end_still_gives_the_slot_back() -> None:
    from crondepot.runtime.otel import Current

    class Unending:
        def set_attribute(self, key: str, value: object) -> None:
            return None

        def end(self) -> None:
            raise RuntimeError("the exporter's queue is gone")

    given_back: list[bool] = []
    Current(Unending()).then(lambda: given_back.append(True))()  # type: ignore[arg-type]
    assert given_back == [True]
