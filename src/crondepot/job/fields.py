"""The job document's fields: one table that the validator (``spec.py``) takes its rules
from and the JSON schema (``schema.py``, published in the OpenAPI document) is generated
from, so that the two cannot disagree.

Each entry says what a field is (its JSON path, type, bounds, pattern, choices, default and
description). The checks JSON Schema cannot spell — a cron expression that parses, a known
time zone, a URL a worker can call, the payload's stored size, text PostgreSQL can store —
stay in code and are named in the descriptions. Pure data: no I/O, no imports of the API.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Any

from crondepot.base.vocab import CALENDAR_NAME, LIMIT_NAME, OVERLAPS, PRIORITIES
from crondepot.timetable.interval import EVERY as EVERY_TEXT
from crondepot.timetable.several import MAX_CRONS as MAX_CRONS

# The whitespace ``str.strip`` removes, spelled as a character class: a text field must hold
# one character outside it ("non-blank"), in Python and in the published JSON Schema alike
# (ECMA-262's ``\s`` is another set). Every such character is below U+3001 (a unit test
# checks the whole range), so the scan stops there.
_SPACE = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())


def char_class(chars: str, negate: bool = False) -> str:
    """A regex class of ``chars`` as runs, ``\\uXXXX``-escaped (valid in Python and ECMA)."""
    points = sorted(ord(c) for c in chars)
    runs: list[tuple[int, int]] = []
    for point in points:
        if runs and runs[-1][1] == point - 1:
            runs[-1] = (runs[-1][0], point)
        else:
            runs.append((point, point))
    body = "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in runs)
    return f"[{'^' if negate else ''}{body}]"


NOT_SPACE = char_class(_SPACE, negate=True)
NON_BLANK = re.compile(f"(?s).*{NOT_SPACE}.*")
# Neither a space nor a NUL: a non-blank field's schema says both rules in one pattern.
NOT_SPACE_NOR_NUL = char_class(_SPACE + "\0", negate=True)

# The payload's size as the jobs table's CHECK measures it, octet_length(payload::text):
# the bytes of PostgreSQL's jsonb text output (jsontext.stored_size), not of compact JSON.
MAX_PAYLOAD_BYTES = 16 * 1024
# Arrays and objects nest at most this many levels in the payload (the payload object is the
# first) and in any other field. Real payloads nest a handful of levels; 32 leaves room for
# any of them while staying far below what every writer of the payload handles: orjson
# writes at most 254 levels, the standard library's json recurses once per level (about
# 1,000 before RecursionError), and a handler gets the value as it was given.
MAX_PAYLOAD_DEPTH = 32

MISSING: Any = object()   # no default: the field is required, or absent means "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    """One field of the job document or of an object inside it."""

    path: str                      # JSON path, as errors name it: "misfire.until"
    type: str                      # JSON Schema type: string, integer, number, boolean, object
    description: str = ""
    default: Any = MISSING
    nullable: bool = False         # null means "the default" (or none)
    low: float | None = None       # minimum (integer, number)
    high: float | None = None      # maximum
    above: float | None = None     # exclusive minimum (number)
    min_length: int | None = None
    max_length: int | None = None
    non_blank: bool = False        # at least one character that is not whitespace
    pattern: re.Pattern[str] | None = None     # matched whole (fullmatch)
    format: str | None = None      # JSON Schema format ("date-time"), checked in code
    # the rules checked in code that a published pattern can state, made with the schema
    schema_pattern: Callable[[], str] | None = None
    choices: tuple[str, ...] = ()
    deprecated: bool = False       # still read; another field says the same (ALIASES)
    # the last part of the path ("until"), read for every field of every document: computed
    # once, not per read
    name: str = _field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.path.rsplit(".", 1)[-1])


@dataclass(frozen=True, slots=True, kw_only=True)
class Variant:
    """One shape of an object chosen by a tag (``target.type``, ``misfire.policy``)."""

    tag: str                       # the tag's value: "http", "skip_after"
    title: str
    fields: tuple[Field, ...]      # besides the tag
    required: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Tagged:
    """An object whose shape its tag field chooses."""

    field: Field                   # the object itself: "target"
    tag: str                       # the tag's name: "type"
    variants: tuple[Variant, ...]

    def variant(self, tag: Any) -> Variant | None:
        return next((v for v in self.variants if v.tag == tag), None)


# --- names a job refers to, matched whole -------------------------------------------------

# A rate limit's and a handler's names are vocabulary the grants share (base/vocab.py).
# Labels, Kubernetes-like: a filter spells one as key=value, so neither has '='.
LABEL_KEY = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_./-]{0,61}[A-Za-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?")
MAX_LABELS = 16
LOCAL_TIME = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")   # ASCII digits only

# --- the document -------------------------------------------------------------------------

KEY = Field(path="key", type="string", nullable=True, max_length=200, non_blank=True,
            description="unique per tenant; the same key again = the same job (idempotent "
                        "creation); surrounding whitespace is dropped")
CRON = Field(path="cron", type="string", max_length=200, non_blank=True,
             description="five fields (minute hour day-of-month month day-of-week), names, "
                         "ranges, steps (at most the field's range), aliases like @daily, H "
                         "for a stable per-job value; in day-of-month L (last day), L-n (n "
                         "days before it), nW (the weekday nearest day n), LW (last "
                         "weekday); in day-of-week D#n (the n-th weekday, 1#1 = first "
                         "Monday), nL (the last one, 5L = last Friday); or a list of 1 to "
                         f"{MAX_CRONS} such expressions read in the one tz, whose fires are "
                         "the union (two on one instant are one run); give exactly one of "
                         "cron, every and at")
TZ = Field(path="tz", type="string", max_length=64, non_blank=True,
           description="the IANA zone the cron is read in, like Asia/Kolkata")
PRIORITY = Field(path="priority", type="string", choices=PRIORITIES,
                 default="normal", description="urgent runs are never spread")
TARGET = Field(path="target", type="object",
               description="what a run calls: an http webhook or a python handler")
PAYLOAD = Field(path="payload", type="object", default={},
                description=f"JSON sent with every run: at most {MAX_PAYLOAD_BYTES // 1024} "
                            "KiB as PostgreSQL stores it (its jsonb text), arrays and "
                            f"objects nested at most {MAX_PAYLOAD_DEPTH} levels, no NUL or "
                            "lone surrogate in any string")
MISFIRE = Field(path="misfire", type="object", nullable=True,
                description="what a run that starts late does (default run_late)")
CATCHUP = Field(path="catchup", type="string", choices=("all", "latest"), default="all",
                description="after an outage: every missed run (up to max_catchup), or "
                            "only the latest (the others recorded skipped)")
MAX_CATCHUP = Field(path="max_catchup", type="integer", low=1, high=100_000, default=1000)
SPREAD = Field(path="spread", type="object", nullable=True,
               description="a stable delay of sha256(key) mod seconds after each nominal "
                           "time (thundering herd); ignored for urgent jobs")
MAX_ATTEMPTS = Field(path="max_attempts", type="integer", low=1, high=100, deprecated=True,
                     description="deprecated: the same number as retry.max_attempts (give "
                                 "one of the two, not both)")
RETRY = Field(path="retry", type="object", nullable=True,
              description="how a temporary failure is retried: at most max_attempts "
                          "attempts; attempt n failed, the next waits a random time between "
                          "0 and min(cap_s, base_s·2^(n-1)) seconds (full jitter), or the "
                          "target's Retry-After when later (at most an hour); a run's misfire "
                          "deadline still ends it; null: the default curve (max_attempts 6, "
                          "base_s 30, cap_s 600)")
LEASE_SECONDS = Field(path="lease_seconds", type="integer", low=5, high=43_200, default=60)
RATE_LIMIT = Field(path="rate_limit", type="string", nullable=True, pattern=LIMIT_NAME,
                   description="a rate-limit bucket granted to the tenant (lowercase "
                               "letters, digits, '.', '_' or '-')")
ACTIVE = Field(path="active", type="boolean", default=True)
ALERT_AFTER_FAILURES = Field(
    path="alert_after_failures", type="integer", nullable=True, low=1, high=10_000,
    description="the job is unhealthy (GET /v1/jobs?unhealthy=true, the gauge "
                "crondepot_jobs_unhealthy) once this many of its latest fires in a row did "
                "not succeed; null: the tenant's default (3 unless set)")

PAUSE_AFTER_FAILURES = Field(
    path="pause_after_failures", type="integer", nullable=True, low=1, high=10_000,
    description="the job pauses itself once this many of its latest fires in a row did not "
                "succeed (the count alert_after_failures reads), within a few seconds, with "
                "a note saying so; its resume starts the count again; null: never")

CALENDAR = Field(path="calendar", type="object", nullable=True,
                 description="an exclusion calendar of the tenant's (crondepot calendars set): "
                             "a fire whose local date is in it is skipped (reason calendar) or "
                             "moved to the nearest business day after or before, at the same "
                             "local time, keeping its run id; null: none")
OVERLAP = Field(
    path="overlap", type="string", choices=OVERLAPS, default="allow",
    description="what a fire does while a run of this job is running: allow (it runs too), "
                "skip (written skipped, reason overlap), buffer_one (it waits for the "
                "running one; at most one waits, a further one is skipped), replace (as "
                "buffer_one, and the running run gives way: an async handler cancelled, an "
                "HTTP call abandoned, recorded skipped, reason replaced; a sync handler "
                "cannot be cancelled and runs to its end)")

LABELS = Field(path="labels", type="object", default={}, nullable=True,
               description="names for filters and bulk actions, like {\"bank\": \"42\"}: "
                           "at most 16; a key is 1-63 letters, digits, '_', '.', '-' or '/', "
                           "beginning and ending with a letter or digit; a value is the same "
                           "without '/', or empty (as Kubernetes labels); null: none")

# Schedules beyond cron (docs/schedules.md). Instants are RFC 3339 with an offset, checked in code
# (spec.py _instant); the schema says "format": "date-time" and a length bound.
AT = Field(path="at", type="string", format="date-time", max_length=64,
           description="instead of cron: one run at this instant (RFC 3339 with an offset, "
                       "like 2026-12-05T09:00:00+05:30); the job then ends "
                       "(ended_reason: completed)")
START_AT = Field(path="start_at", type="string", format="date-time", max_length=64,
                 nullable=True,
                 description="no fire before this instant (RFC 3339 with an offset)")
END_AT = Field(path="end_at", type="string", format="date-time", max_length=64,
               nullable=True,
               description="no fire after this instant (RFC 3339 with an offset, after "
                           "start_at); the job ends after its last fire in the window "
                           "(ended_reason: end_at)")
EVERY = Field(path="every", type="string", pattern=EVERY_TEXT,
              description="instead of cron: an interval, a whole number and a unit s, m, h "
                          "or d (\"90s\", \"15m\", \"4h\", \"1d\"), at least 1 s, at most "
                          "3650d; fires at anchor + k·every, absolute time: clock changes "
                          "(DST) move no fire")
ANCHOR = Field(path="anchor", type="string", format="date-time", max_length=64, nullable=True,
               description="with every: an instant the interval's fires are counted from "
                           "(RFC 3339 with an offset; before or after now); default: the "
                           "job's creation instant (whole seconds)")
MAX_RUNS = Field(path="max_runs", type="integer", low=1, high=1_000_000, nullable=True,
                 description="the job ends after this many fires (ended_reason: max_runs); "
                             "every fire counts, a skipped one too (misfire, catch-up "
                             "bound, paused), a manual trigger does not")

DELIVERY_WINDOW = Field(
    path="delivery_window", type="object", nullable=True,
    description="the local hours (in tz) a run may reach its target: {\"from\": \"09:00\", "
                "\"to\": \"21:00\", \"days\": \"mon-sat\", \"outside\": \"defer\"}; a fire "
                "due outside is deferred to the next opening (its run id stays the nominal "
                "time) or, with outside skip, recorded skipped (delivery_window); from after "
                "to is an overnight window, days name the day it opens (default every day); "
                "the string \"none\": no window, whatever the tenant's default; null: the "
                "tenant's default window, if it has one")

DOCUMENT: tuple[Field, ...] = (KEY, CRON, TZ, PRIORITY, TARGET, PAYLOAD, MISFIRE, CATCHUP,
                               MAX_CATCHUP, SPREAD, MAX_ATTEMPTS, RETRY, LEASE_SECONDS,
                               RATE_LIMIT, ACTIVE, AT, START_AT, END_AT, MAX_RUNS, LABELS,
                               ALERT_AFTER_FAILURES, PAUSE_AFTER_FAILURES, EVERY, ANCHOR,
                               CALENDAR, OVERLAP, DELIVERY_WINDOW)
REQUIRED: tuple[str, ...] = ("tz", "target")
# Exactly one of these names the timetable (the schema says it with oneOf).
ONE_OF: tuple[str, ...] = ("cron", "every", "at")
# At most one of these may be given (max_attempts is the deprecated spelling of
# retry.max_attempts): the schema says it with "not".
ALIASES: tuple[tuple[str, str], ...] = (("max_attempts", "retry.max_attempts"),)
# Fields a PATCH may not change (cancel with DELETE; a key names the job for good).
NOT_PATCHABLE: tuple[str, ...] = ("key", "active")

# --- target ------------------------------------------------------------------------------

# Each kind's fields are its module's (job/targets/): TARGETS there is the Tagged of them.

# --- misfire ------------------------------------------------------------------------------

MISFIRE_SECONDS = Field(path="misfire.seconds", type="integer", low=1, high=31 * 86400,
                        description="how late a run may still start")
UNTIL = Field(path="misfire.until", type="string", pattern=LOCAL_TIME,
              description="local HH:MM (00:00-23:59): a late run starts only until then on "
                          "its local day")
MISFIRES = Tagged(field=MISFIRE, tag="policy", variants=(
    Variant(tag="run_late", title="MisfireRunLate", fields=()),
    Variant(tag="skip_after", title="MisfireSkipAfter", fields=(MISFIRE_SECONDS,),
            required=("seconds",)),
    Variant(tag="skip_after_local_time", title="MisfireSkipAfterLocalTime", fields=(UNTIL,),
            required=("until",)),
))

# --- spread -------------------------------------------------------------------------------

SPREAD_SECONDS = Field(path="spread.seconds", type="integer", low=0, high=86_400, default=0)
SPREAD_KEY = Field(path="spread.key", type="string", nullable=True, min_length=1,
                   max_length=200, description="what the delay hashes (default: the job's "
                                               "key, else its id)")
SPREAD_FIELDS: tuple[Field, ...] = (SPREAD_SECONDS, SPREAD_KEY)

# --- retry -------------------------------------------------------------------------------

# Today's curve is the default (queue/retry.py): 6 attempts, waits up to 30, 60, … 600 s.
RETRY_MAX_ATTEMPTS = Field(path="retry.max_attempts", type="integer", low=1, high=100,
                           default=6, description="attempts in all, the first included; the "
                                                  "last failure goes to the dead letter")
RETRY_BASE_S = Field(path="retry.base_s", type="number", above=0, high=3600, default=30,
                     description="the longest wait after the first failed attempt, doubled "
                                 "after each further one")
RETRY_CAP_S = Field(path="retry.cap_s", type="number", above=0, high=86_400, default=600,
                    description="the longest wait after any attempt; at least base_s "
                                "(checked in code)")
RETRY_FIELDS: tuple[Field, ...] = (RETRY_MAX_ATTEMPTS, RETRY_BASE_S, RETRY_CAP_S)

# --- calendar ----------------------------------------------------------------------------

CALENDAR_EXCLUDE = Field(path="calendar.exclude", type="string", pattern=CALENDAR_NAME,
                         max_length=63,
                         description="the name of one of the tenant's calendars (a slug like "
                                     "in-bank-holidays); it must exist")
CALENDAR_ON_EXCLUDED = Field(
    path="calendar.on_excluded", type="string",
    choices=("skip", "next_business_day", "previous_business_day"), default="skip",
    description="a fire on a calendar date: skipped, or due on the nearest business day "
                "after (or before) it at the same local time; only calendar dates move a fire")
_DAY = "(mon|tue|wed|thu|fri|sat|sun)"
BUSINESS_DAYS = re.compile(f"{_DAY}(-{_DAY})?(,{_DAY}(-{_DAY})?)*")
CALENDAR_BUSINESS_DAYS = Field(
    path="calendar.business_days", type="string", max_length=64, default="mon-fri",
    pattern=BUSINESS_DAYS,
    description="the weekdays a fire may move to: a range (mon-fri, sun-thu) or a comma list "
                "(mon,wed,fri) of mon tue wed thu fri sat sun (checked in code)")
CALENDAR_FIELDS: tuple[Field, ...] = (CALENDAR_EXCLUDE, CALENDAR_ON_EXCLUDED,
                                      CALENDAR_BUSINESS_DAYS)

# --- delivery window ----------------------------------------------------------------------

# Read by timetable/delivery.py parse_window, which names the same members and rules.
WINDOW_FROM = Field(path="delivery_window.from", type="string", pattern=LOCAL_TIME,
                    description="local HH:MM the window opens")
WINDOW_TO = Field(path="delivery_window.to", type="string", pattern=LOCAL_TIME,
                  description="local HH:MM the window closes (not equal to from; before "
                              "from: it closes the next day)")
WINDOW_DAYS = Field(path="delivery_window.days", type="string", max_length=64,
                    pattern=BUSINESS_DAYS,   # the same day names and ranges
                    description="the days the window opens: names and ranges, like mon-sat "
                                "or mon,wed,fri (default every day)")
WINDOW_OUTSIDE = Field(path="delivery_window.outside", type="string",
                       choices=("defer", "skip"), default="defer",
                       description="a fire due outside the window: deferred to its next "
                                   "opening, or recorded skipped")
WINDOW_FIELDS: tuple[Field, ...] = (WINDOW_FROM, WINDOW_TO, WINDOW_DAYS, WINDOW_OUTSIDE)
