"""The release's sdist and wheel (``python -m build``): the wheel ships crondepot and its
SQL, and nothing of the tests or the test kit; the sdist holds the sources, the changelog
and the reference deployment, and no tests either. Installing the wheel in a clean venv and
running it: tests/acceptance/test_release.py."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

import pytest

import crondepot
from tests.support.release import build_dists


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_dists(tmp_path_factory.mktemp("dists"))


def test_the_wheel_holds_the_package_and_its_sql_but_no_test_kit(
        dists: tuple[Path, Path]) -> None:
    _, wheel = dists
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {"crondepot"} == {top for top in tops if not top.endswith(".dist-info")}
    assert not [name for name in names if "testkit" in name or "/tests/" in name
                or name.split("/")[-1].startswith("test_") or "conftest" in name]
    assert "crondepot/db/sql/functions/claim_runs.sql" in names
    assert "crondepot/db/sql/schema.sql" in names
    assert "crondepot/py.typed" in names
    assert wheel.name == f"crondepot-{crondepot.__version__}-py3-none-any.whl"


def test_the_wheel_carries_every_migration_of_the_tree(dists: tuple[Path, Path]) -> None:
    _, wheel = dists
    names = set(zipfile.ZipFile(wheel).namelist())
    folder = Path(crondepot.__file__).parent / "db" / "sql" / "migrations"
    shipped = {f"crondepot/db/sql/migrations/{path.name}" for path in folder.glob("*.sql")}
    assert shipped and shipped <= names


def test_the_sdist_holds_the_sources_and_deploy_but_no_tests(dists: tuple[Path, Path]) -> None:
    sdist, _ = dists
    with tarfile.open(sdist) as archive:
        names = [name.split("/", 1)[1] for name in archive.getnames() if "/" in name]
    tops = {name.split("/")[0] for name in names}
    assert tops == {"src", "deploy", "pyproject.toml", "README.md", "CHANGELOG.md",
                    "MANIFEST.in", "PKG-INFO", "setup.cfg"}
    assert "deploy/systemd/crondepot-worker.service" in names
    assert "deploy/patroni/patroni.yml" in names
    assert "src/crondepot/db/sql/schema.sql" in names
    assert not [name for name in names if "testkit" in name or "__pycache__" in name]
