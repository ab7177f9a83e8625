"""The maintenance settings every scheduler and worker takes (any of them may be elected to
run the services), and ``crondepot prune``, one manual pass of the pruner."""

from __future__ import annotations

import argparse
import json
import os
from datetime import timedelta
from typing import Any

from crondepot.base.errors import InvalidSetting
from crondepot.cli.shared.options import (
    add_database,
    add_json,
    database,
    duration,
    duration_or_off,
    int_in,
    window,
)
from crondepot.db import ALL_TENANTS, connect
from crondepot.maintenance import MaintenanceConfig
from crondepot.notices.sender import (
    DEFAULT_FROM,
    SMTP_FROM_ENV,
    SMTP_URL_ENV,
    NoticeSender,
    SmtpRelay,
)
from crondepot.queue.lease import DEFAULT_MAX_LEASE_SECONDS
from crondepot.runs.partitions import Retired, retire_ended
from crondepot.runs.retention import PRUNE_BATCH, prune_cutoff, prune_finished_runs


def retention_days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 36_500:
        raise argparse.ArgumentTypeError(
            f"expected a number of days from 0 (keep forever) to 36500, got {text!r}")
    return value


def add_maintenance(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    group = parser.add_argument_group(
        "maintenance", "one scheduler or worker, elected through a PostgreSQL advisory lock, "
        "runs these services; the settings of whichever process is elected apply")
    group.add_argument("--no-maintenance", dest="maintenance", action="store_false",
                       help="never stand for election (this process only ticks or calls)")
    group.add_argument("--reap-every", type=duration, metavar="DURATION",
                       default=env("CRONDEPOT_REAP_EVERY", "5s"),
                       help="return runs with expired leases to the queue this often "
                            "(default 5s)")
    group.add_argument("--max-lease", metavar="SECONDS",
                       type=int_in(1, 10 * 365 * 86400, "a whole number of seconds"),
                       default=env("CRONDEPOT_MAX_LEASE_SECONDS",
                                   str(DEFAULT_MAX_LEASE_SECONDS)),
                       help="a run's lease time over all its attempts, at most; a run that used "
                            "it all goes to the dead letter, by the worker or the rescuer "
                            f"(default {DEFAULT_MAX_LEASE_SECONDS} = 12 h)")
    group.add_argument("--retention-days", type=retention_days, metavar="DAYS",
                       default=env("CRONDEPOT_RETENTION_DAYS", "30"),
                       help="delete finished runs older than this (0 = keep; default 30; "
                            "dead-lettered runs are always kept)")
    group.add_argument("--verify-every", type=duration_or_off, metavar="DURATION",
                       default=env("CRONDEPOT_VERIFY_EVERY", "5m"),
                       help="check the ledger (crondepot verify) this often; 0 turns it off "
                            "(default 5m)")
    group.add_argument("--verify-window", type=window, metavar="DURATION",
                       default=env("CRONDEPOT_VERIFY_WINDOW", "1h"),
                       help="how far back each check looks, e.g. 90m, 6h or 2d, at most 31d "
                            "(default 1h); it also reaches back to the oldest fire the last "
                            "check found pending")
    group.add_argument("--notice-every", type=duration_or_off, metavar="DURATION",
                       default=env("CRONDEPOT_NOTICE_EVERY", "5s"),
                       help="compose and send the tenants' failure notices this often; 0 "
                            "turns them off (default 5s; docs/notices.md)")
    group.add_argument("--notice-window", type=window, metavar="DURATION",
                       default=env("CRONDEPOT_NOTICE_WINDOW", "1h"),
                       help="at most one notice per channel and job within this; what comes "
                            "meanwhile goes out as one digest after it (default 1h)")
    group.add_argument("--smtp-url", type=smtp_url, metavar="URL",
                       default=env(SMTP_URL_ENV) or None,
                       help="the SMTP relay e-mail notices go through: smtp://host:port, "
                            "smtp+starttls://user:password@host:587 or smtps://host:465, "
                            "?from=ADDRESS optional (env CRONDEPOT_SMTP_URL; none: e-mail "
                            "notices wait)")
    group.add_argument("--smtp-from", metavar="ADDRESS", default=env(SMTP_FROM_ENV) or None,
                       help="the From address of e-mail notices (env CRONDEPOT_SMTP_FROM; "
                            f"default the URL's ?from=, else {DEFAULT_FROM})")


def smtp_url(text: str) -> str:
    try:
        SmtpRelay.from_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def maintenance_config(args: argparse.Namespace, url: str, name: str) -> MaintenanceConfig:
    return MaintenanceConfig(url=url, name=name, enabled=args.maintenance,
                             reap_seconds=args.reap_every, max_lease_seconds=args.max_lease,
                             retention_days=args.retention_days,
                             verify_every=args.verify_every, verify_window=args.verify_window,
                             notices=_notice_sender(args) if args.notice_every else None,
                             notice_seconds=args.notice_every or 5.0)


def _notice_sender(args: argparse.Namespace) -> NoticeSender:
    relay = None if args.smtp_url is None \
        else SmtpRelay.from_url(args.smtp_url, sender=args.smtp_from)
    try:
        return NoticeSender(smtp=relay, window_seconds=args.notice_window)
    except ValueError as exc:       # the target allow-list its webhooks are guarded by
        raise InvalidSetting(str(exc)) from None


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "prune", help="delete finished runs past the retention period now, and drop the "
                      "day partitions of runs it has passed (the maintenance leader does it "
                      "every minute)")
    add_database(parser)
    parser.add_argument("--retention-days", type=retention_days, metavar="DAYS",
                        default=os.environ.get("CRONDEPOT_RETENTION_DAYS", "30"),
                        help="delete finished runs older than this many days (default 30; "
                             "dead-lettered runs are always kept)")
    add_json(parser)
    parser.set_defaults(run=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    total = 0
    retired: list[Retired] = []
    if args.retention_days:
        keep = timedelta(days=args.retention_days)
        with database(args) as db, connect(db.url, application_name="crondepot-prune",
                                          tenants=ALL_TENANTS) as conn:
            retired = retire_ended(conn, keep)   # days dropped whole, as the pruner does
            cutoff = prune_cutoff(conn, keep)
            while True:   # bounded passes: each a short transaction, whatever the backlog
                pruned = prune_finished_runs(conn, keep, cutoff=cutoff)
                total += pruned
                if pruned < PRUNE_BATCH:
                    break
    if args.json:
        print(json.dumps({"pruned": total, "retention_days": args.retention_days,
                          "partitions_dropped": [r.name for r in retired]}))
    elif args.retention_days:
        print(f"pruned {total} finished runs older than {args.retention_days:g} days"
              + "".join(f"; partition {r.name} dropped (~{max(r.estimated - r.moved, 0)} "
                        f"runs, {r.moved} kept and moved to runs_default)" for r in retired))
    else:
        print("retention 0 keeps finished runs forever: nothing pruned")
    return 0
