"""The reads and the JSON renderings the API, the CLI and the console share live outside the
web layer: a CLI command loads no web framework."""

from __future__ import annotations

import subprocess
import sys


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
