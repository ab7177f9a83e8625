"""``crondepot notices add|channels|remove`` and ``crondepot notices list``: a tenant's
failure notices (docs/notices.md), as the operator manages them for it.

A channel is a webhook (``--webhook URL``: signed with the tenant's secret, as run deliveries
are; the URL checked by the same rule and address guard as a job's target) or an e-mail
address (``--email ADDRESS``: sent through the SMTP relay the scheduler and worker are given
with ``--smtp-url``). ``list`` shows the notices sent, pending (with the next attempt) and
failed (with the last error).
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.base.vocab import NOTICE_STATUSES
from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.notices.channels import Channel, add_channel, list_channels, remove_channel
from crondepot.notices.outbox import MAX_LIST, Message, held_events, list_messages


def register(commands: Any) -> None:
    parser = commands.add_parser("notices", help="a tenant's failure notices: channels (a "
                                                 "signed webhook, e-mail) and what was sent")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    adding = actions.add_parser("add", help="add a channel: --webhook URL or --email ADDRESS")
    given = adding.add_mutually_exclusive_group(required=True)
    given.add_argument("--webhook", metavar="URL", help="an http(s) URL, called with a JSON "
                                                        "body signed as run deliveries are")
    given.add_argument("--email", metavar="ADDRESS", help="an e-mail address")
    adding.set_defaults(run=run_add)
    listing = actions.add_parser("channels", help="the tenant's channels")
    listing.set_defaults(run=run_channels)
    removing = actions.add_parser("remove", help="remove a channel, its waiting events and "
                                                 "its notices")
    removing.add_argument("channel_id", metavar="ID", type=int_in(1, 2**63 - 1, "a channel id"),
                          help="the channel's id (notices channels)")
    removing.set_defaults(run=run_remove)
    sent = actions.add_parser("list", help="the notices sent, pending and failed, newest "
                                           "first")
    sent.add_argument("--status", choices=NOTICE_STATUSES, help="only notices in this state")
    sent.add_argument("--limit", type=int_in(1, MAX_LIST, "a count"), default=20,
                      help=f"at most this many (default 20, at most {MAX_LIST})")
    sent.set_defaults(run=run_list)
    for action in (adding, listing, removing, sent):
        add_database(action)
        add_tenant(action)
        add_json(action)


def _channel_line(channel: Channel) -> str:
    return f"{channel.id}  {channel.kind:<7}  {channel.address}"


def run_add(args: argparse.Namespace) -> int:
    kind, address = ("webhook", args.webhook) if args.webhook is not None \
        else ("email", args.email)
    with operator_connection(args) as conn:
        channel, added = add_channel(conn, tenant_id(conn, args.tenant), kind, address)
    if args.json:
        print_json({**channel.document(), "added": added})
    else:
        print(("added " if added else "already there: ") + _channel_line(channel))
    return 0


def run_channels(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        channels = list_channels(conn, tenant_id(conn, args.tenant))
    if args.json:
        print_json([c.document() for c in channels])
    else:
        for channel in channels:
            print(_channel_line(channel))
    return 0


def run_remove(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        remove_channel(conn, tenant_id(conn, args.tenant), args.channel_id)
    if args.json:
        print_json({"id": args.channel_id, "removed": True})
    else:
        print(f"removed channel {args.channel_id}")
    return 0


def _notice_line(message: Message) -> str:
    kind = "digest" if message.digest else "notice"
    state = message.status
    if message.status == "sent" and message.sent_at is not None:
        state = f"sent {message.sent_at:%Y-%m-%d %H:%M:%S}"
    elif message.status == "pending":
        state = f"pending, next {message.next_attempt_at:%Y-%m-%d %H:%M:%S}"
    line = f"{message.id}  job {message.job_id}  {kind} of {len(message.events)}  to " \
           f"{message.channel_kind} {message.channel_id}  {state}, {message.attempts} " \
           f"attempt{'' if message.attempts == 1 else 's'}"
    return line + (f"\n    last error: {message.last_error}" if message.last_error else "")


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        tenant = tenant_id(conn, args.tenant)
        messages = list_messages(conn, tenant, status=args.status, limit=args.limit)
        held = held_events(conn, tenant)
    if args.json:
        print_json({"items": [m.document() for m in messages], "held": held})
    else:
        for message in messages:
            print(_notice_line(message))
        print(f"{held} event{'' if held == 1 else 's'} waiting for their notice")
    return 0
