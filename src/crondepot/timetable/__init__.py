"""crondepot's timetable: cron parsing and ``H`` hashing, time zones and DST, spread, run ids.

Everything here is pure: no clock, no database, no I/O beyond reading zone data once.
The modules behind this surface:

    cron.py    the expression: fields, aliases, H, the naive wall-clock minutes it names
    zone.py    the zone's clock: once / repeated / skipped local times, change instants
    dst.py     the firing rules at clock changes (Vixie/cronie) and the Fire record
    table.py   Timetable and next_fires, the facade the scheduler and the API call
    window.py  Schedule: a job's timetable or ``at`` instant inside start_at..end_at
    spread.py  the stable per-job spread offset
    runid.py   run ids from the nominal instant
"""

from crondepot.timetable.cron import expand_hash, uses_hash
from crondepot.timetable.dst import FIRE_NOTES, Fire
from crondepot.timetable.runid import run_id
from crondepot.timetable.spread import spread_offset
from crondepot.timetable.table import Timetable, next_fires
from crondepot.timetable.window import EndReason, Schedule, schedule
from crondepot.timetable.zone import validate_zone

__all__ = ["FIRE_NOTES", "EndReason", "Fire", "Schedule", "Timetable", "expand_hash",
           "next_fires", "run_id",
           "schedule", "spread_offset", "uses_hash", "validate_zone"]
