"""Cron expressions: parsing, aliases, ``H`` hashing, and the local wall-clock times they match.

This module owns the *text* of a schedule and the naive wall-clock minutes it names. It knows
nothing about time zones, instants or DST; ``zone.py`` and ``dst.py`` turn its naive
minutes into UTC instants. It must never touch the clock or a database.

Grammar (five fields: minute hour day-of-month month day-of-week), each field a comma list of:

    *   */n   a   a-b   a-b/n   a/n (from a to the end of the field, every n)
    H   H(a-b)   H/n   H(a-b)/n     (a stable per-job value, see below)

Months take ``jan``–``dec`` and days of the week ``sun``–``sat``, in any case; ``*`` in a
list (``*,5``) is the whole field, as in cronie; day-of-week is 0–7 with 0 and 7 both
Sunday. A step is at most the field's range (``*/60`` in minutes; ``*/61`` would name one
value, so it is refused). The aliases are ``@yearly`` (``@annually``), ``@monthly``,
``@weekly``, ``@daily`` (``@midnight``) and ``@hourly``, with their Vixie meanings. Ranges
never wrap (``fri-mon`` is an error: write ``fri-7,1`` or ``0,1,5,6``). Quartz's day
items are taken, each as a list item of its own (``15,L``, ``1W,15W,LW``), with Quartz's
meanings (CronExpression, 2.5) but cron's day numbers (Sunday 0 or 7):

    day-of-month  L     the month's last day
                  L-n   n days before it, n from 1 to 30 (none in a month too short for it)
                  nW    the Monday–Friday nearest day n, never in another month: a Saturday
                        1st moves to Monday the 3rd, a Sunday last day back to the Friday;
                        none in a month without day n (31W: none in April)
                  LW    the month's last Monday–Friday
    day-of-week   D#n   the n-th such weekday, n from 1 to 5 (1#1 the first Monday)
                  nL    the month's last such weekday (5L the last Friday)

Other extensions (``L`` alone in day-of-week, ``L-nW``, ``?``, ``R``, a seconds or year
field) and these items in another field, in a range or with a step are rejected with a
message naming the field, so nothing is accepted that the docs do not describe.

Choices worth knowing:

* **Day OR rule, as cronie reads it.** When day-of-month and day-of-week are both
  restricted, a day matches if *either* matches (POSIX, Vixie, cronie); otherwise a day
  must match both (a field that is unrestricted matches every day it allows). A field is
  *unrestricted* when its text begins with ``*``: cronie's entry.c sets ``DOM_STAR`` /
  ``DOW_STAR`` from the field's first character alone, and cron.c's find_jobs ANDs the two
  day sets when either flag is set. So ``0 0 */2 * 1`` fires on odd-numbered days that are
  Mondays (not on odd days *or* Mondays, as croniter's default would), while ``1-31`` is a
  restriction (``0 0 1-31 * mon`` fires every day).
* **H** (Jenkins / Google cron) expands to plain numbers before anything else reads the
  expression. Its value is ``sha256(f"{hash_key}\\x00{field}")``, stable across processes
  and releases (never Python's ``hash()``). ``H`` in day-of-month ranges over 1–28 so the
  job fires every month. ``hash_key=None`` means the empty key: crondepot always passes the
  job's key or id, and an API caller without one still gets a deterministic answer.
* **Never-firing expressions** (``0 0 30 2 *``) are rejected up front from the field sets,
  so no search can spin looking for a date that does not exist.
* **One parse, checked against two other implementations.** Each field is read once, by
  this module: the same pass that gives a message naming a bad field yields its value set.
  croniter is not used at runtime. Its field expansion, which this module once took as the
  sets, differs from cronie in ways that fire at wrong times: an equal range (``9-9``) is the
  whole field, and in day-of-week ``a/n`` stops at 6 where cronie runs to 7 (``1/1`` has no
  Sunday) and ``7/1`` is every day. The property tests compare this module with cronsim
  (another implementation of cron's fields and day rule, cronie's reading) and with
  croniter's own iteration on explicit lists, neither of which is this code path. Iteration
  walks the cached field sets instead of building a croniter object per call: the tick
  computes a fire per due job, and a croniter object costs more than that whole step.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from hashlib import sha256

from crondepot.base.errors import InvalidSchedule

__all__ = ["CronSpec", "parse_cron", "uses_hash"]


@dataclass(frozen=True, slots=True)
class _Field:
    """What one of the five positions accepts."""

    name: str
    low: int
    high: int
    star_high: int  # where ``*`` ends (day-of-week: 6, since 7 is Sunday again)
    hash_low: int
    hash_high: int  # day-of-month: 28, so that ``H`` fires in every month
    names: Mapping[str, int]

    def describe(self) -> str:
        spelled = f"{self.low}–{self.high}"
        if self.names:
            first, *_, last = self.names
            spelled += f" or {first}–{last}"
        return spelled


_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
        start=1,
    )
}
_WEEKDAY_NAMES = {
    name: number for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))
}

_MINUTE = _Field("minute", 0, 59, 59, 0, 59, {})
_HOUR = _Field("hour", 0, 23, 23, 0, 23, {})
_DAY = _Field("day-of-month", 1, 31, 31, 1, 28, {})
_MONTH = _Field("month", 1, 12, 12, 1, 12, _MONTH_NAMES)
_WEEKDAY = _Field("day-of-week", 0, 7, 6, 0, 6, _WEEKDAY_NAMES)
_FIELDS = (_MINUTE, _HOUR, _DAY, _MONTH, _WEEKDAY)
_LAYOUT = "minute hour day-of-month month day-of-week"

_ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# Longest month lengths, February counted as 29: a day that fits nowhere here never comes.
_MAX_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_MONTH_TITLES = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip

_NUMBER = re.compile(r"[0-9]+")
_HASH = re.compile(r"h(?:\(([0-9]+)-([0-9]+)\))?(?:/([0-9]+))?", re.IGNORECASE)
_NTH_WEEKDAY = re.compile(r"([0-9a-z]+)#([0-9]+)", re.IGNORECASE)
# The Quartz day items crondepot reads (docs/schedules.md, "Cron extensions"):
_BEFORE_LAST = re.compile(r"l-([0-9]+)", re.IGNORECASE)           # L-n, day-of-month
_NEAR_WEEKDAY = re.compile(r"([0-9]+)w", re.IGNORECASE)           # nW, day-of-month
_LAST_OF_WEEKDAY = re.compile(r"([0-9]+|[a-z]{3})l", re.IGNORECASE)   # nL, day-of-week
_MAX_BEFORE_LAST = 30   # L-30 is the 1st of a 31-day month, as in Quartz (MAX_LAST_DAY_OFFSET)
# Shapes that look like those items but are not read, for a refusal that names them.
_LAST_LIKE = re.compile(r"l|lw|[0-9a-z]*l|l[0-9]+|l-[0-9]*w?|l-.*", re.IGNORECASE)
_WEEKDAY_NEAR = re.compile(r"[0-9]+w|w[0-9]+|w|l-?[0-9]*w", re.IGNORECASE)
_DAY_ITEM_LIKE = re.compile(r"[lw]|lw|[0-9]+[lw]|[lw][0-9]+|l-[0-9]+", re.IGNORECASE)
_RANDOM = re.compile(r"r(\([0-9]+-[0-9]+\))?(/[0-9]+)?", re.IGNORECASE)
_SPACES = re.compile(r"[ \t\r\n\f\v]+")

# A validated expression fires at least once every 40 years: 29 February on a given weekday
# (cronie's AND of the day fields, as in "0 0 29 2 */7") recurs after 12, 28 or 40 years.
# The day search gives up after 41 so that it is bounded in any case, and the parser
# refuses an AND of the day fields that finds no day in that span from 2000 on.
_SEARCH_YEARS = 41
_ONE_DAY = timedelta(days=1)


def _error(field: _Field, message: str) -> InvalidSchedule:
    return InvalidSchedule(f"{field.name} field: {message}", field=field.name)


# --- H --------------------------------------------------------------------------------


def _hash_value(hash_key: str, field: _Field) -> int:
    digest = sha256(f"{hash_key}\x00{field.name}".encode()).digest()
    return int.from_bytes(digest, "big")


def _expand_hash_item(item: str, field: _Field, hash_key: str) -> str:
    """``H``, ``H(a-b)``, ``H/n``, ``H(a-b)/n`` → the plain item it stands for."""
    match = _HASH.fullmatch(item)
    if match is None:
        raise _error(field, f"'{item}' is not valid H syntax; expected H, H(a-b), H/n or H(a-b)/n")
    low_text, high_text, step_text = match.groups()
    low, high = field.hash_low, field.hash_high
    if low_text is not None and high_text is not None:
        low, high = _checked_digits(low_text, field), _checked_digits(high_text, field)
        if low > high:
            raise _error(field, f"range {low}-{high} in '{item}' is reversed")
    value = _hash_value(hash_key, field)
    if step_text is None:
        return str(low + value % (high - low + 1))
    step = _step(step_text, field)
    start = low + value % min(step, high - low + 1)
    if start + step > high:
        return str(start)  # one value: say so, rather than a one-value range
    return f"{start}-{high}/{step}"


def _expand_hash(text: str, field: _Field, hash_key: str) -> str:
    if "h" not in text.lower():
        return text
    items = text.split(",")
    return ",".join(
        _expand_hash_item(item, field, hash_key) if item[:1] in ("h", "H") else item
        for item in items
    )


# --- plain fields -----------------------------------------------------------------------


def _checked(value: int, field: _Field) -> int:
    if not field.low <= value <= field.high:
        raise _error(field, f"{value} is out of range {field.low}–{field.high}")
    return value


def _number(text: str) -> int | None:
    """Digits as an int, or None for more digits than any cron value or step has: ``int``
    refuses over 4,300 digits with a bare ValueError, and needs none of them to say no."""
    digits = text.lstrip("0")
    return int(digits or "0") if len(digits) <= 4 else None


def _checked_digits(text: str, field: _Field) -> int:
    value = _number(text)
    if value is None:
        raise _error(field, f"{_shown(text)} is out of range {field.low}–{field.high}")
    return _checked(value, field)


def _shown(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:24]}… ({len(text)} digits)"


def _unsupported(token: str, field: _Field) -> InvalidSchedule | None:
    """A clear refusal for an item that looks like an extension this field does not read."""
    if _RANDOM.fullmatch(token):
        return _error(field, f"'{token}' (random syntax, R) is not supported; use H")
    if field is _DAY:
        return _unsupported_day(token)
    if field is _WEEKDAY:
        return _unsupported_weekday(token)
    if _DAY_ITEM_LIKE.fullmatch(token):
        return _error(field, f"'{token}': L and W are only allowed in the day-of-month and "
                             "day-of-week fields")
    return None


def _unsupported_day(token: str) -> InvalidSchedule | None:
    lowered = token.lower()
    if lowered.startswith("w") and lowered[1:].isdigit():
        return _error(_DAY, f"'{token}' is not valid nearest-weekday syntax; write "
                            f"{lowered[1:]}W (the weekday nearest day {lowered[1:]})")
    if _LAST_OF_WEEKDAY.fullmatch(token):
        return _error(_DAY, f"'{token}' (nL, the last such weekday of the month) is only "
                            "allowed in the day-of-week field; in day-of-month write L, LW "
                            "or L-n")
    if _WEEKDAY_NEAR.fullmatch(token) and lowered != "lw":
        return _error(_DAY, f"'{token}' is not supported; W is read after one day number "
                            "(15W) or after L (LW), alone in its list item")
    if _LAST_LIKE.fullmatch(token):
        return _error(_DAY, f"'{token}' is not valid last-day syntax; expected L, LW or L-n "
                            f"with n from 1 to {_MAX_BEFORE_LAST}, alone in its list item")
    if ("-" in token or "/" in token) and ("l" in lowered or "w" in lowered):
        return _error(_DAY, f"'{token}': L, LW, L-n and nW take no range or step; give each "
                            "as its own list item, like 1W,15W")
    return None


def _unsupported_weekday(token: str) -> InvalidSchedule | None:
    lowered = token.lower()
    if lowered == "l":
        return _error(_WEEKDAY, "'L' alone is not supported (Quartz reads it as Saturday, "
                                "cron counts from Sunday = 0); write sat, or nL for the last "
                                "such weekday of the month, like 5L (the last Friday)")
    if lowered.startswith("l") and lowered[1:].isdigit():
        return _error(_WEEKDAY, f"'{token}' is not valid last-weekday syntax; write "
                                f"{lowered[1:]}L (the last such weekday of the month)")
    if _WEEKDAY_NEAR.fullmatch(token) or lowered.startswith(("lw", "l-")):
        return _error(_WEEKDAY, f"'{token}': W, LW and L-n are only allowed in the "
                                "day-of-month field; in day-of-week write nL, like 5L (the "
                                "last Friday)")
    if _LAST_LIKE.fullmatch(token):
        return _error(_WEEKDAY, f"'{token}' is not valid last-weekday syntax; expected nL, "
                                "like 5L (the last Friday), alone in its list item")
    if ("-" in token or "/" in token) and "l" in lowered:
        return _error(_WEEKDAY, f"'{token}': nL takes no range or step; give each as its own "
                                "list item, like 1L,5L")
    return None


def _value(token: str, field: _Field) -> int:
    if _NUMBER.fullmatch(token):
        return _checked_digits(token, field)
    named = field.names.get(token.lower())
    if named is not None:
        return named
    raise _error(field, f"'{token}' is not a number or name; expected {field.describe()}")


def _step(text: str, field: _Field) -> int:
    if not _NUMBER.fullmatch(text):
        raise _error(field, f"step '{text}' is not a number")
    step = _number(text)
    if step == 0:
        raise _error(field, "step 0 is not allowed")
    # A step wider than the field names one value: */999999999999999999999 would fire at
    # minute 0 of every hour, surely not what was meant.
    span = field.high - field.low + 1
    if step is None or step > span:
        raise _error(field, f"step {_shown(text)} is larger than the field's range "
                            f"{field.low}–{field.high}; expected a step from 1 to {span}")
    return step


def _bounds(base: str, field: _Field, stepped: bool) -> tuple[int, int]:
    """The first and last value a base (``*``, ``a``, ``a-b``) covers, before any step."""
    if base == "*":
        return field.low, field.star_high
    if "-" not in base:
        start = _value(base, field)
        # ``a/n`` runs to the end of the field (7 in day-of-week, as cronie reads it: ``1/1``
        # includes Sunday); a bare ``a`` is just itself.
        return (start, max(start, field.high)) if stepped else (start, start)
    parts = base.split("-")
    if len(parts) != 2 or not all(parts):
        raise _error(field, f"'{base}' is not a valid range; expected start-end")
    low, high = _value(parts[0], field), _value(parts[1], field)
    if low > high:
        hint = " (Sunday can also be written 7)" if field is _WEEKDAY else ""
        raise _error(field, f"range {base} is reversed; ranges do not wrap{hint}")
    return low, high


def _item_values(item: str, field: _Field) -> range:
    try:
        return _plain_item_values(item, field)
    except InvalidSchedule:
        # Only on the failure path: say "not supported" for croniter's extensions
        # rather than "not a number".
        refusal = _unsupported(item, field)
        if refusal is None:
            raise
        raise refusal from None


def _plain_item_values(item: str, field: _Field) -> range:
    if not item:
        raise _error(field, "empty list item (two commas in a row, or a trailing comma)")
    base, slash, step_text = item.partition("/")
    if "/" in step_text:
        raise _error(field, f"'{item}' has more than one '/'")
    step = _step(step_text, field) if slash else 1
    low, high = _bounds(base, field, stepped=bool(slash))
    return range(low, high + 1, step)


def _refuse_markers(text: str, field: _Field) -> None:
    if "#" in text and field is not _WEEKDAY:
        raise _error(field, f"'#' (nth weekday of the month, in '{text}') is only allowed in "
                            "the day-of-week field")
    if "?" in text:
        raise _error(field, f"'?' is not supported; use '*' (in '{text}')")


def _nth_weekday(item: str) -> tuple[int, int] | None:
    """``D#n`` as (weekday with Sunday 0, n); None for an item without '#'."""
    match = _NTH_WEEKDAY.fullmatch(item)
    if match is None:
        if "#" in item:
            raise _error(_WEEKDAY, f"'{item}' is not valid nth-weekday syntax; expected D#n, "
                                   "like 1#1 (the first Monday) or fri#5")
        return None
    weekday = _value(match.group(1), _WEEKDAY) % 7
    nth = _number(match.group(2))
    if nth is None or not 1 <= nth <= 5:
        raise _error(_WEEKDAY, f"'{item}': n in D#n must be 1 to 5, got {_shown(match.group(2))}")
    return weekday, nth


