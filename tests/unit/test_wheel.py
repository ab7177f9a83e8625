"""The product wheel ships crondepot and its SQL, and nothing of the test kit."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_holds_the_package_and_its_sql_but_no_test_kit(tmp_path: Path) -> None:
    # Built from a copy of what the wheel is made of: setuptools builds in the source tree
    # and would add whatever an earlier build left in its build/ directory.
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "-w", str(tmp_path), str(source)],
                   check=True, capture_output=True, timeout=300, cwd=tmp_path)
    (wheel,) = tmp_path.glob("crondepot-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {"crondepot"} == {top for top in tops if not top.endswith(".dist-info")}
    assert not [name for name in names if "testkit" in name]
    assert "crondepot/db/sql/functions/claim_runs.sql" in names
    assert "crondepot/db/sql/schema.sql" in names
