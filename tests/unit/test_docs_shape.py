"""The docs a maintainer reads stay reference pages: performance.md keeps the current
figures and commands (dated runs go to docs/records/), and the root has a changelog and a
contributing guide."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_performance_md_holds_current_figures_only() -> None:
    lines = (ROOT / "docs" / "performance.md").read_text().splitlines()
    assert len(lines) <= 300, "move past runs to docs/records/performance-runs.md"


def test_the_root_has_a_changelog_and_a_contributing_guide() -> None:
    assert "## [Unreleased]" in (ROOT / "CHANGELOG.md").read_text()
    assert "72 characters" in (ROOT / "CONTRIBUTING.md").read_text()


def test_only_the_public_surface_and_main_sit_at_the_package_top() -> None:
    top = sorted(path.name for path in (ROOT / "src" / "crondepot").glob("*.py"))
    assert top == ["__init__.py", "__main__.py"]
