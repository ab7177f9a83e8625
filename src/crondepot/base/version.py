"""The release this tree is. ``pyproject.toml`` states the same version; a leaf module so
the metrics (below the package root) can label the build without importing the root."""

__version__ = "0.1.0"