def _last_of_weekday(item: str) -> int | None:
    """``nL`` as its weekday (Sunday 0); None for an item of another shape."""
    match = _LAST_OF_WEEKDAY.fullmatch(item)
    if match is None:
        return None
    text = match.group(1)
    if _NUMBER.fullmatch(text):
        value = _number(text)
        if value is None or not _WEEKDAY.low <= value <= _WEEKDAY.high:
            raise _error(_WEEKDAY, f"{_shown(item)} is out of range {_WEEKDAY.low}–"
                                   f"{_WEEKDAY.high}; nL is the last such weekday of the "
                                   "month, like 5L (the last Friday)")
        return value % 7
    named = _WEEKDAY.names.get(text.lower())
    if named is None:
        raise _error(_WEEKDAY, f"'{item}' is not valid last-weekday syntax; expected nL with "
                               f"n {_WEEKDAY.describe()}, like 5L (the last Friday)")
    return named


def _near_weekday(item: str) -> int | None:
    """``nW`` as its day; None for an item of another shape."""
    match = _NEAR_WEEKDAY.fullmatch(item)
    if match is None:
        return None
    value = _number(match.group(1))
    if value is None or not _DAY.low <= value <= _DAY.high:
        raise _error(_DAY, f"{_shown(item)} is out of range {_DAY.low}–{_DAY.high}; nW is "
                           "the weekday nearest day n of the month")
    return value


