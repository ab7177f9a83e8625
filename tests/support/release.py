"""Building the release's sdist and wheel as ``python -m build`` does (the wheel built from
the sdist, so a file the sdist forgets is missing from the wheel too), from a copy of what
they are made of: setuptools builds in the source tree and would add whatever an earlier
build left in its build/ directory. No network: the backend is the one installed
(``--no-isolation``; setuptools and build are pinned in the test extra)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Not the tree's: environments, caches and earlier builds (the tests and the test kit are
# copied, so that the sdist's check sees whether MANIFEST.in lets them in).
LEFT_OUT = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache",
            ".ruff_cache", ".pytest_cache", ".hypothesis")


def build_dists(folder: Path) -> tuple[Path, Path]:
    """(sdist, wheel), built into ``folder``."""
    source = folder / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT), symlinks=True)
    out = folder / "dist"
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                           str(out), str(source)], capture_output=True, text=True,
                          timeout=300, cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (sdist,) = out.glob("crondepot-*.tar.gz")
    (wheel,) = out.glob("crondepot-*.whl")
    return sdist, wheel
