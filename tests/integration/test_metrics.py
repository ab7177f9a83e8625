"""Metrics: the database gauges, the API's /metrics, and alert rules that name real metrics."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import psycopg
import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client.core import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from crondepot.api import create_app
from crondepot.api.scrape import MetricsAccess
from crondepot.db import connect
from crondepot.queue import claim_runs, record_final_failure
from crondepot.runtime import metrics
from crondepot_testkit.processes import free_port
from tests.support.jobs import bulk_due_jobs, queued_runs

RULES = Path(__file__).parents[2] / "deploy" / "prometheus" / "alerts.yml"
RULE_TESTS = RULES.with_name("alerts_test.yml")
SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_count", "_sum"], "gauge": [""],
            "info": ["_info"], "summary": ["_count", "_sum"]}


def _samples(text: str) -> dict[str, float]:
    return {s.name + str(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _exposed_names(db_url: str) -> set[str]:
    names = set()
    with connect(db_url) as conn:
        registry = metrics.database_registry(lambda: _Borrowed(conn))
        for source in (REGISTRY, registry):
            for family in source.collect():
                names |= {family.name + s for s in SUFFIXES.get(family.type, [""])}
    return names


class _Borrowed:
    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def __enter__(self) -> psycopg.Connection[Any]:
        return self.conn

    def __exit__(self, *_: object) -> None:
        pass


def test_database_gauges_count_queue_dead_letter_lag_and_workers(
        conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 3, priority="urgent")
    queued_runs(conn, 2, priority="bulk")
    (run,) = claim_runs(conn, owner="w", shares={"bulk": 1}, lend=False)
    record_final_failure(conn, run.run_id, run.lease_token, status="dead", error="x",
                         error_class="T")
    bulk_due_jobs(conn, 1, due_in_seconds=-30)
    conn.execute("INSERT INTO workers (name, host, pid, concurrency) VALUES ('w1', 'h', 1, 20)")
    registry = metrics.database_registry(lambda: _Borrowed(conn))
    samples = _samples(metrics.exposition(registry)[0].decode())
    assert samples["crondepot_queue_depth[('priority', 'urgent')]"] == 3
    assert samples["crondepot_queue_depth[('priority', 'bulk')]"] == 1
    assert samples["crondepot_queue_depth[('priority', 'normal')]"] == 0
    assert samples["crondepot_dead_letter_size[]"] == 1
    assert samples["crondepot_scheduler_lag_seconds[]"] >= 29
    assert samples["crondepot_workers_live[]"] == 1
    assert samples["crondepot_worker_heartbeat_age_seconds[('worker', 'w1')]"] >= 0


def test_api_serves_metrics_without_a_token(db_url: str) -> None:
    with TestClient(create_app(db_url)) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    samples = _samples(response.text)
    assert "crondepot_queue_depth[('priority', 'normal')]" in samples
    assert "crondepot_build_info[('version', '0.1.0')]" in samples


def test_api_metrics_need_the_metrics_token_when_one_is_set(db_url: str) -> None:
    app = create_app(db_url, metrics_access=MetricsAccess(token="scrape-s3cret"))
    failures = REGISTRY.get_sample_value("crondepot_auth_failures_total",
                                         {"route": "/metrics"}) or 0
    with TestClient(app) as client:
        missing = client.get("/metrics")
        wrong = client.get("/metrics", headers={"Authorization": "Bearer scrape-s3cre"})
        right = client.get("/metrics", headers={"Authorization": "Bearer scrape-s3cret"})
    for refused in (missing, wrong):
        assert refused.status_code == 401
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.headers["www-authenticate"] == 'Bearer realm="metrics"'
        assert "crondepot_" not in refused.text
    assert right.status_code == 200
    assert "crondepot_queue_depth[('priority', 'normal')]" in _samples(right.text)
    # a wrong token is a failed authentication like a bad bearer token; none sent is not
    assert _samples(right.text)["crondepot_auth_failures_total[('route', '/metrics')]"] \
        == failures + 1


def test_api_metrics_name_tenants_only_when_asked(db_url: str,
                                                 conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 1, tenant_name="acme-secret-bank")
    with TestClient(create_app(db_url)) as client:
        aggregated = client.get("/metrics").text
    assert "acme-secret-bank" not in aggregated
    assert "crondepot_jobs_unhealthy[]" in _samples(aggregated)
    app = create_app(db_url, metrics_access=MetricsAccess(tenant_labels=True))
    with TestClient(app) as client:
        labelled = client.get("/metrics").text
    assert "crondepot_jobs_unhealthy[('tenant', 'acme-secret-bank')]" in _samples(labelled)


def test_the_metrics_port_of_a_scheduler_or_worker_needs_the_token() -> None:
    port = free_port()
    metrics.serve(port, "127.0.0.1", token="port-s3cret")
    url = f"http://127.0.0.1:{port}/metrics"
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "port-s3cret"}):
        with pytest.raises(HTTPError) as refused:
            urlopen(Request(url, headers=headers), timeout=5)
        assert refused.value.code == 401
    with urlopen(Request(url, headers={"Authorization": "Bearer port-s3cret"}),
                 timeout=5) as scraped:
        assert "crondepot_build_info" in scraped.read().decode()


def test_alert_rules_parse_and_name_only_metrics_that_exist(db_url: str) -> None:
    rules = yaml.safe_load(RULES.read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"]]
    names = {rule["alert"] for rule in alerts}
    assert {"CrondepotStartLagHigh", "CrondepotCatchupBoundHit", "CrondepotDeadLetterGrowing",
            "CrondepotRescueStorm", "CrondepotNoLiveWorkers", "CrondepotNoSchedulerProgress",
            "CrondepotMetricsAbsent", "CrondepotJobsUnhealthy", "CrondepotAuthFailures"} <= names
    exposed = _exposed_names(db_url)
    for rule in alerts:
        assert rule["expr"].strip() and rule["annotations"]["summary"]
        for metric in re.findall(r"\bcrondepot_[a-z_]+", rule["expr"]):
            assert metric in exposed, f"{rule['alert']} names {metric}, which no process serves"


def test_the_ledger_gauges_come_from_the_latest_check(conn: psycopg.Connection[Any]) -> None:
    registry = metrics.database_registry(lambda: _Borrowed(conn))
    before = _samples(metrics.exposition(registry)[0].decode())
    assert "crondepot_fires_unaccounted[]" not in before      # no check yet: no sample
    conn.execute("INSERT INTO ledger_checks (checked_at, since, until, fires, unaccounted, "
                 "duplicated, pending, seconds) VALUES "
                 "(now() - interval '10 minutes', now(), now(), 9, 9, 9, 9, 1), "
                 "(now() - interval '2 minutes', now(), now(), 40, 3, 1, 2, 1)")
    samples = _samples(metrics.exposition(registry)[0].decode())
    assert samples["crondepot_fires_unaccounted[]"] == 3
    assert samples["crondepot_fires_duplicated[]"] == 1
    assert samples["crondepot_fires_pending[]"] == 2
    assert 119 <= samples["crondepot_ledger_check_age_seconds[]"] < 200


def test_alert_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    checked = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The unit tests beside the rules: the alerts fire (and stay quiet) on series as the
    # processes expose them, per-tenant labels or none.
    tested = subprocess.run([promtool, "test", "rules", str(RULE_TESTS)], capture_output=True,
                            text=True, timeout=60, check=False, cwd=RULES.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_unhealthy_jobs_gauge_counts_per_tenant(conn: psycopg.Connection[Any]) -> None:
    queued_runs(conn, 3)
    queued_runs(conn, 1, tenant_name="acme")
    conn.execute("UPDATE jobs SET failing_fires = 3")          # the default threshold
    conn.execute("UPDATE jobs SET alert_after_failures = 5 "
                 "WHERE id = (SELECT min(id) FROM jobs)")       # below its own threshold
    conn.execute("UPDATE tenants SET alert_after_failures = 4 WHERE name = 'acme'")
    registry = metrics.database_registry(lambda: _Borrowed(conn), tenant_labels=True)
    samples = _samples(metrics.exposition(registry)[0].decode())
    assert samples["crondepot_jobs_unhealthy[('tenant', 'bank42')]"] == 2
    assert samples["crondepot_jobs_unhealthy[('tenant', 'acme')]"] == 0
    aggregated = metrics.database_registry(lambda: _Borrowed(conn))
    samples = _samples(metrics.exposition(aggregated)[0].decode())
    assert samples["crondepot_jobs_unhealthy[]"] == 2
    # No sample has a tenant label (a label value may be "tenant": rate_limit_waits_total's
    # for a tenant's bucket, counted by another test in this process).
    assert not any("('tenant', " in name for name in samples)