def _before_last(item: str) -> int | None:
    """``L-n`` as n; None for an item of another shape."""
    match = _BEFORE_LAST.fullmatch(item)
    if match is None:
        return None
    value = _number(match.group(1))
    if value is None or not 1 <= value <= _MAX_BEFORE_LAST:
        raise _error(_DAY, f"{_shown(item)} is out of range; L-n is n days before the "
                           f"month's last day, n from 1 to {_MAX_BEFORE_LAST} (L alone is "
                           "the last day)")
    return value


@dataclass(frozen=True, slots=True)
class _Specials:
    """The day items a plain value set cannot hold, as Quartz spells them: in day-of-month
    ``L``, ``LW``, ``L-n`` and ``nW``; in day-of-week ``D#n`` and ``nL``."""

    last_day: bool = False                       # L
    last_weekday: bool = False                   # LW
    before_last: frozenset[int] = frozenset()    # L-n: n
    near_weekdays: frozenset[int] = frozenset()  # nW: n
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()   # D#n: (weekday, n)
    last_weekdays: frozenset[int] = frozenset()  # nL: weekday, Sunday 0
    plain: tuple[str, ...] = ()     # the field's other items, for the plain field sets


def _day_specials(text: str) -> _Specials:
    last_day = last_weekday = False
    before_last: set[int] = set()
    near: set[int] = set()
    plain: list[str] = []
    for item in text.split(","):
        lowered = item.lower()
        if lowered == "l":
            last_day = True
        elif lowered == "lw":
            last_weekday = True
        elif (offset := _before_last(item)) is not None:
            before_last.add(offset)
        elif (day := _near_weekday(item)) is not None:
            near.add(day)
        else:
            plain.append(item)
    return _Specials(last_day=last_day, last_weekday=last_weekday,
                     before_last=frozenset(before_last), near_weekdays=frozenset(near),
                     plain=tuple(plain))


