"""``crondepot calendars set|show|list|delete``: a tenant's exclusion calendars.

A job names one in its ``calendar`` field (docs/schedules.md, "Holiday calendars"). ``set``
replaces the calendar's dates whole, from ``--dates`` or from ``--file``: an iCalendar file
(.ics, its all-day events) or a plain list of dates (one YYYY-MM-DD a line, ``#`` comments).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any

from crondepot.base.errors import CrondepotError
from crondepot.cli.shared.options import add_database, add_json, operator_connection
from crondepot.cli.shared.output import fail, print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.tenancy.calendars import (
    Calendar,
    check_dates,
    check_name,
    delete_calendar,
    get_calendar,
    list_calendars,
    parse_file,
    set_calendar,
)
from crondepot.timetable.calendar import ON_EXCLUDED, Rule, business_days


def register(commands: Any) -> None:
    parser = commands.add_parser("calendars", help="a tenant's exclusion (holiday) calendars")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    setting = actions.add_parser("set", help="create or replace a calendar: calendars set "
                                             "NAME --tenant T --dates D,D | --file F")
    setting.add_argument("name", help="a short slug, e.g. in-bank-holidays")
    given = setting.add_mutually_exclusive_group(required=True)
    given.add_argument("--dates", help="comma-separated dates, e.g. 2026-12-25,2027-01-26")
    given.add_argument("--file", type=Path, help="an iCalendar file (.ics: its all-day "
                                                 "events) or one YYYY-MM-DD a line")
    setting.set_defaults(run=run_set)
    show = actions.add_parser("show", help="a calendar's dates")
    show.add_argument("name", help="the calendar's name")
    show.set_defaults(run=run_show)
    listing = actions.add_parser("list", help="the tenant's calendars")
    listing.set_defaults(run=run_list)
    deleting = actions.add_parser("delete", help="delete a calendar no live job uses")
    deleting.add_argument("name", help="the calendar's name")
    deleting.set_defaults(run=run_delete)
    for action in (setting, show, listing, deleting):
        add_database(action)
        add_tenant(action)
        add_json(action)


def _summary(calendar: Calendar) -> str:
    dates = calendar.dates
    span = f", {dates[0].isoformat()} to {dates[-1].isoformat()}" if dates else ""
    return f"{calendar.name}: {len(dates)} date{'' if len(dates) == 1 else 's'}{span} " \
           f"(version {calendar.version})"


def run_set(args: argparse.Namespace) -> int:
    check_name(args.name)
    if args.file is not None:
        try:
            text = args.file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return fail(f"--file: cannot read {str(args.file)!r}: {exc}", as_json=args.json)
        dates = parse_file(text, filename=args.file.name)
    else:
        dates = check_dates([d.strip() for d in args.dates.split(",") if d.strip()])
    with operator_connection(args) as conn:
        calendar = set_calendar(conn, tenant_id(conn, args.tenant), args.name, dates)
    if args.json:
        print_json(calendar.document())
    else:
        print(_summary(calendar))
    return 0


def run_show(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        calendar = get_calendar(conn, tenant_id(conn, args.tenant), args.name)
    if args.json:
        print_json(calendar.document())
    else:
        print(_summary(calendar))
        for day in calendar.dates:
            print(f"  {day.isoformat()} {day:%a}")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        calendars = list_calendars(conn, tenant_id(conn, args.tenant))
    if args.json:
        print_json([c.document() for c in calendars])
    else:
        for calendar in calendars:
            print(_summary(calendar))
    return 0


def run_delete(args: argparse.Namespace) -> int:
    with operator_connection(args) as conn:
        delete_calendar(conn, tenant_id(conn, args.tenant), args.name)
    if args.json:
        print_json({"name": args.name, "deleted": True})
    else:
        print(f"{args.name}: deleted")
    return 0


# -- crondepot next --calendar: what the calendar does to each fire of a preview ------------

def add_preview_options(parser: argparse.ArgumentParser) -> None:
    """``next``'s calendar options (the database only read when --calendar is given)."""
    parser.add_argument("--calendar", metavar="NAME", default=None,
                        help="show which fires this calendar of --tenant skips or moves")
    add_tenant(parser, required=False, help_text="the tenant whose calendar --calendar names")
    parser.add_argument("--on-excluded", choices=ON_EXCLUDED, default="skip",
                        help="what a fire on a calendar date does (default skip)")
    parser.add_argument("--business-days", default="mon-fri",
                        help="where a moved fire may land (default mon-fri)")
    add_database(parser)


def preview_rule(args: argparse.Namespace) -> Rule | None:
    """The rule ``--calendar`` asks for, its dates read from the database; None without it."""
    if args.calendar is None:
        return None
    if args.tenant is None:
        raise CrondepotError("--calendar needs --tenant (or CRONDEPOT_TENANT)")
    days = business_days(args.business_days, field="--business-days")
    with operator_connection(args) as conn:
        calendar = get_calendar(conn, tenant_id(conn, args.tenant), args.calendar)
    return Rule(dates=frozenset(calendar.dates), on_excluded=args.on_excluded,
                business_days=days, tz=args.tz)


def preview_note(rule: Rule, at: datetime) -> tuple[str | None, datetime | None]:
    """(what the calendar does to the fire at ``at``, for people; its due time, None if
    skipped)."""
    shift = rule.shift(at)
    if not shift.moved:
        return None, at
    local = at.astimezone(rule_zone(rule)).date().isoformat()
    if shift.at is None:
        return f"calendar: {local} excluded, skipped", None
    moved = shift.at.astimezone(rule_zone(rule)).replace(tzinfo=None).isoformat()
    return f"calendar: {local} excluded, due {moved} local", shift.at


def rule_zone(rule: Rule) -> Any:
    from zoneinfo import ZoneInfo
    return ZoneInfo(rule.tz)
