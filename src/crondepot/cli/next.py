"""``crondepot next CRON... | --every N [--anchor T]  --tz ZONE [--start-at T] [--end-at T]
[--calendar NAME --tenant T] [--window HH:MM-HH:MM]``: preview a timetable (``L`` and ``D#n``
included; several crons as one job's list; an interval), inside a job's window if given,
with the fires DST moved or merged, those a holiday calendar skips or moves, and where a
delivery window defers or skips each fire."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from crondepot.base.errors import InvalidSchedule
from crondepot.cli.shared.options import int_in
from crondepot.cli.shared.output import print_json
from crondepot.timetable import (
    FIRE_NOTES,
    MAX_CRONS,
    AnyTimetable,
    Fire,
    Interval,
    Schedule,
    Several,
    Timetable,
    every_seconds,
    every_text,
)
from crondepot.timetable.delivery import DeliveryWindow, InvalidWindow, parse_window

# Kept importable from here: the job preview (cli/jobs) reads it by this name.
__all__ = ["FIRE_NOTES", "register", "run"]


def register(commands: Any) -> None:
    parser = commands.add_parser("next", help="show the next fire times of a cron expression, "
                                              "of several, or of an interval")
    parser.add_argument("cron", nargs="*", metavar="CRON",
                        help='five fields, e.g. "30 1 * * *", "0 9 L * *" (last day '
                             'of the month), "0 9 LW * *" (last weekday), "0 9 L-3 '
                             '* *" (3 days before the last day), "0 9 15W * *" '
                             '(weekday nearest the 15th), "0 9 * * 1#1" (first '
                             'Monday), "0 9 * * 5L" (last Friday), or an alias like '
                             '@daily; several (as a job\'s list of crons): the union of '
                             'their fires, one per instant')
    parser.add_argument("--every", metavar="INTERVAL",
                        help='instead of CRON: an interval like 90s, 15m, 4h or 1d, fired at '
                             'the anchor plus whole multiples of it (absolute time)')
    parser.add_argument("--anchor", type=_instant, default=None,
                        help="with --every: the ISO-8601 instant the interval counts from "
                             "(a job's anchor; default: --after, else now, in whole seconds)")
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
    parser.add_argument("--window", metavar="HH:MM-HH:MM", default=None,
                        help="a delivery window in --tz, like 09:00-21:00: show when each "
                             "fire is sent (deferred to the opening, or skipped)")
    parser.add_argument("--window-days", metavar="DAYS", default=None,
                        help="the days the window opens, like mon-sat (default every day)")
    parser.add_argument("--outside", choices=("defer", "skip"), default="defer",
                        help="a fire due outside the window: defer (default) or skip")
    parser.add_argument("--json", action="store_true",
                        help="print a JSON list of ISO-8601 UTC instants (with --calendar, "
                             "objects: at, due_at, calendar; with --window: at, due_at, "
                             "skip_reason)")
    from crondepot.cli.calendars import add_preview_options
    add_preview_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    after = args.after or datetime.now(UTC)
    timetable = _timetable(args, after)
    if args.start_at and args.end_at and args.end_at <= args.start_at:
        raise InvalidSchedule("--end-at must be after --start-at", field="end_at")
    window = Schedule(timetable, args.tz, start_at=args.start_at, end_at=args.end_at)
    fires = _take(window, after, args.count)
    delivery = _delivery_window(args)
    if args.calendar is not None:
        if delivery is not None:    # each preview is one rule's; a job applies both
            raise InvalidSchedule("preview --calendar or --window, one at a time",
                                  field="delivery_window")
        return _with_calendar(args, fires)
    if args.json:
        if delivery is None:
            print_json([_iso_utc(f.at) for f in fires])
        else:
            print_json([_sent(f, delivery, args.tz) for f in fires])
        return 0
    if isinstance(timetable, Interval):
        print(f"# every {every_text(timetable.every_s)} from {_iso_utc(timetable.anchor)}"
              " (absolute time: clock changes move no fire)")
    elif timetable.expanded != " | ".join(args.cron):
        print(f"# {' | '.join(args.cron)} = {timetable.expanded}")
    if not fires:
        print("no fire after", _iso_utc(after))
    for fire in fires:
        line = f"{fire.local.isoformat()}  {_iso_utc(fire.at)}"
        if fire.note:
            scheduled = fire.scheduled_local.isoformat()
            line += "  # " + FIRE_NOTES[fire.note].format(scheduled=scheduled)
        if delivery is not None:
            line += _window_note(fire, delivery, args.tz)
        print(line)
    return 0


def _timetable(args: argparse.Namespace, after: datetime) -> AnyTimetable:
    """The CRON arguments (one, or several as a job's list), or --every with its anchor."""
    if args.every is not None and args.cron:
        raise InvalidSchedule("give CRON or --every, not both", field="every")
    if args.anchor is not None and args.every is None:
        raise InvalidSchedule("--anchor goes with --every", field="anchor")
    if args.every is not None:
        anchor = (args.anchor or after).astimezone(UTC)
        if args.anchor is None:
            anchor = anchor.replace(microsecond=0)
        return Interval(every_seconds(args.every), anchor, args.tz)
    if not args.cron:
        raise InvalidSchedule("give a CRON expression (or several), or --every", field="cron")
    if len(args.cron) > MAX_CRONS:
        raise InvalidSchedule(f"at most {MAX_CRONS} cron expressions, got {len(args.cron)}",
                              field="cron")
    tables = [Timetable(cron, args.tz, hash_key=args.key) for cron in args.cron]
    return tables[0] if len(tables) == 1 else Several(tables)


def _with_calendar(args: argparse.Namespace, fires: list[Fire]) -> int:
    """The preview with what ``--calendar`` does to each fire (docs/schedules.md)."""
    from crondepot.cli.calendars import preview_note, preview_rule
    rule = preview_rule(args)
    assert rule is not None
    notes = [preview_note(rule, f.at) for f in fires]
    if args.json:
        print_json([{"at": _iso_utc(f.at), "due_at": due and _iso_utc(due),
                     "calendar": None if text is None else "skipped" if due is None
                     else "moved"} for f, (text, due) in zip(fires, notes, strict=True)])
        return 0
    for fire, (text, _) in zip(fires, notes, strict=True):
        print(f"{fire.local.isoformat()}  {_iso_utc(fire.at)}" + (f"  # {text}" if text else ""))
    return 0


def _delivery_window(args: argparse.Namespace) -> DeliveryWindow | None:
    if args.window is None:
        if args.window_days is not None:
            raise InvalidSchedule("--window-days needs --window", field="delivery_window")
        return None
    start, _, end = args.window.partition("-")
    doc = {"from": start, "to": end, "outside": args.outside}
    if args.window_days is not None:
        doc["days"] = args.window_days
    try:
        return parse_window(doc, "window")
    except InvalidWindow as exc:
        message = str(exc).replace("window.days", "--window-days").replace(
            "window.from", "--window's from").replace("window.to", "--window's to")
        raise InvalidSchedule(message, field="delivery_window") from None


def _sent(fire: Fire, window: DeliveryWindow, tz: str) -> dict[str, str | None]:
    """A fire as the plan writes it against ``window`` (spread aside)."""
    opening = window.opening(fire.at, tz)
    skipped = opening is not None and window.outside == "skip"
    return {"at": _iso_utc(fire.at),
            "due_at": _iso_utc(opening or fire.at) if not skipped else None,
            "skip_reason": "delivery_window" if skipped else None}


def _window_note(fire: Fire, window: DeliveryWindow, tz: str) -> str:
    opening = window.opening(fire.at, tz)
    if opening is None:
        return ""
    if window.outside == "skip":
        return "  # delivery window: skipped (delivery_window)"
    local = opening.astimezone(ZoneInfo(tz)).isoformat()
    return f"  # delivery window: deferred to {local}"


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

