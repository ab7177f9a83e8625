"""crondepot's timetable: cron parsing and ``H`` hashing, time zones and DST, spread, run ids.

Everything here is pure: no clock, no database, no I/O beyond reading zone data once.
The modules behind this surface:

    cron.py    the expression: fields, aliases, H, the naive wall-clock minutes it names
    zone.py    the zone's clock: once / repeated / skipped local times, change instants
    dst.py     the firing rules at clock changes (Vixie/cronie) and the Fire record
    table.py   Timetable and next_fires, the facade the scheduler and the API call
    interval.py  Interval: every N seconds from an anchor instant (absolute time, no DST)
    several.py   Several: the union of several crons on one zone, one fire per instant
    window.py  Schedule: a job's timetable or ``at`` instant inside start_at..end_at, and
               timetable_of, the reader of every stored timetable text
    spread.py  the stable per-job spread offset
    runid.py   run ids from the nominal instant
"""

from crondepot.timetable.cron import uses_hash
from crondepot.timetable.dst import FIRE_NOTES, Fire
from crondepot.timetable.interval import (
    MAX_EVERY_SECONDS,
    Interval,
    every_seconds,
    every_text,
    interval_text,
    is_interval_text,
)
from crondepot.timetable.runid import run_id
from crondepot.timetable.several import MAX_CRONS, Several, expand_hash, several_text
from crondepot.timetable.spread import spread_offset
from crondepot.timetable.table import Timetable, next_fires
from crondepot.timetable.window import AnyTimetable, EndReason, Schedule, schedule, timetable_of
from crondepot.timetable.zone import validate_zone

__all__ = ["FIRE_NOTES", "MAX_CRONS", "MAX_EVERY_SECONDS", "AnyTimetable", "EndReason", "Fire",
           "Interval",
           "Schedule", "Several", "Timetable", "every_seconds", "every_text", "expand_hash",
           "interval_text", "is_interval_text", "next_fires", "run_id", "schedule",
           "several_text", "spread_offset", "timetable_of", "uses_hash", "validate_zone"]
