"""The command reference (docs/cli.md), written from the parser itself so it cannot miss a
command or an option: ``python -m crondepot.cli.shared.reference > docs/cli.md``. A test fails
when the file and the parser differ (tests/acceptance/test_cli_interface.py)."""

from __future__ import annotations

import argparse
import re
import sys

HEADER = """# Command reference

Generated from the parser by `python -m crondepot.cli.shared.reference > docs/cli.md`; do not edit
by hand (a test compares the two). Conventions shared by every command (a job by id or
key, `--json`, paging, `CRONDEPOT_TENANT`, exit codes) are in
[operations.md, "Conventions"](operations.md#conventions).
"""


def reference(parser: argparse.ArgumentParser | None = None) -> str:
    if parser is None:
        from crondepot.cli import build_parser
        parser = build_parser()
    parts = [HEADER]
    _command(parser, "crondepot", None, parts)
    return "\n".join(parts).rstrip() + "\n"


def _command(parser: argparse.ArgumentParser, path: str, summary: str | None,
             parts: list[str]) -> None:
    subcommands: list[tuple[str, argparse.ArgumentParser, str | None]] = []
    rows: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            subcommands += [(name, sub, helps.get(name)) for name, sub in action.choices.items()]
        elif not isinstance(action, argparse._HelpAction):
            rows.append(f"| `{_name(action)}` | {_text(action)} |")
    if rows or summary is not None:
        level = "#" * min(2 + path.count(" "), 4)
        parts.append(f"{level} `{path}`\n")
        if summary or parser.description:
            parts.append(_clean(parser.description or summary or "") + "\n")
        usage = " ".join(parser.format_usage().split())
        parts.append(f"`{usage.removeprefix('usage: ')}`\n")
        if rows:
            parts.append("| option | meaning |\n|---|---|\n" + "\n".join(rows) + "\n")
    for name, sub, text in subcommands:
        _command(sub, f"{path} {name}", text or "", parts)


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return str(action.metavar or action.dest)
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar or (action.dest.upper() if not action.choices else
                                 "{" + ",".join(map(str, action.choices)) + "}")
    return f"{names} {metavar}"


def _text(action: argparse.Action) -> str:
    text = _clean(action.help or "")
    if action.choices and "{" not in _name(action) and action.option_strings:
        text += " (one of: " + ", ".join(map(str, action.choices)) + ")"
    return text.replace("|", "\\|")


def _clean(text: str) -> str:
    # defaults read from the environment differ between machines: never print them
    return re.sub(r"\s+", " ", text.replace("%%", "%")).strip()


if __name__ == "__main__":
    sys.stdout.write(reference())
