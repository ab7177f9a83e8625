"""``crondepot limits pause|resume NAME`` and ``crondepot hosts pause|resume|list``: hold a
tenant's queued runs of a rate limit or a target host (crondepot.limits.holds) without touching
its jobs, and end the hold."""

from __future__ import annotations

import argparse
from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.base.vocab import did_you_mean
from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.db import Q
from crondepot.limits import holds
from crondepot.limits.buckets import tenant_limits

_NOUN = {"rate_limit": "rate limit", "host": "host"}


def register_limits(actions: Any) -> None:
    """Add ``pause`` and ``resume`` to the ``limits`` actions."""
    _add_pair(actions, "rate_limit", "NAME")


def register(commands: Any) -> None:
    """The ``hosts`` group."""
    parser = commands.add_parser("hosts", help="hold or release a tenant's queued runs to a "
                                               "target host")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_pair(actions, "host", "HOST")
    listing = actions.add_parser("holds", help="list the tenant's holds (hosts and rate "
                                               "limits) with the queued runs each holds")
    add_database(listing)
    add_json(listing)
    add_tenant(listing)
    listing.set_defaults(run=run_list)


def _add_pair(actions: Any, kind: str, metavar: str) -> None:
    noun = _NOUN[kind]
    for verb, text in (("pause", f"hold the tenant's queued runs of a {noun}: they are not "
                                 "claimed until resumed (jobs are not touched)"),
                       ("resume", f"end the hold on a {noun}: its runs are claimed again "
                                  "(those past their misfire deadline are skipped)")):
        parser = actions.add_parser(verb, help=text, description=text)
        add_database(parser)
        add_json(parser)
        add_tenant(parser)
        parser.add_argument("name", metavar=metavar,
                            help="rate limit name" if kind == "rate_limit" else
                                 "host name, as in the target URL (sms.example.com)")
        parser.set_defaults(run=run_hold, hold_kind=kind, hold_verb=verb)


def run_hold(args: argparse.Namespace) -> int:
    kind, name = holds.checked(args.hold_kind, args.name)
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        if args.hold_verb == "pause":
            _check_known(conn, tenant, args.tenant, kind, name)
            changed = holds.hold(conn, tenant, kind, name)
        else:
            changed = holds.release(conn, tenant, kind, name)
        queued = next((h.queued for h in holds.list_holds(conn, tenant)
                       if (h.kind, h.name) == (kind, name)), 0)
    held = args.hold_verb == "pause"
    if args.json:
        print_json({"kind": kind, "name": name, "held": held, "changed": changed,
                    "queued": queued})
    elif held:
        print(f"{_NOUN[kind]} {name} held for {args.tenant}: {queued} queued runs wait"
              + ("" if changed else " (it was held already)"))
    else:
        print(f"{_NOUN[kind]} {name} released for {args.tenant}"
              + ("" if changed else " (it was not held)"))
    return 0


class UnknownName(CrondepotError):
    """A hold names a rate limit the tenant may not use, or a host none of its jobs call."""


def _check_known(conn: psycopg.Connection[Any], tenant: int, tenant_name: str, kind: str,
                 name: str) -> None:
    """Refuse to hold a name that holds nothing (a typo would otherwise hold nothing and say
    it worked); suggest the closest known one."""
    if kind == "rate_limit":
        known = [b.name for b in tenant_limits(conn, tenant)]
        where = f"rate limits {tenant_name} may use (crondepot limits list)"
    else:
        known = [row[0] for row in conn.execute(Q.tenant_hosts, {"tenant_id": tenant})]
        where = f"hosts the jobs of {tenant_name} call"
    if name in known:
        return
    raise UnknownName(f"{_NOUN[kind]} {name} is not one of the {where}"
                      f"{did_you_mean(name, known)}")


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        found = holds.list_holds(conn, tenant_id(conn, args.tenant))
    if args.json:
        print_json({"items": [h.document() for h in found]})
        return 0
    if not found:
        print("no holds")
    for h in found:
        print(f"{_NOUN[h.kind]} {h.name}: {h.queued} queued runs held since "
              f"{h.created_at.isoformat(timespec='seconds')} by {h.created_by or '-'}")
    return 0
