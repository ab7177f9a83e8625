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
    loaded = _loaded_after("import crondepot.reads, crondepot.render")
    assert not {"fastapi", "starlette", "crondepot.api"} & loaded


def test_the_cli_parser_and_its_read_commands_import_no_web_framework() -> None:
    loaded = _loaded_after(
        "from crondepot.cli import build_parser; build_parser()\n"
        "import crondepot.cli.runs, crondepot.cli.jobs, crondepot.cli.dlq, crondepot.cli.status")
    assert "fastapi" not in loaded and "crondepot.api.app" not in loaded