def _weekday_specials(text: str) -> _Specials:
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    plain: list[str] = []
    for item in text.split(","):
        if (found := _nth_weekday(item)) is not None:
            nth.add(found)
        elif (weekday := _last_of_weekday(item)) is not None:
            last.add(weekday)
        else:
            plain.append(item)
    return _Specials(nth_weekdays=frozenset(nth), last_weekdays=frozenset(last),
                     plain=tuple(plain))


def _specials(text: str, field: _Field) -> _Specials:
    """Split the special items (``L``, ``LW``, ``L-n``, ``nW``; ``D#n``, ``nL``) from the
    plain ones; a special item out of range is refused naming the field."""
    if field is _DAY:
        return _day_specials(text)
    if field is _WEEKDAY:
        return _weekday_specials(text)
    return _Specials(plain=tuple(text.split(",")))


def _field_values(text: str, field: _Field) -> frozenset[int]:
    """The values a field allows, without its special items (``CronSpec`` holds those); a
    bad field is refused with a message naming it. The one parse of a field."""
    _refuse_markers(text, field)
    values: set[int] = set()
    for item in _specials(text, field).plain:
        values.update(_item_values(item, field))
    if field is _WEEKDAY and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values)


# --- the whole expression -------------------------------------------------------------


def _fields_of(text: str) -> list[str]:
    """The five field texts, after alias expansion; refuses any other shape."""
    if text.startswith("@"):
        return _alias_fields(text)
    fields = _SPACES.split(text)
    if len(fields) != 5:
        raise InvalidSchedule(f"cron: expected 5 fields ({_LAYOUT}), got {len(fields)}")
    return fields


