"""The container image as an operator gets it: ``deploy/container/build.sh`` (a Debian
bookworm base made by debootstrap on this machine, the release wheel, then
``deploy/container/Containerfile``), then the image run by podman:

- what it holds: this release and its runtime dependencies, no tests, no test kit, no pip;
  a non-root user; ``crondepot`` as the entrypoint, ``api`` as the command, a HEALTHCHECK;
- ``up`` on the embedded PostgreSQL inside one container, its port published: a tenant's
  token issued, a job created and triggered through the API with it, its run succeeded,
  the health check healthy, and a clean stop;
- one role per container, as in deploy/systemd/ and with deploy/env/'s files: ``migrate``,
  then ``api``, ``scheduler`` and ``worker`` on the machine's PostgreSQL (host network),
  a job run through the API.

It needs root, podman and debootstrap and builds an image (the base a minute or two, once;
pip installs the wheel's dependencies from the package index in each cold build), so it
runs only with ``CRONDEPOT_CONTAINER_SMOKE=1``; not in ``.ci/run``. Each step's duration is
printed (``pytest -s``); the figures are in deploy/README.md, "Container"."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

import crondepot
from crondepot.db.migrations import schema_revision
from crondepot_testkit.processes import free_port, wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(os.environ.get("CRONDEPOT_CONTAINER_SMOKE") != "1",
                       reason="builds a container image with podman as root (debootstrap, "
                              "pip from the package index: minutes when cold): run with "
                              "CRONDEPOT_CONTAINER_SMOKE=1"),
]
ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
IMAGE = f"localhost/crondepot:{crondepot.__version__}-smoke"
JOB = {"key": "smoke", "cron": "0 0 1 1 *", "tz": "UTC",
       "target": {"type": "python", "handler": "crondepot.log"},
       "payload": {"note": "the container smoke test"}}


def podman() -> list[str]:
    """podman, with the OCI runtime this host can use: crun (Debian's default) refuses a
    host whose cgroups are hybrid (v1 controllers plus an empty v2 tree); runc does not."""
    exe = shutil.which("podman")
    if exe is None:
        pytest.fail("CRONDEPOT_CONTAINER_SMOKE=1 but podman is not installed "
                    "(apt-get install podman runc netavark aardvark-dns debootstrap)")
    hybrid = (Path("/sys/fs/cgroup/unified").is_dir()
              and not Path("/sys/fs/cgroup/cgroup.controllers").exists())
    return [exe, "--runtime", "runc"] if hybrid and shutil.which("runc") else [exe]


def limits() -> list[str]:
    """The container's open files and processes, at most the caller's: podman's defaults
    (1048576 files) need CAP_SYS_RESOURCE, which a container host (this one) may not have."""
    files = min(65536, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
    return ["--ulimit", f"nofile={files}:{files}", "--ulimit", "nproc=4096:4096"]


def sh(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*podman(), *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-3000:]}"
    return done


def in_image(*args: str, entrypoint: str | None = None, flags: tuple[str, ...] = ()) -> str:
    """Run the image once (removed after), return what it printed."""
    chosen = ["--entrypoint", entrypoint] if entrypoint else []
    return sh("run", "--rm", *limits(), *flags, *chosen, IMAGE, *args).stdout


class Container:
    def __init__(self, name: str, *args: str) -> None:
        self.name = name
        sh("run", "--detach", "--name", name, *limits(), *args)

    def logs(self) -> str:
        done = sh("logs", self.name, check=False)
        return done.stdout + done.stderr

    def running(self) -> bool:
        return sh("inspect", "--format", "{{.State.Running}}", self.name).stdout.strip() == "true"

    def stop(self, timeout: int = 60) -> int:
        sh("stop", "--time", str(timeout), self.name, timeout=timeout + 30)
        return int(sh("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout)

    def remove(self) -> None:
        sh("rm", "--force", "--time", "5", self.name, check=False)


def serving(url: str, health: dict[str, Any]) -> bool:
    try:
        health.update(httpx.get(f"{url}/healthz", timeout=2).json())
    except (httpx.HTTPError, ValueError):
        return False
    return True


def run_a_job(url: str, token: str) -> float:
    """Create the job through the API with ``token``, trigger it; seconds until its run
    succeeded (exactly one run)."""
    api = httpx.Client(base_url=f"{url}/v1", headers={"Authorization": f"Bearer {token}"},
                       timeout=10)
    created = api.post("/jobs", json=JOB)
    assert created.status_code == 201, created.text
    job = created.json()["id"]
    triggered_at = time.monotonic()
    assert api.post(f"/jobs/{job}/trigger").status_code == 201
    runs: list[dict[str, Any]] = []

    def succeeded() -> bool:
        runs[:] = api.get(f"/jobs/{job}/runs").json()["items"]
        return any(run["status"] == "succeeded" for run in runs)

    wait_until(succeeded, timeout=60, interval=0.2, message="the triggered run to succeed")
    assert len(runs) == 1, runs
    return time.monotonic() - triggered_at


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    podman()
    if os.geteuid() != 0:
        pytest.fail("CRONDEPOT_CONTAINER_SMOKE=1 needs root (debootstrap, rootful podman)")
    began = time.monotonic()
    done = subprocess.run([str(DEPLOY / "container" / "build.sh"), IMAGE], capture_output=True,
                          text=True, timeout=1500, env={**os.environ, "PYTHON": sys.executable})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    size = int(sh("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    print(f"\ncontainer: built in {time.monotonic() - began:.1f} s, {size / 1e6:.0f} MB\n"
          f"{done.stderr.strip()}")
    yield IMAGE
    sh("rmi", "--force", IMAGE, check=False)


def test_the_image_is_the_release_run_by_a_user_without_tests(image: str) -> None:
    assert in_image("--version").strip() == (f"crondepot {crondepot.__version__} "
                                             f"(schema revision {schema_revision()})")
    (inspected,) = json.loads(sh("image", "inspect", image).stdout)
    config = inspected["Config"]
    assert config["User"] == "crondepot:crondepot"
    assert config["Entrypoint"] == ["crondepot"] and config["Cmd"] == ["api"]
    assert "/healthz" in " ".join(inspected["Healthcheck"]["Test"])
    assert "CRONDEPOT_API_PORT=8080" in config["Env"]
    assert in_image("-u", entrypoint="id").strip() != "0"
    probe = ("import importlib.util as u, pathlib, crondepot; "
             "print([m for m in ('crondepot_testkit', 'tests', 'pytest', 'pip', 'hypothesis') "
             "if u.find_spec(m)]); "
             "package = pathlib.Path(crondepot.__file__).parent; "
             "print(sorted(str(p) for p in package.rglob('test*')))")
    found, files = in_image("-c", probe, entrypoint="python3").splitlines()
    assert found == "[]" and files == "[]", (found, files)


def test_up_in_the_container_runs_a_job_through_the_api(image: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    name = f"crondepot-smoke-up-{port}"
    began = time.monotonic()
    up = Container(name, "--publish", f"127.0.0.1:{port}:8080", image,
                   "up", "--host", "0.0.0.0", "--schedulers", "1", "--workers", "1",
                   "--tick", "500ms")
    try:
        health: dict[str, Any] = {}
        wait_until(lambda: serving(url, health) or not up.running(), timeout=180,
                   interval=0.2, message="/healthz")
        assert up.running(), up.logs()[-3000:]
        serving_at = time.monotonic()
        assert health == {"status": "ok", "version": crondepot.__version__,
                          "schema_revision": schema_revision()}
        # The image's HEALTHCHECK, run now (podman's timer for it needs systemd).
        assert sh("healthcheck", "run", name, check=False).returncode == 0, up.logs()[-3000:]
        assert sh("inspect", "--format", "{{.State.Health.Status}}",
                  name).stdout.strip() == "healthy"
        tenant = json.loads(sh("exec", name, "crondepot", "tenants", "create", "smoke",
                               "--json").stdout)
        sh("exec", name, "crondepot", "tenants", "grant", "smoke", "--handler", "crondepot.log")
        ran = run_a_job(url, tenant["token"])
        done_at = time.monotonic()
        code = up.stop()
        print(f"\ncontainer up: serving after {serving_at - began:.1f} s; the triggered run "
              f"succeeded {ran:.1f} s after the trigger; stopped "
              f"{time.monotonic() - done_at:.1f} s later")
        assert code == 0, up.logs()[-3000:]
    finally:
        up.remove()


def test_one_role_per_container_with_the_shipped_env_files(
        image: str, empty_db_url: str) -> None:
    host = str(conninfo_to_dict(empty_db_url).get("host") or "")
    if not host or host.startswith("/"):
        pytest.skip("the embedded test database listens on a unix socket in a temporary "
                    "folder; the roles' containers reach PostgreSQL over TCP: run with "
                    "CRONDEPOT_TEST_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres")
    began = time.monotonic()
    network = ("--network", "host")
    in_image("migrate", "--db", empty_db_url, "--json", flags=network)
    tenant = json.loads(in_image("tenants", "create", "smoke", "--json", "--db", empty_db_url,
                                 flags=network))
    in_image("tenants", "grant", "smoke", "--handler", "crondepot.log", "--db", empty_db_url,
             flags=network)
    env = DEPLOY / "env"
    port = free_port()
    # As a unit's EnvironmentFile= lines: crondepot.env, then the role's file; then what
    # differs on this machine (podman's --env wins over --env-file): the database (as the
    # runtime role `migrate` made), a free API port on loopback, no metrics ports.
    machine = ["--env", "CRONDEPOT_DATABASE_URL="
               + make_conninfo(empty_db_url, user="crondepot_runtime"),
               "--env", "CRONDEPOT_METRICS_PORT=0"]
    roles = {
        "api": ["--env", "CRONDEPOT_API_HOST=127.0.0.1", "--env", f"CRONDEPOT_API_PORT={port}"],
        "scheduler": ["--no-healthcheck"],
        "worker": ["--no-healthcheck"],
    }
    started: list[Container] = []
    try:
        for role, flags in roles.items():
            started.append(Container(
                f"crondepot-smoke-{role}-{port}", "--network", "host",
                "--env-file", str(env / "crondepot.env"), "--env-file", str(env / f"{role}.env"),
                *machine, *flags, image, *([] if role == "api" else [role])))
        url = f"http://127.0.0.1:{port}"
        health: dict[str, Any] = {}
        try:
            wait_until(lambda: serving(url, health) or not all(c.running() for c in started),
                       timeout=120, interval=0.2, message="/healthz")
        except AssertionError as failed:
            raise AssertionError([c.logs()[-2000:] for c in started]) from failed
        assert all(c.running() for c in started), [c.logs()[-2000:] for c in started]
        assert health["schema_revision"] == schema_revision()
        assert sh("healthcheck", "run", started[0].name, check=False).returncode == 0
        ran = run_a_job(url, tenant["token"])
        codes = {c.name: c.stop() for c in started}
        print(f"\ncontainer roles: migrated and serving after {time.monotonic() - began:.1f} s;"
              f" the triggered run succeeded {ran:.1f} s after the trigger")
        assert set(codes.values()) == {0}, (codes, [c.logs()[-2000:] for c in started])
    finally:
        for container in started:
            container.remove()
