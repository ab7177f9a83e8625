"""A package's names loaded on first use (PEP 562), for the packages whose ``__init__``
would otherwise import heavy modules that most of their importers never touch.

    if not TYPE_CHECKING:     # mypy sees the real imports, under TYPE_CHECKING
        __getattr__ = on_first_use(__name__, {"JobSpec": "spec", ...})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def on_first_use(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: name -> the submodule defining it."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    return __getattr__
