"""A module's private names (``_name``) are its own: no other module of crondepot imports
them or reaches for them through the module (``store._rows``). A name another module needs
is public, and so part of what its module promises to keep."""

from __future__ import annotations

import ast
from pathlib import Path

import crondepot

PACKAGE = Path(crondepot.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(path: Path) -> list[str]:
    """Each private name of another crondepot module that ``path`` imports or reads."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    modules: dict[str, str] = {}        # a local name -> the crondepot module it is
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crondepot"):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.module}.{alias.name} (line {node.lineno})")
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("crondepot") and alias.asname:
                    modules[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in modules):
            found.append(f"{modules[node.value.id]}.{node.attr} (line {node.lineno})")
    return found


def test_no_module_uses_another_modules_private_names() -> None:
    crossings = {
        _module_name(path): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if (uses := private_uses(path))
    }
    assert crossings == {}


def test_the_check_finds_an_imported_private_name_and_one_read_through_a_module(
        tmp_path: Path) -> None:
    module = tmp_path / "example.py"
    module.write_text("from crondepot.job.store import _rows\n"
                      "from crondepot.job import store\n"
                      "store._columns\n")
    assert private_uses(module) == ["crondepot.job.store._rows (line 1)",
                                    "crondepot.job.store._columns (line 3)"]
