"""Prometheus metrics: the only module that touches prometheus-client.

Names follow Prometheus conventions: ``crondepot_`` prefix, base units (seconds),
``_total`` on counters. Labels are low-cardinality (priority, reason, outcome, a route
template), never a job or run id, and a tenant's name only when the operator asks
(``DatabaseCollector``'s ``tenant_labels``).
"""

from __future__ import annotations

import functools
import hmac
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    Counter,
    Gauge,
    Histogram,
    Info,
    generate_latest,
    make_wsgi_app,
)
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector, CollectorRegistry

from crondepot.base.version import __version__
from crondepot.base.vocab import PRIORITIES
from crondepot.db import Q


@functools.cache
def labelled(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, looked up once: ``labels()`` takes a lock and checks its
    arguments on every call, several times per run on the worker's hot path. Only for label
    values from small fixed sets (priorities, target types, outcomes, status classes): each
    combination is kept for the life of the process."""
    return metric.labels(*labels)


_LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)

build_info = Info("crondepot_build", "crondepot version")
build_info.info({"version": __version__})

tick_duration = Histogram(
    "crondepot_scheduler_tick_duration_seconds",
    "Wall time of one scheduler tick (claim, write runs, advance jobs, commit).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
jobs_claimed = Histogram(
    "crondepot_scheduler_jobs_claimed",
    "Due jobs claimed per tick.",
    buckets=(0, 1, 10, 100, 500, 1000, 2500, 5000, 10000),
)
runs_written = Histogram(
    "crondepot_scheduler_runs_written",
    "Runs written (queued or skipped) per tick.",
    buckets=(0, 1, 10, 100, 500, 1000, 2500, 5000, 10000),
)
runs_created = Counter(
    "crondepot_runs_created_total", "Runs queued for workers by the scheduler.", ["priority"]
)
runs_skipped = Counter(
    "crondepot_runs_skipped_total", "Runs written as skipped, by reason.", ["reason"]
)
runs_deferred = Counter(
    "crondepot_runs_deferred_total",
    "Runs deferred to their delivery window's next opening: queued so by the scheduler, "
    "or given back by a worker that claimed them while the window was closed.",
    ["by"],
)
enqueue_delay = Histogram(
    "crondepot_scheduler_enqueue_delay_seconds",
    "From a run's due time to the commit that queued it.",
    ["priority"],
    buckets=_LAG_BUCKETS,
)
scheduler_errors = Counter(
    "crondepot_scheduler_errors_total",
    "Ticks that failed and were retried: database unavailable, or refused by it "
    "(logged with the error).",
)
scheduler_unreadable_jobs = Counter(
    "crondepot_scheduler_unreadable_jobs_total",
    "Due jobs put off because their stored cron or tz could not be read.",
)
scheduler_last_tick = Gauge(
    "crondepot_scheduler_last_tick_timestamp_seconds",
    "Unix time of the last tick that completed, by this process's clock.",
)

# Workers
runs_finished = Counter(
    "crondepot_runs_finished_total", "Runs that reached an outcome, by outcome.", ["outcome"]
)
attempts = Counter(
    "crondepot_attempts_total",
    "Target calls, by outcome (ok, temporary, permanent, unknown, replaced) and HTTP "
    "status class "
    "(2xx … 5xx, or none for handlers and calls that got no answer).",
    ["outcome", "status_class"],
)
start_lag = Histogram(
    "crondepot_start_lag_seconds",
    "From a run's due time to the start of its first attempt.",
    ["priority"],
    buckets=_LAG_BUCKETS,
)
target_duration = Histogram(
    "crondepot_target_duration_seconds", "Duration of target calls.", ["type"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
retries = Counter("crondepot_retries_total", "Runs queued again after a temporary error.")
worker_claim_errors = Counter(
    "crondepot_worker_claim_errors_total",
    "Claims that failed and were retried: database unavailable, or refused by it "
    "(logged with the error).",
)
maintenance_leader = Gauge(
    "crondepot_maintenance_leader",
    "1 while this process holds the maintenance lock and runs the maintenance services.",
)
maintenance_turns = Counter(
    "crondepot_maintenance_turns_total",
    "Turns of each maintenance service (rescuer, pause_on_failure, pruner, registry, "
    "ledger_check) by outcome.",
    ["service", "outcome"],
)
jobs_paused_for_failures = Counter(
    "crondepot_jobs_paused_for_failures_total",
    "Jobs paused by the maintenance leader because they reached pause_after_failures.",
)
leases_expired = Counter(
    "crondepot_leases_expired_total",
    "Runs whose lease expired and were reaped (back to the queue or the dead letter).",
    ["to"],
)
stale_writes = Counter(
    "crondepot_stale_writes_rejected_total",
    "Heartbeats or outcome writes refused because the lease token no longer held the run.",
)
calls_not_started = Counter(
    "crondepot_calls_not_started_total",
    "Claimed runs whose call was not started because the lease deadline had passed.",
)
calls_abandoned = Counter(
    "crondepot_worker_calls_abandoned_total",
    "Calls still running when a stopping worker's grace period ended (their runs come back "
    "after their leases).",
)
handler_timeouts = Counter(
    "crondepot_handler_timeouts_total",
    "Python handler calls that did not finish within their target's timeout_s (an async "
    "handler cancelled, a sync one abandoned).",
)
handler_threads_abandoned = Counter(
    "crondepot_handler_threads_abandoned_total",
    "Sync handler threads a slot stopped waiting for at their timeout (left running).",
)
handler_threads_running = Gauge(
    "crondepot_handler_threads_abandoned_running",
    "Abandoned sync handler threads still running; the worker restarts itself when they "
    "reach --max-abandoned.",
)
rate_limit_waits = Counter(
    "crondepot_rate_limit_waits_total", "Calls that had to wait for a rate-limit token.",
    ["limit"],
)
slots_busy = Gauge("crondepot_worker_slots_busy", "Worker slots running a run.")
outcome_batch_size = Histogram(
    "crondepot_worker_outcome_batch_size",
    "Successes recorded together in one statement (and one commit) by a worker.",
    buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500),
)
claim_size = Histogram(
    "crondepot_worker_claim_size", "Runs a worker claimed at once, per claim that found work.",
    buckets=(1, 2, 5, 10, 20, 50, 100),
)


# The API (crondepot.api.auth, crondepot.api.throttle, crondepot.api.intake, crondepot.api.slots,
# crondepot.api.protocol)
auth_failures = Counter(
    "crondepot_auth_failures_total",
    "Requests whose credential (a bearer token, a console login's token) was unknown or "
    "revoked, by route template.",
    ["route"],
)
auth_throttled = Counter(
    "crondepot_auth_throttled_total",
    "Requests refused (429) without their credential being looked at, because their client "
    "address failed authentication too often, by route template.",
    ["route"],
)
api_refused = Counter(
    "crondepot_api_refused_total",
    "Requests and connections the API cut off before running them (docs/operations.md, "
    "'Slow clients and overload'), by reason: head_timeout (connection closed), "
    "body_timeout (408), body_too_large (413), pool_starved (503).",
    ["reason"],
)


def token_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header is ``Bearer <token>`` (compared in constant time)."""
    scheme, _, sent = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(sent.strip().encode(),
                                                              token.encode())


def serve(port: int, addr: str = "127.0.0.1", token: str | None = None) -> None:
    """Serve /metrics on ``addr``:``port`` from a daemon thread (port 0: don't serve); with
    ``token``, only to a scrape that sends ``Authorization: Bearer <token>`` (else 401)."""
    if not port:
        return
    family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM,
                                flags=socket.AI_PASSIVE)[0][0]
    server_class = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
    app = make_wsgi_app(REGISTRY)
    httpd: Any = make_server(addr, port, app if token is None else _bearer_only(app, token),
                        server_class, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, name="metrics", daemon=True).start()


