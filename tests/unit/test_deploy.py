"""The reference deployment (``deploy/``): the systemd units pass ``systemd-analyze verify``
and are hardened, the environment files name only variables the code reads, with values its
parsers take, and the failover harness's Patroni settings are the shipped file's."""

from __future__ import annotations

import configparser
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from crondepot.api.app import ApiSettings
from crondepot.api.throttle import ThrottleSettings
from crondepot.cli import build_parser
from crondepot_testkit import deploy

ROOT = Path(__file__).resolve().parents[2]
UNITS = sorted((ROOT / "deploy" / "systemd").glob("*.service"))
EXEC = "/opt/crondepot/.venv/bin/crondepot"
# What each unit's command is, and the environment files it loads after crondepot.env.
KINDS = {"crondepot-api.service": "api", "crondepot-scheduler.service": "scheduler",
         "crondepot-worker.service": "worker"}
# The worker's exit after its grace period: the outcome writer's last flush (5 s), the
# heartbeat thread's join (5 s), closing the pool (worker/loop.py, Worker.run).
WORKER_EXIT_AFTER_GRACE_S = 10


def _unit(path: Path) -> dict[str, list[str]]:
    """A unit's [Service] settings, each key with all its values (a key may repeat)."""
    parser = configparser.ConfigParser(strict=False, interpolation=None,
                                       dict_type=_MultiDict)  # type: ignore[arg-type]
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return {key: value.split("\n") for key, value in parser["Service"].items()}


class _MultiDict(dict[str, Any]):
    """configparser's storage that keeps every value of a repeated key (EnvironmentFile)."""

    def __setitem__(self, key: str, value: Any) -> None:
        if isinstance(value, list) and key in self:
            self[key].extend(value)
        else:
            super().__setitem__(key, value)


def test_the_three_units_are_there() -> None:
    assert {path.name for path in UNITS} == set(KINDS)


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_systemd_analyze_verify_passes(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd; .ci/run does)")
    # verify checks that ExecStart's program exists and is executable, and resolves the
    # unit's dependencies (sysinit.target, ...). So: a root of our own, holding the host's
    # own unit set, this unit where an install puts it, and a stand-in for the installed
    # crondepot at the path the unit names (the wheel is not installed there on this host).
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system",
                    symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(unit, root / "etc/systemd/system" / unit.name)
    program = root / EXEC.lstrip("/")
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    done = subprocess.run([analyze, "verify", f"--root={root}", unit.name],
                          capture_output=True, text=True, timeout=60)
    # An unknown key or a value systemd cannot parse is only a warning ("ignoring"), with
    # exit 0: any output at all fails the test.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_each_unit_is_hardened_and_restarts(unit: Path) -> None:
    service = _unit(unit)
    one = {key: values[-1] for key, values in service.items()}
    assert one.get("DynamicUser") == "yes" or one.get("User") == "crondepot"
    for key, value in {"ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                       "NoNewPrivileges": "yes", "Restart": "on-failure",
                       "KillSignal": "SIGTERM"}.items():
        assert one.get(key) == value, key
    assert re.fullmatch(r"\d+s?", one["RestartSec"])
    assert int(one["LimitNOFILE"]) >= 65536
    assert int(one["TimeoutStopSec"]) > 0
    program, command, *_ = one["ExecStart"].split()
    assert (program, command) == (EXEC, KINDS[unit.name])
    files = [Path(path).name for path in service["EnvironmentFile"]]
    assert files == ["crondepot.env", f"{KINDS[unit.name]}.env"]
    assert all((ROOT / "deploy" / "env" / name).is_file() for name in files)


def test_the_worker_unit_waits_out_its_grace_period() -> None:
    service = _unit(ROOT / "deploy/systemd/crondepot-worker.service")
    argv = service["ExecStart"][-1].split()
    grace = float(argv[argv.index("--grace") + 1])
    # Killed before its grace is over, a worker would leave calls in progress to their
    # leases although it promised them the grace period.
    assert int(service["TimeoutStopSec"][-1]) >= grace + WORKER_EXIT_AFTER_GRACE_S


def _names_in_source() -> set[str]:
    text = "\n".join(path.read_text() for path in (ROOT / "src").rglob("*.py"))
    return set(re.findall(r"CRONDEPOT_[A-Z0-9_]+", text))


