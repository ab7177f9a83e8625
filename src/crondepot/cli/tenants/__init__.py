"""``crondepot tenants create|list``; the group's other actions are its submodules:
``grants`` (grant, revoke, show, set-quota), ``weights`` (set-weight), ``health``
(set-alert-after), ``windows`` (set-delivery-window) and ``tokens`` (token
create|list|revoke, secret rotate).

A tenant's token and webhook signing secret are printed once, when it is created: only the
token's sha256 is stored, so it cannot be shown again (``tenants token`` and ``tenants
secret``, in ``tokens``, issue more tokens and rotate the secret). Commands that act
for a tenant name it with ``--tenant NAME`` or ``CRONDEPOT_TENANT`` (``cli.shared.tenant``).
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.table import Table

from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import console, print_json
from crondepot.db import Q
from crondepot.tenancy.tenants import create_tenant


def register(commands: Any) -> None:
    parser = commands.add_parser("tenants", help="tenants and their API tokens")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    creating = actions.add_parser("create", help="create a tenant and print its API token "
                                                 "(shown once)")
    add_database(creating)
    add_json(creating)
    creating.add_argument("name", help="lowercase letters, digits, '.', '_' or '-'")
    creating.add_argument("--role", choices=("admin", "read"), default="admin",
                          help="what the token may do: admin (read and write, the default) "
                               "or read")
    creating.set_defaults(run=run_create)
    listing = actions.add_parser("list", help="list tenants")
    add_database(listing)
    add_json(listing)
    listing.set_defaults(run=run_list)
    from crondepot.cli.tenants import grants, health, tokens, weights, windows

    grants.register(actions)
    health.register(actions)
    tokens.register(actions)
    weights.register(actions)
    windows.register(actions)


def run_create(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = create_tenant(conn, args.name, role=args.role)
    if args.json:
        print_json({"tenant": tenant.name, "id": tenant.id, "token": tenant.token,
                    "role": args.role, "signing_secret": tenant.signing_secret})
        return 0
    print(f"created tenant {tenant.name} (id {tenant.id})")
    print(f"{args.role} token: {tenant.token}")
    print(f"webhook signing secret: {tenant.signing_secret}")
    print("Keep both now: they will not be shown again (only the token's hash is stored; "
          "`tenants secret rotate` makes a new secret).")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        rows = conn.execute(Q.list_tenants).fetchall()
    if args.json:
        print_json([{"id": i, "tenant": name, "created_at": created.isoformat(),
                     "active_jobs": jobs, "claim_weight": weight}
                    for i, name, created, jobs, weight in rows])
        return 0
    table = Table(title="tenants")
    table.add_column("id", justify="right")
    table.add_column("tenant")
    table.add_column("active jobs", justify="right")
    table.add_column("created")
    table.add_column("claim weight", justify="right")
    for i, name, created, jobs, weight in rows:
        table.add_row(str(i), name, str(jobs), created.isoformat(timespec="seconds"),
                      str(weight))
    console().print(table)
    return 0