def _bearer_only(app: Callable[..., Iterable[bytes]], token: str) -> Callable[..., Any]:
    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if token_matches(environ.get("HTTP_AUTHORIZATION"), token):
            return app(environ, start_response)
        start_response("401 Unauthorized", [("Content-Type", "text/plain; charset=utf-8"),
                                            ("WWW-Authenticate", 'Bearer realm="metrics"')])
        return [b"send Authorization: Bearer <the metrics token>\n"]
    return guarded


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


class DatabaseCollector(Collector):
    """Gauges read from the database at scrape time: the whole system's state, the same
    whichever process serves them (the API does). ``connection`` lends a connection.

    Tenant names are labels only with ``tenant_labels`` (the operator's choice: anyone who
    can scrape reads them); otherwise a per-tenant gauge is one sum over the tenants."""

    def __init__(self, connection: Callable[[], Any], *, tenant_labels: bool = False) -> None:
        self._connection = connection
        self._tenant_labels = tenant_labels

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._connection() as conn:
            queue = conn.execute(Q.metrics_queue).fetchall()
            (dead,) = conn.execute(Q.metrics_dead).fetchone()
            (lag,) = conn.execute(Q.metrics_scheduler_lag).fetchone()
            workers = conn.execute(Q.live_workers).fetchall()
            check = conn.execute(Q.metrics_ledger_check).fetchone()
            unhealthy = conn.execute(Q.unhealthy_jobs_by_tenant).fetchall()
        depth = GaugeMetricFamily("crondepot_queue_depth", "Queued runs, by priority.",
                                  labels=["priority"])
        oldest = GaugeMetricFamily("crondepot_queue_oldest_age_seconds",
                                   "Age of the oldest ready queued run, by priority.",
                                   labels=["priority"])
        seen = {row[0]: row for row in queue}
        for priority in PRIORITIES:
            _, count, age = seen.get(priority, (priority, 0, 0.0))
            depth.add_metric([priority], count)
            oldest.add_metric([priority], age)
        yield depth
        yield oldest
        yield GaugeMetricFamily("crondepot_dead_letter_size", "Runs in the dead letter.",
                                value=dead)
        yield GaugeMetricFamily(
            "crondepot_scheduler_lag_seconds",
            "Now minus the oldest due time not yet written as runs (0 when none is due).",
            value=lag)
        yield GaugeMetricFamily("crondepot_workers_live", "Workers that have not stopped.",
                                value=len(workers))
        age = GaugeMetricFamily("crondepot_worker_heartbeat_age_seconds",
                                "Seconds since each live worker's last heartbeat.",
                                labels=["worker"])
        for name, _host, _pid, _concurrency, _busy, _started, heartbeat_age in workers:
            age.add_metric([name], heartbeat_age)
        yield age
        yield from _ledger_gauges(check)
        # Per tenant, never per job: the label set stays as small as the tenant list.
        help_text = ("Jobs (not cancelled) whose latest failed fires in a row reached their "
                     "alert threshold (alert_after_failures)")
        if not self._tenant_labels:
            yield GaugeMetricFamily("crondepot_jobs_unhealthy", help_text + ", all tenants.",
                                    value=sum(jobs for _tenant, jobs in unhealthy))
            return
        failing = GaugeMetricFamily("crondepot_jobs_unhealthy", help_text + ", by tenant.",
                                    labels=["tenant"])
        for tenant, jobs in unhealthy:
            failing.add_metric([tenant], jobs)
        yield failing


