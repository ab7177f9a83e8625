"""Who may scrape: the metrics options of the scheduler, the worker and the API."""

from __future__ import annotations

import pytest

from crondepot.cli import build_parser
from crondepot.cli.up import _metrics


@pytest.mark.parametrize("command", ["scheduler", "worker"])
def test_the_metrics_port_listens_on_this_host_only_unless_told(
        command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CRONDEPOT_METRICS_HOST", "CRONDEPOT_METRICS_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    args = build_parser(command).parse_args([command])
    assert (args.metrics_host, args.metrics_token) == ("127.0.0.1", None)
    monkeypatch.setenv("CRONDEPOT_METRICS_HOST", "0.0.0.0")
    monkeypatch.setenv("CRONDEPOT_METRICS_TOKEN", "from-env")
    args = build_parser(command).parse_args([command])
    assert (args.metrics_host, args.metrics_token) == ("0.0.0.0", "from-env")


def test_the_api_names_tenants_in_metrics_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRONDEPOT_METRICS_TENANT_LABELS", raising=False)
    assert build_parser("api").parse_args(["api"]).metrics_tenant_labels is False
    assert build_parser("api").parse_args(["api", "--metrics-tenant-labels"]) \
        .metrics_tenant_labels is True
    monkeypatch.setenv("CRONDEPOT_METRICS_TENANT_LABELS", "1")
    assert build_parser("api").parse_args(["api"]).metrics_tenant_labels is True
    with pytest.raises(SystemExit):
        build_parser("api").parse_args(["api", "--metrics-token", " "])


def test_up_puts_the_metrics_servers_on_the_apis_address() -> None:
    assert _metrics({"worker-1": 9101}, "worker-1", "10.0.0.4") == [
        "--metrics-port", "9101", "--metrics-host", "10.0.0.4"]
    assert _metrics({}, "worker-1", "10.0.0.4") == []
