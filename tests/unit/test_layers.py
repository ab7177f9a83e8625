"""The layers docs/architecture.md draws hold (import-linter's contract in pyproject.toml),
and a process loads only what it uses: a CLI command loads no web framework, a worker no
HTTP client until its first HTTP run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path


def _loaded_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True, timeout=60)
    return set(done.stdout.split())


def test_the_shared_reads_and_renderings_import_no_web_framework() -> None:
    loaded = _loaded_after("import crondepot.runs.reads, crondepot.runs.render")
    assert not {"fastapi", "starlette", "crondepot.api"} & loaded


def test_the_cli_parser_and_its_read_commands_import_no_web_framework() -> None:
    loaded = _loaded_after(
        "from crondepot.cli import build_parser; build_parser()\n"
        "import crondepot.cli.runs, crondepot.cli.jobs, crondepot.cli.dlq, crondepot.cli.status")
    assert "fastapi" not in loaded and "crondepot.api.app" not in loaded


def test_a_worker_process_loads_no_http_client_and_no_table_renderer_until_it_needs_one() -> None:
    # Most of a worker's start-up CPU was imports it did not use: the HTTP client (its
    # first HTTP run makes it), the job validator, rich, the other commands' modules.
    loaded = _loaded_after(
        "from crondepot.cli import build_parser\n"
        "build_parser('worker').parse_args(['worker'])\n"
        "from crondepot.worker.loop import Worker, WorkerConfig\n"
        "Worker(WorkerConfig(url='postgresql://nobody@127.0.0.1:1/none'))")
    assert not {"httpx", "httpcore", "rich", "crondepot.job.spec", "crondepot.cli.api"} & loaded


def test_the_job_validator_loads_the_address_guard_but_no_webhook_target() -> None:
    loaded = _loaded_after("import crondepot.job.spec")
    assert "crondepot.job.guard" in loaded
    assert not {"crondepot.worker.targets.http", "httpcore"} & loaded


ROOT = Path(__file__).resolve().parents[2]


def _lint_imports(source_root: Path) -> subprocess.CompletedProcess[str]:
    """import-linter's layers contract (pyproject.toml) over the package under source_root."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--config",
         str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True, text=True, timeout=120, cwd=source_root,
        env={**os.environ, "PYTHONPATH": str(source_root)})


def test_the_layers_contract_holds_for_the_package() -> None:
    done = _lint_imports(ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_layers_contract_fails_when_a_lower_layer_imports_a_higher_one(
        tmp_path: Path) -> None:
    copy = tmp_path / "crondepot"
    shutil.copytree(ROOT / "src" / "crondepot", copy,
                    ignore=shutil.ignore_patterns("__pycache__", "sql", "static", "templates"))
    with (copy / "db" / "clock.py").open("a") as module:
        module.write("\nfrom crondepot.job import store  # noqa: E402  (upward, on purpose)\n")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1
    assert "crondepot.db.clock -> crondepot.job.store" in done.stdout
