"""``crondepot tenants grant|revoke|show|set-quota``: what a tenant may use, and how much.

A grant names a Python handler (``--handler sms.send``), a shared rate limit
(``--limit sms-gateway``) or a broker connection (``--connection rabbit``) that the tenant's
jobs may name (crondepot.tenancy.grants); a quota caps its jobs (crondepot.tenancy.quotas).
Each command changes all it was asked to or, on an error, nothing; each is recorded in the
tenant's audit log.
"""

from __future__ import annotations

import argparse
from typing import Any

import psycopg
from rich.table import Table

from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import console, print_json
from crondepot.cli.shared.tenant import add_tenant_argument, tenant_id
from crondepot.db import Q
from crondepot.limits.buckets import tenant_limits
from crondepot.tenancy import grants, quotas

# An option not given (argparse applies ``type`` to string defaults only, so this stays).
_UNSET: Any = object()


def register(actions: Any) -> None:
    """Add the commands to ``crondepot tenants``' sub-commands."""
    for name, verb, run in (("grant", "let the tenant's jobs name", run_grant),
                            ("revoke", "stop the tenant's jobs naming", run_revoke)):
        parser = actions.add_parser(
            name, help=f"{verb} Python handlers, shared rate limits or connections",
            description=f"{verb.capitalize()} Python handlers (--handler), shared rate "
                        "limits (--limit) or broker connections (--connection); each option "
                        "may be repeated. All are changed, or none.")
        add_database(parser)
        add_json(parser)
        add_tenant_argument(parser)
        parser.add_argument("--handler", action="append", default=[], metavar="NAME",
                            help="a handler name, e.g. sms.send (repeatable)")
        parser.add_argument("--limit", action="append", default=[], metavar="NAME",
                            help="a shared rate limit, e.g. sms-gateway (repeatable)")
        parser.add_argument("--connection", action="append", default=[], metavar="NAME",
                            help="a broker connection, e.g. rabbit (repeatable)")
        parser.set_defaults(run=run)
    showing = actions.add_parser("show", help="a tenant's grants, rate limits and quotas")
    add_database(showing)
    add_json(showing)
    add_tenant_argument(showing)
    showing.set_defaults(run=run_show)
    quota = actions.add_parser(
        "set-quota", help="cap a tenant's jobs",
        description="Set the tenant's caps; the options not given stay as they are. 'none' "
                    "removes a cap. Lowering a cap cancels nothing: it bounds what the "
                    "tenant adds.")
    add_database(quota)
    add_json(quota)
    add_tenant_argument(quota)
    quota.add_argument("--max-jobs", type=_cap("--max-jobs"), metavar="N|none",
                       default=_UNSET, help="most jobs not cancelled (paused ones count)")
    quota.add_argument("--max-urgent-jobs", type=_cap("--max-urgent-jobs"), metavar="N|none",
                       default=_UNSET, help="most of them with priority urgent")
    urgent = quota.add_mutually_exclusive_group()
    urgent.add_argument("--urgent", dest="urgent", action="store_const", const=True,
                        help="the tenant may use the urgent priority (the default)")
    urgent.add_argument("--no-urgent", dest="urgent", action="store_const", const=False,
                        help="the tenant may not create urgent jobs or make jobs urgent")
    quota.set_defaults(run=run_set_quota, urgent=None)


def _cap(option: str) -> Any:
    def parse(text: str) -> int | None:
        if text.strip().lower() == "none":
            return None
        if not text.strip().isdigit() or int(text) > quotas.MAX_CAP:
            raise argparse.ArgumentTypeError(
                f"expected {option} to be an integer from 0 to {quotas.MAX_CAP} or 'none', "
                f"got {text!r}")
        return int(text)
    return parse


