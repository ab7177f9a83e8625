"""How commands print: JSON for scripts (``--json``), tables and plain lines for people."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def console() -> Console:
    """A rich console for people. On a terminal, rich's own; into a pipe or a file, plain
    text: no colour, no control codes (even with FORCE_COLOR set), and tables get 200
    columns rather than 80 (unless COLUMNS says otherwise)."""
    # Imported here: only the commands that print tables need it, and a worker or a
    # scheduler process should not pay for it at start-up.
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=None if "COLUMNS" in os.environ else 200, force_terminal=False,
                   force_interactive=False, no_color=True, highlight=False, emoji=False)


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_more(next_cursor: str | None) -> None:
    """After a page of a list: how to ask for the next page, when there is one."""
    if next_cursor is not None:
        print(f"more: --cursor {next_cursor}")


def fail(message: str, *, as_json: bool = False, code: int = 2) -> int:
    """Report an error on stderr (as a JSON object with --json) and return the exit code."""
    if as_json:
        json.dump({"error": message}, sys.stderr)
        sys.stderr.write("\n")
    else:
        print(f"crondepot: error: {message}", file=sys.stderr)
    return code
