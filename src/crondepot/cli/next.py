"""``crondepot next CRON --tz ZONE [--start-at T] [--end-at T]``: preview a timetable (``L``
and ``D#n`` included), inside a job's window if given, with the fires DST moved or merged."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from crondepot.base.errors import InvalidSchedule
from crondepot.cli.shared.options import int_in
from crondepot.cli.shared.output import print_json
from crondepot.timetable import FIRE_NOTES, Fire, Schedule, Timetable

# Kept importable from here: the job preview (cli/jobs) reads it by this name.
__all__ = ["FIRE_NOTES", "register", "run"]


def register(commands: Any) -> None:
    parser = commands.add_parser("next", help="show the next fire times of a cron expression")
    parser.add_argument("cron", help='five fields, e.g. "30 1 * * *", "0 9 L * *" (last day '
                                     'of the month), "0 9 LW * *" (last weekday), "0 9 L-3 '
                                     '* *" (3 days before the last day), "0 9 15W * *" '
                                     '(weekday nearest the 15th), "0 9 * * 1#1" (first '
                                     'Monday), "0 9 * * 5L" (last Friday), or an alias like '
                                     '@daily')
    parser.add_argument("--tz", default="UTC", help="IANA time zone (default UTC)")
    parser.add_argument("--after", type=_instant, default=None,
                        help="ISO-8601 instant to start after (default: now)")
    parser.add_argument("-n", "--count", type=int_in(1, 10_000, "a count"), default=5,
                        help="how many (default 5)")
    parser.add_argument("--key", default=None, help="job key that H fields hash on")
    parser.add_argument("--start-at", type=_instant, default=None,
                        help="ISO-8601 instant: no fire before it (a job's start_at)")
    parser.add_argument("--end-at", type=_instant, default=None,
                        help="ISO-8601 instant: no fire after it (a job's end_at)")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list of ISO-8601 UTC instants")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    timetable = Timetable(args.cron, args.tz, hash_key=args.key)
    if args.start_at and args.end_at and args.end_at <= args.start_at:
        raise InvalidSchedule("--end-at must be after --start-at", field="end_at")
    window = Schedule(timetable, args.tz, start_at=args.start_at, end_at=args.end_at)
    after = args.after or datetime.now(UTC)
    fires = _take(window, after, args.count)
    if args.json:
        print_json([_iso_utc(f.at) for f in fires])
        return 0
    if timetable.expanded != timetable.cron:
        print(f"# {args.cron} = {timetable.expanded}")
    if not fires:
        print("no fire after", _iso_utc(after))
    for fire in fires:
        line = f"{fire.local.isoformat()}  {_iso_utc(fire.at)}"
        if fire.note:
            scheduled = fire.scheduled_local.isoformat()
            line += "  # " + FIRE_NOTES[fire.note].format(scheduled=scheduled)
        print(line)
    return 0


def _take(timetable: Schedule, after: datetime, count: int) -> list[Fire]:
    fires: list[Fire] = []
    for fire in timetable.fires_after(after):
        if len(fires) >= count:
            break
        fires.append(fire)
    return fires


def _iso_utc(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _instant(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO-8601 instant like 2026-10-31T12:00:00Z, got {text!r}"
        ) from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} has no UTC offset; add Z or +HH:MM so the instant is exact"
        )
    return value

