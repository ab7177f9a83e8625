"""``crondepot limits set|list|pause|resume``: named rate limits shared by every worker.

A bucket made here is shared: a tenant's jobs may name it once it is granted to the tenant
(``crondepot tenants grant TENANT --limit NAME``). A tenant makes buckets of its own with
``PUT /v1/limits/{name}``; ``limits set`` may change those too, and ``list`` shows whose.
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.cli import hosts as holds
from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.db import Q
from crondepot.limits.buckets import parse_rate, set_limit


def register(commands: Any) -> None:
    parser = commands.add_parser("limits", help="rate limits on targets (token buckets)")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    setting = actions.add_parser("set", help="create or change a limit: limits set NAME RATE")
    add_database(setting)
    add_json(setting)
    setting.add_argument("name", help="limit name, e.g. sms-gateway")
    setting.add_argument("rate", help="e.g. 450/s or 600/m")
    setting.add_argument("--burst", type=int_in(1, 2**31 - 1, "a burst"), default=None,
                         help="tokens that may be spent at once (default: an existing "
                              "limit's burst is kept; a new one gets one second's worth)")
    setting.set_defaults(run=run_set)
    listing = actions.add_parser("list", help="list limits")
    add_database(listing)
    add_json(listing)
    listing.set_defaults(run=run_list)
    holds.register_limits(actions)


def run_set(args: argparse.Namespace) -> int:
    rate = parse_rate(args.rate)
    with operator_connection(args) as conn:
        # Changing the rate of a bucket keeps its burst unless --burst says otherwise: a
        # burst tuned by hand must not be reset by a rate change.
        row = conn.execute(Q.rate_limit_burst, {"name": args.name}).fetchone()
        kept = args.burst is None and row is not None
        burst = args.burst if args.burst is not None else \
            int(row[0]) if row is not None else max(1, int(rate))
        set_limit(conn, args.name, rate, burst)
    if args.json:
        print_json({"name": args.name, "rate_per_second": rate, "burst": burst,
                    "burst_kept": kept})
    else:
        print(f"{args.name}: {rate:g}/s, burst {burst}"
              + (" (kept; --burst changes it)" if kept else ""))
    return 0


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        rows = conn.execute(Q.list_rate_limits).fetchall()
    if args.json:
        print_json([{"name": n, "rate_per_second": r, "burst": b, "owner": o}
                    for n, r, b, o in rows])
    else:
        for name, rate, burst, owner in rows:
            whose = f"tenant {owner}'s own" if owner else "shared"
            print(f"{name}: {rate:g}/s, burst {burst} ({whose})")
    return 0
