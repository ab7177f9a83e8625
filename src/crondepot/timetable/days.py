"""Days of the week as a job document names them: "mon-fri", "sun-thu" (a range may wrap
past Sunday), "mon,wed,fri", or both ("mon-wed,fri"). A calendar's business days and a
delivery window's opening days read the same text with the same rules. Pure."""

from __future__ import annotations

import json

from crondepot.base.errors import InvalidSchedule

__all__ = ["DAY_NAMES", "format_days", "weekdays"]

DAY_NAMES: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def weekdays(text: object, field: str) -> frozenset[int]:
    """The weekdays (Monday 0) ``text`` names; InvalidSchedule naming ``field`` otherwise."""
    example = "like 'mon-fri', 'sun-thu' or 'mon,wed,fri'"
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchedule(f"expected {field} to be weekday names, {example}, got "
                              f"{json.dumps(text)}", field=field)
    days: set[int] = set()
    for item in text.lower().replace(" ", "").split(","):
        ends = item.split("-")
        if len(ends) > 2 or any(end not in DAY_NAMES for end in ends):
            raise InvalidSchedule(f"{field}: {item!r} is not a weekday name or a range of "
                                  f"two ({', '.join(DAY_NAMES)}), {example}", field=field)
        first, last = DAY_NAMES.index(ends[0]), DAY_NAMES.index(ends[-1])
        days.update((first + n) % 7 for n in range((last - first) % 7 + 1))
    return frozenset(days)


def format_days(days: frozenset[int]) -> str:
    """Days as runs of names: {0..5} -> "mon-sat", {0, 2, 4} -> "mon,wed,fri"."""
    runs: list[tuple[int, int]] = []
    for day in sorted(days):
        if runs and runs[-1][1] == day - 1:
            runs[-1] = (runs[-1][0], day)
        else:
            runs.append((day, day))
    return ",".join(DAY_NAMES[a] if a == b else f"{DAY_NAMES[a]}-{DAY_NAMES[b]}"
                    for a, b in runs)
