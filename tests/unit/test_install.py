"""``make up`` installs what running needs and nothing of the test toolchain; ``make test``
installs both (issue 33: a user who only runs crondepot got 78 packages, ~300 MB)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("pytest", "hypothesis", "mypy", "ruff", "selenium", "schemathesis", "import-linter",
         "crondepot_testkit", "testkit")


def _rule(makefile: str, target: str) -> tuple[list[str], list[str]]:
    """A make rule's prerequisites (before any ``|``) and its recipe lines, by target as
    written (``up``, ``$(RUN_STAMP)``)."""
    match = re.search(rf"^{re.escape(target)}:([^\n]*)\n((?:\t[^\n]*\n)*)", makefile, re.M)
    assert match, f"no rule for {target}"
    return match.group(1).split("|")[0].split(), match.group(2).splitlines()


def test_make_up_installs_the_package_alone() -> None:
    makefile = (ROOT / "Makefile").read_text()
    (stamp,), _ = _rule(makefile, "up")
    _, recipe = _rule(makefile, stamp)
    assert [line.strip() for line in recipe if "pip install" in line] == [
        "$(BIN)/pip install --quiet -e ."]


def test_the_runtime_dependencies_hold_no_test_tool() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = [re.split(r"[\[<>=!~ ;]", dep, maxsplit=1)[0].lower()
             for dep in project["dependencies"]]
    assert not [name for name in names if name in TOOLS]
    assert {"pytest", "mypy", "selenium"} <= {
        re.split(r"[\[<>=!~ ;]", dep, maxsplit=1)[0].lower()
        for dep in project["optional-dependencies"]["test"]}