@pytest.mark.parametrize("kind", ["api", "scheduler", "worker"])
def test_the_environment_files_name_only_what_the_code_reads(kind: str) -> None:
    env = deploy.process_env(kind)
    assert env and set(env) <= _names_in_source(), sorted(set(env) - _names_in_source())


@pytest.mark.parametrize("kind", ["api", "scheduler", "worker"])
def test_the_command_takes_the_environment_files_values(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = deploy.process_env(kind)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = build_parser(kind).parse_args([kind])      # a bad value: SystemExit(2)
    assert args.db == env["CRONDEPOT_DATABASE_URL"]
    if kind == "api":
        assert ApiSettings.from_env(env).pool_max_size == int(env["CRONDEPOT_API_POOL_SIZE"])
        assert ThrottleSettings.from_env(env).failures == int(
            env["CRONDEPOT_API_AUTH_FAILURES"])
    else:
        assert args.metrics_port == int(env["CRONDEPOT_METRICS_PORT"])


def test_the_shipped_url_asks_for_the_writable_host() -> None:
    url = deploy.read_env("crondepot")["CRONDEPOT_DATABASE_URL"]
    assert "target_session_attrs=read-write" in url and "," in url.split("@")[1]
    made = deploy.database_url(["127.0.0.1:1", "127.0.0.1:2"], user="u", dbname="d")
    assert made == "postgresql://u@127.0.0.1:1,127.0.0.1:2/d?target_session_attrs=read-write"


def _patroni_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("patroni_cluster",
                                                  ROOT / "bench" / "patroni_cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["patroni_cluster"] = module
    spec.loader.exec_module(module)
    return module


def test_the_failover_harness_runs_patroni_as_shipped() -> None:
    shipped = _template(deploy.PATRONI)
    dcs = shipped["bootstrap"]["dcs"]
    assert dcs["synchronous_mode"] is True and dcs["synchronous_mode_strict"] is True
    assert dcs["loop_wait"] + 2 * dcs["retry_timeout"] <= dcs["ttl"]    # Patroni's rule
    cluster = _patroni_harness().PatroniCluster()
    try:
        node = cluster.nodes[0]
        config = cluster._config(node)
    finally:
        shutil.rmtree(cluster.root, ignore_errors=True)
    assert config["bootstrap"]["dcs"] == dcs
    assert config["bootstrap"]["initdb"] == shipped["bootstrap"]["initdb"]
    assert config["tags"] == shipped["tags"] and config["scope"] == shipped["scope"]
    assert config["postgresql"]["parameters"]["max_connections"] == \
        shipped["postgresql"]["parameters"]["max_connections"]
    assert config["postgresql"]["listen"] == f"127.0.0.1:{node.pg_port}"


def test_the_harness_overrides_the_synchronous_modes_only_when_asked() -> None:
    cluster = _patroni_harness().PatroniCluster(synchronous=True, strict=False)
    try:
        dcs = cluster._config(cluster.nodes[0])["bootstrap"]["dcs"]
    finally:
        shutil.rmtree(cluster.root, ignore_errors=True)
    assert (dcs["synchronous_mode"], dcs["synchronous_mode_strict"]) == (True, False)


def _template(path: Path) -> dict[str, Any]:
    """A template read with each placeholder standing for itself."""
    names = re.findall(r"\$\{([A-Z_]+)\}", path.read_text())
    return deploy.render_yaml(path, {name: f"<{name}>" for name in names})


def test_the_etcd_template_speaks_patronis_v2_api() -> None:
    shipped = _template(deploy.ETCD)
    assert shipped["enable-v2"] is True and shipped["initial-cluster-state"] == "new"


def test_a_placeholder_without_a_value_is_an_error() -> None:
    with pytest.raises(ValueError, match="no value for ETCD_DATA_DIR, ETCD_INITIAL_CLUSTER"):
        deploy.render(deploy.ETCD, {"ETCD_NAME": "e1", "ETCD_LISTEN_CLIENT_URLS": "x",
                                    "ETCD_ADVERTISE_CLIENT_URLS": "x",
                                    "ETCD_LISTEN_PEER_URLS": "x",
                                    "ETCD_ADVERTISE_PEER_URLS": "x"})


def test_an_environment_file_with_quotes_is_refused(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "bad.env").write_text("# c\nCRONDEPOT_TICK='1s'\n")
    monkeypatch.setattr(deploy, "ENV", tmp_path)
    with pytest.raises(ValueError, match=r"bad.env:2: expected KEY=VALUE without quotes"):
        deploy.read_env("bad")
