"""``crondepot jobs bulk pause|resume|cancel``: one action on every job of a tenant that a
filter matches (crondepot.job.bulk), and the ``--label k=v`` option ``jobs list`` shares.

It counts first and shows the count (and a few keys); on a terminal it then asks to
confirm. ``--dry-run`` stops after the count; ``--yes`` skips the question, and is required
when stdin is not a terminal: a script must say so rather than hang or act unasked.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crondepot.base.errors import InvalidJob
from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import fail, print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.job import bulk
from crondepot.job.bulk import ACTIONS, BulkFilter
from crondepot.job.spec import PRIORITIES

_HELP = {"pause": "pause every job a filter matches",
         "resume": "resume every paused job a filter matches (from now)",
         "cancel": "cancel every job a filter matches, for good"}


def label(text: str) -> tuple[str, str]:
    """An argparse type: ``bank=42``."""
    try:
        return bulk.parse_label(text)
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_label(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--label", type=label, action="append", metavar="KEY=VALUE",
                        help="only jobs with this label (repeat: all of them)")


def register(actions: Any) -> None:
    """Add ``bulk`` to the ``jobs`` actions."""
    parser = actions.add_parser("bulk", help="pause, resume or cancel every job a filter "
                                             "matches (shows the count first)")
    kinds = parser.add_subparsers(dest="bulk_action", required=True, metavar="ACTION")
    for action in ACTIONS:
        doing = kinds.add_parser(action, help=_HELP[action], description=_HELP[action]
                                 + "; at least one filter option is required")
        add_database(doing)
        add_json(doing)
        add_tenant(doing)
        doing.add_argument("--key-prefix", metavar="PREFIX", help="only keys starting so")
        add_label(doing)
        doing.add_argument("--host", metavar="HOST",
                           help="only jobs whose http target calls this host")
        doing.add_argument("--rate-limit", metavar="NAME", help="only jobs of this rate limit")
        doing.add_argument("--priority", choices=PRIORITIES, help="only this priority")
        doing.add_argument("--dry-run", action="store_true",
                           help="show the count and a few keys; change nothing")
        doing.add_argument("--yes", "-y", action="store_true",
                           help="do not ask to confirm (required when stdin is not a "
                                "terminal)")
        doing.set_defaults(run=run_bulk, bulk_action=action)


def run_bulk(args: argparse.Namespace) -> int:
    action = args.bulk_action
    try:
        where = BulkFilter.checked(key_prefix=args.key_prefix,
                                   labels=dict(args.label) if args.label else None,
                                   host=args.host, rate_limit=args.rate_limit,
                                   priority=args.priority)
    except InvalidJob as exc:
        option = "filter" if exc.field == "filter" else f"--{exc.field.replace('_', '-')}"
        return fail(f"{option}: {exc}", as_json=args.json)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        seen = bulk.preview(conn, tenant, action, where)
        if args.dry_run:
            return _report(args, action, seen.count, seen.sample, dry_run=True)
        if not args.json:
            print(_preview_text(action, seen.count, seen.sample))
        if seen.count and not args.yes:
            if not sys.stdin.isatty():
                return fail(f"not on a terminal: add --yes to {action} these "
                            f"{seen.count} jobs (or --dry-run to only count them)",
                            as_json=args.json)
            answer = input(f"{action} {seen.count} jobs of {args.tenant}? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing changed")
                return 1
        changed = bulk.apply(conn, tenant, action, where) if seen.count else 0
    return _report(args, action, changed, [], dry_run=False)


def _preview_text(action: str, count: int, sample: list[str]) -> str:
    more = ", ..." if count > len(sample) else ""
    keys = f": {', '.join(sample)}{more}" if sample else ""
    return f"{count} jobs match ({action}){keys}"


def _report(args: argparse.Namespace, action: str, count: int, sample: list[str], *,
            dry_run: bool) -> int:
    if args.json:
        print_json({"action": action, "dry_run": dry_run, "count": count, "sample": sample})
    elif dry_run:
        print(_preview_text(action, count, sample) + "; dry run, nothing changed")
    else:
        print(f"{action}: {count} jobs changed")
    return 0
