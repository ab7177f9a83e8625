"""``crondepot connections add|list|remove``: broker URLs the operator names.

A connection is granted to tenants (``crondepot tenants grant TENANT --connection NAME``);
a job's broker target names it (docs/targets.md). Its URL, which may hold a password, is
never printed: ``list`` shows the scheme and host.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.tenancy import connections


def register(commands: Any) -> None:
    parser = commands.add_parser("connections", help="broker connections for broker targets")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    adding = actions.add_parser(
        "add", help="name a broker URL: connections add NAME URL",
        description="Store a broker URL under a name (or change the URL of an existing "
                    "name). Schemes: amqp, amqps (RabbitMQ), nats, tls (NATS JetStream), "
                    "redis, rediss (Redis Streams). The URL is never printed back.")
    add_database(adding)
    add_json(adding)
    adding.add_argument("name", help="connection name, e.g. rabbit")
    adding.add_argument("url", help="e.g. amqp://user:secret@mq.internal:5672/%%2F, or - to "
                                    "read it from standard input (kept out of the shell's "
                                    "history and the process list)")
    adding.set_defaults(run=run_add)
    listing = actions.add_parser("list", help="list connections (scheme and host only)")
    add_database(listing)
    add_json(listing)
    listing.set_defaults(run=run_list)
    removing = actions.add_parser(
        "remove", help="remove a connection and its grants",
        description="Remove a connection and its grants to tenants; runs of jobs naming it "
                    "then fail as a revoked handler's do.")
    add_database(removing)
    add_json(removing)
    removing.add_argument("name", help="connection name")
    removing.set_defaults(run=run_remove)


def run_add(args: argparse.Namespace) -> int:
    url = sys.stdin.readline().strip() if args.url == "-" else args.url
    with operator_connection(args) as conn:
        created = connections.add(conn, args.name, url)
    scheme, host = connections.redacted(url)
    if args.json:
        print_json({"name": args.name, "scheme": scheme, "host": host, "created": created})
    else:
        print(f"{args.name}: {scheme}://{host} ({'added' if created else 'changed'})")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        found = connections.list_connections(conn)
    if args.json:
        print_json([{"name": c.name, "scheme": c.scheme, "host": c.host,
                     "created_at": c.created_at.isoformat()} for c in found])
    else:
        for c in found:
            print(f"{c.name}: {c.scheme}://{c.host}")
    return 0


def run_remove(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        connections.remove(conn, args.name)
    if args.json:
        print_json({"name": args.name, "removed": True})
    else:
        print(f"{args.name}: removed")
    return 0
