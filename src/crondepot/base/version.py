"""The release this tree is: the one place its version is written (``pyproject.toml`` reads
it at build time, ``[tool.setuptools.dynamic]``). A leaf module so the metrics (below the
package root) can label the build without importing the root. Semantic versioning:
CHANGELOG.md says what a major, minor and patch release may change."""

__version__ = "0.1.0"