def run_grant(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        grants.grant(conn, tenant, handlers=args.handler, limits=args.limit,
                     connections=args.connection)
        return _print_change(conn, args, tenant, "granted to")


def run_revoke(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        grants.revoke(conn, tenant, handlers=args.handler, limits=args.limit,
                     connections=args.connection)
        return _print_change(conn, args, tenant, "revoked from")


def _print_change(conn: psycopg.Connection[Any], args: argparse.Namespace, tenant: int,
                  done: str) -> int:
    if args.json:
        print_json(_grants_json(conn, tenant) | {"tenant": args.tenant})
        return 0
    names = [f"handler {n}" for n in dict.fromkeys(args.handler)] \
        + [f"limit {n}" for n in dict.fromkeys(args.limit)] \
        + [f"connection {n}" for n in dict.fromkeys(args.connection)]
    print(f"{done} {args.tenant}: {', '.join(names)}")
    return 0


def _grants_json(conn: psycopg.Connection[Any], tenant: int) -> dict[str, Any]:
    found = grants.list_grants(conn, tenant)
    return {"handlers": [g.name for g in found if g.kind == "handler"],
            "limits": [g.name for g in found if g.kind == "limit"],
            "connections": [g.name for g in found if g.kind == "connection"]}


def run_set_quota(args: argparse.Namespace) -> int:
    given = {name: value for name, value in (("max_jobs", args.max_jobs),
                                             ("max_urgent_jobs", args.max_urgent_jobs))
             if value is not _UNSET}
    if not given and args.urgent is None:
        raise quotas.InvalidQuota("give at least one of --max-jobs, --max-urgent-jobs, "
                                  "--urgent, --no-urgent")
    with operator_connection(args) as conn:
        quota = quotas.set_quota(conn, tenant_id(conn, args.tenant), **given,
                                 urgent_allowed=args.urgent)
    if args.json:
        print_json({"tenant": args.tenant, **quota.document()})
    else:
        print(f"{args.tenant}: {_quota_text(quota)}")
    return 0


def _quota_text(quota: quotas.Quota) -> str:
    def cap(value: int | None) -> str:
        return "no cap" if value is None else str(value)

    return (f"jobs {quota.active_jobs} (max {cap(quota.max_jobs)}), urgent jobs "
            f"{quota.urgent_jobs} (max {cap(quota.max_urgent_jobs)}), urgent "
            f"{'allowed' if quota.urgent_allowed else 'not allowed'}")


def run_show(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        row = conn.execute(Q.tenant_by_name, {"name": args.tenant}).fetchone()
        assert row is not None
        quota = quotas.read(conn, tenant)
        found = grants.list_grants(conn, tenant)
        buckets = tenant_limits(conn, tenant)
    doc = {"tenant": args.tenant, "id": tenant, "created_at": row[2].isoformat(),
           "grants": {"handlers": [g.name for g in found if g.kind == "handler"],
                      "limits": [g.name for g in found if g.kind == "limit"],
            "connections": [g.name for g in found if g.kind == "connection"]},
           "own_limits": [{"name": b.name, "rate_per_second": b.rate_per_second,
                           "burst": b.burst} for b in buckets if b.owned],
           "quota": quota.document()}
    if args.json:
        print_json(doc)
        return 0
    print(f"tenant {args.tenant} (id {tenant}), created {doc['created_at']}")
    print(f"quota: {_quota_text(quota)}")
    table = Table(title=f"grants of {args.tenant}")
    table.add_column("kind")
    table.add_column("name")
    table.add_column("granted")
    for g in found:
        table.add_row(g.kind, g.name, g.granted_at.isoformat(timespec="seconds"))
    for b in buckets:
        if b.owned:
            table.add_row("own limit", b.name, f"{b.rate_per_second:g}/s, burst {b.burst}")
    console().print(table)
    if not found and not any(b.owned for b in buckets):
        print(f"no grants: its jobs may name no Python handler and no rate limit "
              f"(crondepot tenants grant {args.tenant} --handler NAME --limit NAME)")
    return 0
