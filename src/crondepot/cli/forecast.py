"""``crondepot forecast``: a tenant's runs over the next hours against its rate limits.

Prints, for each rate limit the tenant's jobs name, the waves of runs its bucket will
drain, when each is drained and how many would pass their misfire deadline; runs with no
rate limit are counted (workers bound them, and workers are not modelled).
"""

from __future__ import annotations

import argparse
from typing import Any

from crondepot.cli.shared.options import add_database, add_json, int_in, operator_connection
from crondepot.cli.shared.output import print_json
from crondepot.cli.shared.tenant import add_tenant, tenant_id
from crondepot.forecast.report import DEFAULT_HOURS, MAX_HOURS, forecast
from crondepot.forecast.text import lines
from crondepot.timetable import validate_zone


def _zone(text: str) -> str:
    try:
        validate_zone(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "forecast", help="a tenant's runs per minute ahead, against its rate limits",
        description="Count the runs the tenant's live jobs will write over the next hours "
                    "(timetables, calendars, delivery windows, max_runs, start_at/end_at; "
                    "paused jobs left out), computed once per distinct timetable, and drain "
                    "them with the runs queued now through each rate limit's token bucket "
                    "(burst first, then the rate, in the claim's order: oldest first, the "
                    "earliest misfire deadline first within a limit): when each wave is "
                    "drained and how many would pass their misfire deadline. A held limit "
                    "sends nothing. Runs with no rate limit are counted only: workers bound "
                    "them, and workers are not modelled. Other tenants' runs on a shared "
                    "bucket are not counted.")
    add_database(parser)
    add_json(parser)
    add_tenant(parser, help_text="the tenant whose jobs are forecast")
    parser.add_argument("--hours", type=int_in(1, MAX_HOURS, "a number of hours"),
                        default=DEFAULT_HOURS,
                        help=f"how far ahead (default {DEFAULT_HOURS}, at most {MAX_HOURS})")
    parser.add_argument("--tz", type=_zone, default="UTC",
                        help="the zone whose clock the times are printed on (default UTC)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with operator_connection(args, "crondepot-forecast") as conn:
        result = forecast(conn, tenant_id(conn, args.tenant), hours=args.hours)
    if args.json:
        print_json(result.document())
    else:
        for line in lines(result, validate_zone(args.tz)):
            print(line)
    return 0
