"""``crondepot tenants set-alert-after TENANT N`` (a tenant's default alert threshold), and
the health lines ``jobs show`` prints and ``jobs list --unhealthy`` filters by.

A job is unhealthy when its latest fires, in the order they ended, ended failed, dead or
skipped past their misfire deadline N times in a row, N being the job's
``alert_after_failures`` or else its tenant's (default 3); see ``crondepot.job.health``.
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import tenant_id
from crondepot.db import Q
from crondepot.job.health import MAX_ALERT_AFTER, Health, set_tenant_threshold


def register(actions: Any) -> None:
    """Add ``set-alert-after`` to ``crondepot tenants``' sub-commands."""
    setting = actions.add_parser(
        "set-alert-after", help="the tenant's default alert threshold: failed fires in a row "
                                "that make a job unhealthy (default 3)",
        description="A job whose latest N fires ended failed, dead or skipped past their "
                    "misfire deadline is unhealthy: listed by `jobs list --unhealthy`, "
                    "counted in crondepot_jobs_unhealthy{tenant}, marked in the console. N "
                    "is the job's alert_after_failures, else this tenant default.")
    add_database(setting)
    add_json(setting)
    setting.add_argument("tenant", metavar="TENANT", help="the tenant's name")
    setting.add_argument("threshold", metavar="N",
                         type=int_in(1, MAX_ALERT_AFTER, "a threshold"),
                         help=f"an integer from 1 to {MAX_ALERT_AFTER}")
    setting.set_defaults(run=run_set_alert_after)


def run_set_alert_after(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)       # exits 2 naming an unknown tenant
        row = conn.execute(Q.tenant_alert_after, {"tenant_id": tenant}).fetchone()
        previous = None if row is None else row[0]
        set_tenant_threshold(conn, args.tenant, args.threshold)
    if args.json:
        print_json({"tenant": args.tenant, "alert_after_failures": args.threshold,
                    "previous": previous})
    else:
        print(f"{args.tenant}: jobs alert after {args.threshold} failed fires in a row "
              f"(was {previous})")
    return 0


def health_lines(health: Health) -> list[tuple[str, str]]:
    """``jobs show``'s lines for a job's health."""
    state = "UNHEALTHY" if health.unhealthy else "ok"
    success = "never (in the runs kept)" if health.last_success_at is None else \
        f"{health.last_success_at.isoformat(timespec='seconds')} " \
        f"(run {health.last_success_run_id})"
    return [("health", f"{state}: {health.consecutive_failures} failed fire(s) in a row, "
                       f"alert after {health.alert_after_failures} "
                       f"({health.threshold_from})"),
            ("last ok", success)]
