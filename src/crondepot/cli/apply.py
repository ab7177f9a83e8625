"""``crondepot apply FILE|DIR --tenant T [--scope LABEL=VALUE] [--prune] [--dry-run]``:
make a tenant's jobs what schedules files say (crondepot.job.apply), printing the plan:
each job created, updated or cancelled and the fires it adds and removes.

A schedules file is YAML (``.yaml``/``.yml``: a list of job documents, or one document per
YAML document) or JSON (``.json``: a list, or one object); a directory is every such file
in it and below, in name order. Each document is exactly what ``POST /v1/jobs`` takes, with
a ``key``. YAML is read with PyYAML's safe loader, timestamps left as text (the document's
instants are ISO-8601 strings either way). A bad document is reported with its file and
line (YAML) or index (JSON) and the field, and nothing is changed (exit 2).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from crondepot.base import jsontext
from crondepot.base.errors import CrondepotError, InvalidJob
from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import fail, print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.job.apply import (
    DEFAULT_DAYS,
    MAX_DAYS,
    Change,
    Place,
    Plan,
    Scope,
    apply_set,
    read_documents,
)

SUFFIXES = (".yaml", ".yml", ".json")


class UnreadableSchedules(CrondepotError, OSError):
    """A schedules file that cannot be read or parsed."""


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "apply", help="make a tenant's jobs what schedules files (YAML/JSON) say, showing "
                      "the fires each change adds and removes",
        description="Upsert the job documents of FILE or DIR by key (unchanged jobs are not "
                    "touched), stamp the scope's label on them, and with --prune cancel the "
                    "scope's jobs the files no longer name. One transaction: all or nothing. "
                    "Prints the plan; --dry-run changes nothing.")
    add_database(parser)
    add_json(parser)
    add_tenant(parser, help_text="the tenant the jobs belong to")
    parser.add_argument("paths", nargs="*", metavar="FILE|DIR",
                        help="schedules files (.yaml, .yml, .json) or directories of them")
    parser.add_argument("--from-module", metavar="MODULE", default=None,
                        help="apply the @crondepot.periodic declarations of MODULE (imported "
                             "from the current directory) instead of files; the scope is "
                             "crondepot.module=MODULE unless --scope is given")
    parser.add_argument("--scope", type=scope_argument, default=None, metavar="LABEL=VALUE",
                        help="the label stamped on every job written; --prune cancels only "
                             "jobs carrying it")
    parser.add_argument("--prune", action="store_true",
                        help="cancel the scope's jobs the files no longer name")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan and change nothing")
    parser.add_argument("--days", type=int_in(1, MAX_DAYS, "a number of days"),
                        default=DEFAULT_DAYS, metavar="N",
                        help=f"the plan lists the fires of the next N days ({DEFAULT_DAYS})")
    parser.set_defaults(run=run)


def scope_argument(text: str) -> Scope:
    """--scope LABEL=VALUE as argparse reads it (crondepot export takes it too)."""
    try:
        return Scope.parse(text)
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace) -> int:
    if bool(args.paths) == bool(args.from_module):
        return fail("give schedules files (FILE|DIR) or --from-module MODULE, not both "
                    "nor neither", as_json=args.json)
    scope: Scope | None = args.scope
    try:
        if args.from_module:
            from crondepot.worker.periodic import declared, module_scope

            scope = scope or module_scope(args.from_module)
            import_module(args.from_module)
            docs = read_documents(declared(args.from_module), scope)
        else:
            docs = read_documents(documents(args.paths), scope)
    except InvalidJob as exc:
        return fail(problems(exc), as_json=args.json)
    with operator_connection(args, "crondepot-apply") as conn:
        tenant = tenant_id(conn, args.tenant)
        try:
            plan = apply_set(conn, tenant, docs, scope=scope, prune=args.prune,
                             dry_run=args.dry_run, days=args.days)
        except InvalidJob as exc:
            return fail(problems(exc), as_json=args.json)
    if args.json:
        print_json(plan.document())
    else:
        print_plan(plan, args.tenant)
    return 0


def problems(exc: InvalidJob) -> str:
    """Each problem on its line; a document's already say where and which field."""
    said = [message for _, message in exc.problems]
    if len(said) == 1:
        return said[0]
    return f"{len(said)} problems:" + "".join(f"\n  {line}" for line in said)