def _alias_fields(text: str) -> list[str]:
    alias = text.lower()
    if alias == "@reboot":
        raise InvalidSchedule(
            "cron: @reboot is not supported: crondepot fires on a timetable, not at start-up"
        )
    if alias not in _ALIASES:
        known = ", ".join(_ALIASES)
        raise InvalidSchedule(f"cron: unknown alias '{text}'; expected one of {known}")
    return _ALIASES[alias].split(" ")


def _never_fires(days: frozenset[int], specials: _Specials,
                 months: frozenset[int]) -> InvalidSchedule | None:
    """With day-of-week unrestricted, day-of-month items no chosen month reaches never come.

    A plain day d and ``dW`` need a month of at least d days, ``L-n`` one of at least n + 1;
    ``L`` and ``LW`` come every month.
    """
    if specials.last_day or specials.last_weekday:
        return None
    needs = sorted([(day, str(day)) for day in days]
                   + [(day, f"{day}W") for day in specials.near_weekdays]
                   + [(offset + 1, f"L-{offset}") for offset in specials.before_last])
    if not needs:
        return None
    longest = max(_MAX_DAYS[month - 1] for month in months)
    if needs[0][0] <= longest:
        return None
    item_list = ", ".join(text for _need, text in needs)
    verb = "occurs" if len(needs) == 1 else "occur"
    month_list = ", ".join(f"{m} ({_MONTH_TITLES[m - 1]})" for m in sorted(months))
    noun = "month" if len(months) == 1 else "months"
    return InvalidSchedule(
        f"day-of-month field: {item_list} never {verb} in {noun} {month_list}; "
        "this schedule would never fire",
        field=_DAY.name,
    )


