"""How commands print: JSON for scripts (``--json``), tables and plain lines for people."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def fail(message: str, *, as_json: bool = False, code: int = 2) -> int:
    """Report an error on stderr (as a JSON object with --json) and return the exit code."""
    if as_json:
        json.dump({"error": message}, sys.stderr)
        sys.stderr.write("\n")
    else:
        print(f"crondepot: error: {message}", file=sys.stderr)
    return code