def import_module(module: str) -> None:
    """Import ``module`` from the current directory (as ``worker --import`` does)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise UnreadableSchedules(f"--from-module {module}: {exc}") from None


# -- reading files -------------------------------------------------------------------------

def documents(paths: list[str]) -> Iterator[tuple[str, str, Any]]:
    """Every document of ``paths`` as (where, path, document): where is ``file:line``
    (YAML) or ``file[index]`` (JSON)."""
    for name in paths:
        path = Path(name)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not files:
                raise UnreadableSchedules(f"{name}: no .yaml, .yml or .json file in it")
            for file in files:
                yield from _file(file)
        else:
            yield from _file(path)


def _file(path: Path) -> Iterator[tuple[str, str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableSchedules(f"cannot read {path}: {exc.strerror or exc}") from None
    if path.suffix == ".json":
        try:
            loaded = jsontext.loads(data)
        except ValueError as exc:
            _, message = jsontext.refusal(exc, "document")
            raise UnreadableSchedules(f"{path}: not JSON: {message}") from None
        items = loaded if isinstance(loaded, list) else [loaded]
        for index, doc in enumerate(items):
            yield (f"{path}[{index}]" if isinstance(loaded, list) else str(path)), "", doc
        return
    yield from _yaml(path, data)


def _yaml(path: Path, data: bytes) -> Iterator[tuple[str, str, Any]]:
    import yaml

    loader = _loader()(data)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            items = node.value if isinstance(node, yaml.SequenceNode) else [node]
            for item in items:
                fields = {k.value: f"{path}:{v.start_mark.line + 1}"
                          for k, v in item.value if isinstance(k, yaml.ScalarNode)} \
                    if isinstance(item, yaml.MappingNode) else {}
                where = Place(f"{path}:{item.start_mark.line + 1}", fields)
                yield where, "", loader.construct_document(item)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc)
        raise UnreadableSchedules(f"{at}: not YAML: {problem}") from None
    finally:
        loader.dispose()


_LOADER: Any = None


def _loader() -> Any:
    """PyYAML's safe loader (its C one when built), reading timestamps as text: a job
    document's instants are ISO-8601 strings, as in JSON."""
    global _LOADER
    if _LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        resolvers = {first: [(tag, regexp) for tag, regexp in found
                             if tag != "tag:yaml.org,2002:timestamp"]
                     for first, found in base.yaml_implicit_resolvers.items()}
        _LOADER = type("SchedulesLoader", (base,), {"yaml_implicit_resolvers": resolvers})
    return _LOADER


# -- printing the plan ---------------------------------------------------------------------

_SIGN = {"create": "+", "update": "~", "cancel": "-"}


def print_plan(plan: Plan, tenant: str) -> None:
    scope = f", scope {plan.scope.text}" if plan.scope else ""
    print(f"tenant {tenant}{scope}{', dry run: nothing changed' if plan.dry_run else ''}")
    for change in sorted(plan.changes, key=lambda c: (c.key, c.action)):
        _print_change(change, plan.days)
    counts = plan.counts
    print(f"{counts['changes']} change{'s' if counts['changes'] != 1 else ''}: "
          f"{counts['created']} created, {counts['updated']} updated, "
          f"{counts['cancelled']} cancelled ({counts['runs_cancelled']} queued runs), "
          f"{counts['unchanged']} unchanged; fires over the next {plan.days} days: "
          f"+{counts['fires_added']} -{counts['fires_removed']}")


def _print_change(change: Change, days: int) -> None:
    head = f"{_SIGN[change.action]} {change.action} {change.key}"
    if change.id is not None:
        head += f" (job {change.id})"
    if change.fields:
        head += f": {', '.join(sorted(change.fields))}"
    if change.action == "cancel":
        head += f"; {change.runs_cancelled} queued run(s) cancelled"
    if change.paused:
        head += " [paused]"
    print(head)
    for sign, fires in (("+", change.added), ("-", change.removed)):
        document = change.document()
        for fire in document["added" if sign == "+" else "removed"]:
            line = f"    {sign} {fire['local']}  {fire['at']}"
            if fire["note"]:
                line += f"  # {fire['note']}"
            print(line)
        if len(fires) > len(document["added" if sign == "+" else "removed"]):
            print(f"    {sign} … {len(fires)} fires in {days} days in all")
    if change.truncated:
        print("    (more fires than the plan reads; counts are a lower bound)")
