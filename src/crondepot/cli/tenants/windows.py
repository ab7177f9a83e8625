"""``crondepot tenants set-delivery-window TENANT``: the tenant's default delivery window.

A job without its own ``delivery_window`` (null or absent) follows its tenant's: the hours
of the day, in the job's zone, its runs may reach their target (docs/schedules.md,
"Delivery windows"). A job opts out with ``"delivery_window": "none"``. ``--clear`` removes
the default. The change applies to the fires the schedulers plan from now on and to the
runs the workers claim from now on; runs already queued keep their due times.
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import fail, print_json
from crondepot.cli.shared.tenant import add_tenant_argument, tenant_id
from crondepot.tenancy.tenants import set_delivery_window
from crondepot.timetable.delivery import DeliveryWindow, InvalidWindow, parse_window


def register(actions: Any) -> None:
    """Add ``set-delivery-window`` to ``crondepot tenants``' sub-commands."""
    setting = actions.add_parser(
        "set-delivery-window",
        help="the tenant's default delivery window (local hours its jobs' runs may be sent)",
        description="Jobs without a delivery_window of their own send their runs only "
                    "between --from and --to in their own zone, on --days; a fire due "
                    "outside is deferred to the next opening (or, with --outside skip, "
                    "recorded skipped). A job opts out with \"delivery_window\": \"none\".")
    add_database(setting)
    add_json(setting)
    add_tenant_argument(setting)
    setting.add_argument("--from", dest="start", metavar="HH:MM",
                         help="local time the window opens, like 09:00")
    setting.add_argument("--to", dest="end", metavar="HH:MM",
                         help="local time it closes, like 21:00 (before --from: overnight)")
    setting.add_argument("--days", metavar="DAYS",
                         help="the days it opens, like mon-sat or mon,wed,fri (default: "
                              "every day)")
    setting.add_argument("--outside", choices=("defer", "skip"), default="defer",
                         help="a fire due outside: deferred to the next opening (default) "
                              "or recorded skipped")
    setting.add_argument("--clear", action="store_true",
                         help="remove the tenant's default window")
    setting.set_defaults(run=run_set_delivery_window)


def _window(args: argparse.Namespace) -> DeliveryWindow | None:
    if args.clear:
        if args.start or args.end or args.days:
            raise InvalidWindow("give --clear alone, or --from and --to", field="clear")
        return None
    if not args.start or not args.end:
        raise InvalidWindow("give --from and --to (like --from 09:00 --to 21:00), or --clear",
                            field="from" if not args.start else "to")
    doc: dict[str, Any] = {"from": args.start, "to": args.end, "outside": args.outside}
    if args.days is not None:
        doc["days"] = args.days
    return parse_window(doc, "window")


def run_set_delivery_window(args: argparse.Namespace) -> int:
    try:
        window = _window(args)
    except InvalidWindow as exc:
        # the window's members are this command's options: --from, --to, --days, --outside
        return fail(str(exc).replace("window.", "--"), as_json=args.json)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)       # exits 2 naming an unknown tenant
        previous = set_delivery_window(conn, tenant, window)
    shown = None if window is None else window.document()
    if args.json:
        print_json({"tenant": args.tenant, "delivery_window": shown, "previous": previous})
    else:
        now = "none" if window is None else window.text
        was = "none" if previous is None else parse_window(previous).text
        print(f"{args.tenant}: default delivery window {now} (was {was})")
    return 0