@dataclass(frozen=True, slots=True)
class CronSpec:
    """A validated expression as the sets of values each field allows.

    ``expanded`` is the five-field text after alias and ``H`` expansion; ``fixed_time`` is
    True when its minute field does not begin with ``*`` and its hour field has neither
    ``*`` nor ``/`` — the DST rules depend on it (``_is_fixed_time``).
    """

    expanded: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: tuple[int, ...]
    weekdays: frozenset[int]  # 0 = Sunday
    day_or: bool  # both day fields restricted: either may match
    days_free: bool  # both day fields match every day: every day of an allowed month matches
    fixed_time: bool
    last_day: bool = False    # L in day-of-month: the month's last day matches too
    nth_weekdays: frozenset[tuple[int, int]] = frozenset()   # D#n: (weekday, n) match too
    last_weekday: bool = False                   # LW: the month's last Monday–Friday
    before_last: frozenset[int] = frozenset()    # L-n: the day n days before the last
    near_weekdays: frozenset[int] = frozenset()  # nW: the Monday–Friday nearest day n
    last_weekdays: frozenset[int] = frozenset()  # nL: the month's last such weekday
    month_items: bool = False   # any of L, LW, L-n, nW (one test on the hot path)

    def matches(self, wall: datetime) -> bool:
        """Whether the naive wall-clock minute ``wall`` is named by the expression."""
        return (
            wall.minute in self.minutes
            and wall.hour in self.hours
            and wall.month in self.months
            and self._day_matches(wall.date())
        )

    def matches_from(self, start: datetime) -> Iterator[datetime]:
        """Every matching naive minute at or after ``start``, in order.

        Infinite for a validated expression, except that it stops at the end of year 9999
        and after ten years without a match (which a validated expression never reaches).
        """
        first = _ceil_minute(start)
        day, hour, minute = first.date(), first.hour, first.minute
        while True:
            found = self._first_day_from(day)
            if found is None:
                return
            if found != day:
                day, hour, minute = found, 0, 0
            yield from self._times_of(day, hour, minute)
            if day == date.max:
                return
            day, hour, minute = day + _ONE_DAY, 0, 0

    def _times_of(self, day: date, hour: int, minute: int) -> Iterator[datetime]:
        minutes = self.minutes
        for h in self.hours[bisect_left(self.hours, hour) :]:
            start = bisect_left(minutes, minute) if h == hour else 0
            for m in minutes[start:]:
                yield datetime(day.year, day.month, day.day, h, m)

    def _day_matches(self, day: date) -> bool:
        if self.days_free:
            return True
        weekday = (day.weekday() + 1) % 7  # date.weekday(): Monday = 0
        in_month = day.day in self.days or (self.month_items and self._month_special(day))
        in_week = weekday in self.weekdays or (
            bool(self.nth_weekdays) and (weekday, (day.day - 1) // 7 + 1) in self.nth_weekdays
        ) or (weekday in self.last_weekdays and day.day + 7 > _month_length(day))
        return (in_month or in_week) if self.day_or else (in_month and in_week)

    def _month_special(self, day: date) -> bool:
        """Whether ``day`` is named by the day-of-month field's L, LW, L-n or nW items."""
        last = _month_length(day)
        if self.last_day and day.day == last:
            return True
        if last - day.day in self.before_last:
            return True
        if day.weekday() >= 5:      # LW and nW only ever name a Monday–Friday
            return False
        if self.last_weekday and day.day == _nearest_weekday(day, last, last):
            return True
        return any(day.day == _nearest_weekday(day, near, last) for near in self.near_weekdays)

    def _first_day_from(self, day: date) -> date | None:
        """The first day on or after ``day`` that matches; None after the search bound."""
        last_year = min(day.year + _SEARCH_YEARS, date.max.year)
        while day.year <= last_year:
            if day.month not in self.months:
                next_month = _next_month_start(day, self.months)
                if next_month is None:
                    return None
                day = next_month
                continue
            if self._day_matches(day):
                return day
            if day == date.max:
                return None
            day += _ONE_DAY
        return None


def _month_length(day: date) -> int:
    if day.month != 2:
        return _MAX_DAYS[day.month - 1]
    year = day.year
    return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28


def _nearest_weekday(day: date, target: int, last: int) -> int | None:
    """Quartz's ``W``: the Monday–Friday nearest day ``target`` of ``day``'s month (``last``
    days long), never in another month; None when the month has no day ``target``.

    A Saturday moves to the Friday before, a Sunday to the Monday after, except that a
    Saturday the 1st moves to Monday the 3rd and a Sunday on the month's last day to the
    Friday two days before (CronExpression.getTimeAfter, Quartz 2.5).
    """
    if target > last:
        return None
    weekday = day.replace(day=target).weekday()
    if weekday == 5:
        return target + 2 if target == 1 else target - 1
    if weekday == 6:
        return target - 2 if target == last else target + 1
    return target


def _next_month_start(day: date, months: tuple[int, ...]) -> date | None:
    later = [month for month in months if month > day.month]
    if later:
        return date(day.year, later[0], 1)
    if day.year == date.max.year:
        return None
    return date(day.year + 1, months[0], 1)


def _ceil_minute(moment: datetime) -> datetime:
    whole = moment.replace(second=0, microsecond=0)
    return whole if whole == moment else whole + timedelta(minutes=1)


def _is_fixed_time(minute_text: str, hour_text: str) -> bool:
    # cronie (entry.c, cron.c) calls a job "wildcard" when its minute or hour field begins
    # with '*' (MIN_STAR, HR_STAR): only the others, fixed-time jobs, are moved to the end of
    # a skipped hour, and only wildcard jobs fire again in a repeated one. crondepot also
    # counts a '*' or '/' anywhere in the hour as wildcard (docs/scheduler.md: a step in the hour
    # keeps firing through both passes), where cronie looks at the first character only.
    return (not minute_text.startswith("*")
            and "*" not in hour_text and "/" not in hour_text)


def _spec_from_fields(fields: list[str]) -> CronSpec:
    minute, hour, day, month, weekday = (_field_values(text, field)
                                         for text, field in zip(fields, _FIELDS, strict=True))
    # cronie: a day field whose text begins with '*' is unrestricted (see the module's doc)
    day_restricted = not fields[2].startswith("*")
    week_restricted = not fields[4].startswith("*")
    specials = _specials(fields[2], _DAY), _specials(fields[4], _WEEKDAY)
    if not week_restricted:
        refusal = _never_fires(day, specials[0], frozenset(month))
        if refusal is not None:
            raise refusal
    day_or = day_restricted and week_restricted
    spec = CronSpec(
        expanded=" ".join(fields),
        minutes=tuple(sorted(minute)),
        hours=tuple(sorted(hour)),
        days=day,
        months=tuple(sorted(month)),
        weekdays=weekday,
        day_or=day_or,
        days_free=not day_or and len(day) == 31 and len(weekday) == 7,
        fixed_time=_is_fixed_time(fields[0], fields[1]),
        last_day=specials[0].last_day,
        nth_weekdays=specials[1].nth_weekdays,
        last_weekday=specials[0].last_weekday,
        before_last=specials[0].before_last,
        near_weekdays=specials[0].near_weekdays,
        last_weekdays=specials[1].last_weekdays,
        month_items=bool(specials[0].last_day or specials[0].last_weekday
                         or specials[0].before_last or specials[0].near_weekdays),
    )
    if not day_or and not spec.days_free and spec._first_day_from(date(2000, 1, 1)) is None:
        raise InvalidSchedule(f"day-of-month field: '{fields[2]}' and day-of-week field "
                              f"'{fields[4]}' must both match (a field beginning with '*' "
                              "counts as unrestricted, as in cronie), and no day in 41 years "
                              "does; this schedule would never fire", field=_DAY.name)
    return spec


_HASH_TOKEN = re.compile(r"(?<![A-Za-z])H(?![A-Za-z])", re.IGNORECASE)


def expand_hash(cron: str, hash_key: str) -> str:
    """The five fields of a valid expression with its ``H`` items replaced by the values
    ``hash_key`` picks: what ``Timetable(cron, tz, hash_key=…).expanded`` says, without
    building the field sets (a string operation per field; the ledger check groups millions
    of H jobs by it and builds one timetable per distinct expansion)."""
    return " ".join(_expand_hash(text, field, hash_key)
                    for text, field in zip(_fields_of(cron.strip()), _FIELDS, strict=True))


def uses_hash(cron: str) -> bool:
    """Whether the expression has an ``H`` field, i.e. whether its fires depend on the key."""
    return _HASH_TOKEN.search(cron) is not None


@lru_cache(maxsize=4096)
def _parse(text: str, hash_key: str) -> CronSpec:
    fields = _fields_of(text)
    expanded = [
        _expand_hash(field_text, field, hash_key)
        for field_text, field in zip(fields, _FIELDS, strict=True)
    ]
    return _spec_from_fields(expanded)


def parse_cron(cron: object, *, hash_key: str | None = None) -> CronSpec:
    """Validate ``cron`` and return its field sets; raises InvalidSchedule naming the field."""
    if not isinstance(cron, str):
        raise InvalidSchedule(
            f"cron: expected a string like '0 9 * * *', got {type(cron).__name__}"
        )
    if hash_key is not None and not isinstance(hash_key, str):
        raise TypeError(f"hash_key must be a string or None, got {type(hash_key).__name__}")
    text = cron.strip()
    if not text:
        raise InvalidSchedule(
            f"cron: the expression is empty; expected 5 fields ({_LAYOUT}) or an alias like @daily"
        )
    # The key only matters to H fields; without them every key shares one cached parse
    # (an import of millions of keyed jobs would otherwise parse each expression anew).
    return _parse(text, (hash_key or "") if uses_hash(text) else "")