def _ledger_gauges(check: tuple[Any, ...] | None) -> Iterator[GaugeMetricFamily]:
    """The latest ledger check the schedulers recorded (none yet: no sample, so an alert
    on the check's age fires rather than a stale zero passing for good news)."""
    unaccounted = GaugeMetricFamily(
        "crondepot_fires_unaccounted",
        "Fires owed a row in runs that have none, by the latest ledger check (lost fires; "
        "crondepot verify lists them).")
    duplicated = GaugeMetricFamily(
        "crondepot_fires_duplicated",
        "Fires with more than one row in runs, by the latest ledger check.")
    pending = GaugeMetricFamily(
        "crondepot_fires_pending",
        "Fires not yet owed a row (paused jobs, schedulers behind), by the latest check.")
    age = GaugeMetricFamily("crondepot_ledger_check_age_seconds",
                            "Seconds since the latest ledger check.")
    if check is not None:
        check_age, lost, doubled, waiting = check
        unaccounted.add_metric([], lost)
        duplicated.add_metric([], doubled)
        pending.add_metric([], waiting)
        age.add_metric([], check_age)
    yield from (unaccounted, duplicated, pending, age)


def database_registry(connection: Callable[[], Any], *,
                      tenant_labels: bool = False) -> CollectorRegistry:
    """A registry holding only the database gauges (one per app, so apps made in tests do
    not collide in the process-wide registry)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(connection, tenant_labels=tenant_labels))
    return registry


def exposition(*extra: CollectorRegistry) -> tuple[bytes, str]:
    """This process's metrics, plus ``extra`` registries, in the Prometheus text format."""
    body = generate_latest(REGISTRY) + b"".join(generate_latest(r) for r in extra)
    return body, CONTENT_TYPE_LATEST
