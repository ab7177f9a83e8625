"""``crondepot tenants set-weight TENANT N``: a tenant's share of the workers' claims.

Within each priority, a claim shares its turns among the tenants that have runs ready, in
proportion to their weights (default 1): with weights 3 and 1 and both tenants busy, a
claim of 20 runs takes 15 of the first tenant's and 5 of the second's. A tenant alone in a
queue gets every turn whatever its weight. The next claim of every worker uses the new
weight.
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import add_tenant_argument, tenant_id
from crondepot.queue.fairness import MAX_WEIGHT, MIN_WEIGHT, set_claim_weight


def register(actions: Any) -> None:
    """Add ``set-weight`` to ``crondepot tenants``' sub-commands."""
    setting = actions.add_parser(
        "set-weight", help="the tenant's share of each priority's claims (default 1)",
        description="Within each priority, workers share their claims among the tenants "
                    "with runs ready in proportion to these weights, so one tenant's burst "
                    "does not hold back the others. A tenant alone in a queue gets every "
                    "turn whatever its weight.")
    add_database(setting)
    add_json(setting)
    add_tenant_argument(setting)
    setting.add_argument("weight", metavar="N",
                         type=int_in(MIN_WEIGHT, MAX_WEIGHT, "a weight"),
                         help=f"an integer from {MIN_WEIGHT} to {MAX_WEIGHT}")
    setting.set_defaults(run=run_set_weight)


def run_set_weight(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        previous = set_claim_weight(conn, tenant, args.weight)
    if args.json:
        print_json({"tenant": args.tenant, "claim_weight": args.weight, "previous": previous})
    else:
        print(f"{args.tenant}: claim weight {args.weight} (was {previous})")
    return 0
