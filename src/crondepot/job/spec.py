"""Job documents: validation, defaults, and the typed value the rest of crondepot uses.

A job document is what a client sends (API body, NDJSON import line, ``jobs add --file``).
``JobSpec.from_document`` checks every field and raises ``InvalidJob`` naming the first bad
one by its JSON path ("misfire.until"), saying what was expected and what was given. It
never touches the database: a document that fails here changes nothing. Names, types,
bounds, patterns, choices and defaults come from the field table (``fields.py``), which the
published JSON schema is generated from too; this module adds the checks a schema cannot
spell (a schedule that parses, a URL a worker can call, the payload's stored size).

Before any field rule, every string of the document (values and object keys) is checked to
be text PostgreSQL can store, and the nesting of arrays and objects is bounded
(``MAX_PAYLOAD_DEPTH``): a NUL character or a lone UTF-16 surrogate (JSON ``"\\ud800"``, which
Python's ``json`` reads) would otherwise pass every rule and fail the INSERT, a 500 for one
job and a lost batch for an import; deep nesting would overflow the JSON writers' recursion.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, time
from functools import lru_cache
from typing import Any, Literal

import orjson

from crondepot.base import jsontext
from crondepot.base.errors import InvalidJob, InvalidSchedule
from crondepot.base.vocab import (
    HANDLER_NAME,
    LIMIT_NAME,
    PRIORITIES,
    Overlap,
    Priority,
    did_you_mean,
)
from crondepot.job import fields as F
from crondepot.job import targets
from crondepot.job.checks import (
    an_object,
    boolean,
    json_kind,
    matches,
    member_names,
    no_extra,
    seconds,
)
from crondepot.job.fields import (
    MAX_PAYLOAD_BYTES,
    MAX_PAYLOAD_DEPTH,
    Field,
)
from crondepot.timetable import (
    MAX_CRONS,
    Schedule,
    Timetable,
    every_seconds,
    every_text,
    interval_text,
    schedule,
    several_text,
    uses_hash,
    validate_zone,
)
from crondepot.timetable.calendar import business_days
from crondepot.timetable.delivery import OPT_OUT, InvalidWindow, parse_window

# Names a job refers to are matched whole (``fullmatch``: ``$`` would let a trailing newline
# through); the grants and the rate limits use the same two (HANDLER_NAME, LIMIT_NAME).
__all__ = ["DOCUMENT_FIELDS", "HANDLER_NAME", "LIMIT_NAME", "MAX_PAYLOAD_BYTES",
           "MAX_PAYLOAD_DEPTH", "PRIORITIES", "JobSpec", "Misfire", "Priority"]
DOCUMENT_FIELDS = frozenset(f.name for f in F.DOCUMENT)


@dataclass(frozen=True, slots=True, kw_only=True)
class Misfire:
    policy: Literal["run_late", "skip_after", "skip_after_local_time"] = "run_late"
    seconds: int | None = None      # skip_after: how late a run may still start
    until: time | None = None       # skip_after_local_time: the local wall-clock deadline

    def document(self) -> dict[str, Any]:
        if self.policy == "skip_after":
            return {"policy": self.policy, "seconds": self.seconds}
        if self.policy == "skip_after_local_time":
            assert self.until is not None
            return {"policy": self.policy, "until": self.until.strftime("%H:%M")}
        return {"policy": self.policy}


# What each overlap policy does, in one line (the console's job page says it).
OVERLAP_TEXT: dict[str, str] = {
    "allow": "allow: a fire runs even while the previous run is still running",
    "skip": "skip: a fire that comes while a run of this job is running is skipped "
            "(reason overlap)",
    "buffer_one": "buffer_one: a fire that comes while a run is running waits for it; at "
                  "most one waits, a further one is skipped (reason overlap)",
    "replace": "replace: a fire that comes while a run is running waits, as buffer_one, "
               "and the running run gives way: an async handler is cancelled, an HTTP call "
               "abandoned (skipped, reason replaced); a sync handler cannot be cancelled "
               "and runs to its end",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    # The timetable as stored and read by every reader (timetable.timetable_of): one cron,
    # a list's expressions joined by " | ", or an interval's "@every 90s from …". None: an
    # ``at`` job.
    cron: str | None
    tz: str
    target: dict[str, Any]
    key: str | None = None
    priority: Priority = F.PRIORITY.default
    payload: dict[str, Any] = field(default_factory=dict)
    misfire: Misfire = field(default_factory=Misfire)
    catchup: Literal["all", "latest"] = F.CATCHUP.default
    max_catchup: int = F.MAX_CATCHUP.default
    spread_seconds: int = F.SPREAD_SECONDS.default
    spread_key: str | None = None
    max_attempts: int = F.RETRY_MAX_ATTEMPTS.default     # retry.max_attempts
    retry_base_s: float = F.RETRY_BASE_S.default         # retry.base_s
    retry_cap_s: float = F.RETRY_CAP_S.default           # retry.cap_s
    lease_seconds: int = F.LEASE_SECONDS.default
    rate_limit: str | None = None
    active: bool = F.ACTIVE.default
    at: datetime | None = None           # instead of cron: one fire at this instant
    start_at: datetime | None = None     # no fire before it
    end_at: datetime | None = None       # no fire after it
    max_runs: int | None = None          # the job ends after this many fires
    labels: dict[str, str] = field(default_factory=dict)
    alert_after_failures: int | None = None
    pause_after_failures: int | None = None
    crons: tuple[str, ...] | None = None   # the list a document gave as cron (echoed so)
    every_s: int | None = None             # an interval's seconds (cron is its text)
    anchor_at: datetime | None = None      # an interval's anchor; None until the store sets
                                           # the creation instant
    # {"exclude", "on_excluded", "business_days"}, every member given; None: no calendar
    calendar: dict[str, str] | None = None
    # the window as the document gives it, normalised: an object, "none" (no window, not
    # even the tenant's), or None (the tenant's default)
    delivery_window: dict[str, Any] | str | None = None
    overlap: Overlap = F.OVERLAP.default

    @classmethod
    def from_document(cls, doc: Any) -> JobSpec:
        return _parse(doc)

    @property
    def schedule_text(self) -> str:
        """The timetable in one line, for people: "0 9 L * *, from …, until …, at most 12
        fires" or "at 2026-12-05T03:30:00+00:00" (instants in UTC)."""
        if self.at is not None:
            return f"at {self.at.astimezone(UTC).isoformat()}"
        assert self.cron is not None
        parts = [self.cron]
        if self.every_s is not None:
            parts = [f"every {every_text(self.every_s)}"]
            if self.anchor_at is not None:
                parts[0] += f" from {self.anchor_at.astimezone(UTC).isoformat()}"
        if self.start_at is not None:
            parts.append(f"from {self.start_at.astimezone(UTC).isoformat()}")
        if self.end_at is not None:
            parts.append(f"until {self.end_at.astimezone(UTC).isoformat()}")
        if self.max_runs is not None:
            parts.append(f"at most {self.max_runs} fire{'s' if self.max_runs > 1 else ''}")
        return ", ".join(parts)

    @property
    def delivery_window_text(self) -> str:
        """The delivery window in one line, for people: "09:00-21:00 mon-sat, outside:
        defer", or whose it is when the job has none of its own."""
        if self.delivery_window is None:
            return "the tenant's default (if it has one)"
        if self.delivery_window == OPT_OUT:
            return "none (not even the tenant's default)"
        return parse_window(self.delivery_window).text

    @property
    def retry_waits(self) -> list[float]:
        """The longest wait after each failed attempt that is retried (the last attempt
        is not): min(cap, base·2^(n-1)) for n = 1 … max_attempts - 1 (queue/retry.py
        backoff_cap). Each wait is drawn from 0 to it (full jitter)."""
        return [min(self.retry_cap_s, self.retry_base_s * 2.0 ** min(n - 1, 60))
                for n in range(1, self.max_attempts)]

    @property
    def retry_text(self) -> str:
        """The retry curve in one line, for people: "4 attempts; waits up to 60, 120, 240 s
        (random from 0, cap 1800 s)"."""
        attempts = f"{self.max_attempts} attempt{'s' if self.max_attempts > 1 else ''}"
        waits = self.retry_waits
        if not waits:
            return f"{attempts}; no retry"
        shown = ", ".join(f"{w:g}" for w in waits[:6]) + (", …" if len(waits) > 6 else "")
        return (f"{attempts}; waits up to {shown} s (random from 0, cap "
                f"{self.retry_cap_s:g} s)")

    def anchored(self, anchor: datetime) -> JobSpec:
        """This spec with its interval anchored at ``anchor`` (whole seconds), if it is an
        interval without one (the store passes the creation instant); else itself."""
        if self.every_s is None or self.anchor_at is not None:
            return self
        at = anchor.astimezone(UTC).replace(microsecond=0)
        return replace(self, anchor_at=at, cron=interval_text(self.every_s, at))
    @property
    def calendar_text(self) -> str | None:
        """The calendar rule in one line, for people: "in-bank-holidays: a fire on one of
        its dates moves to the business day before (business days mon-fri)"."""
        if self.calendar is None:
            return None
        what = {"skip": "is skipped",
                "next_business_day": "moves to the next business day",
                "previous_business_day": "moves to the business day before"}
        return (f"{self.calendar['exclude']}: a fire on one of its dates "
                f"{what[self.calendar['on_excluded']]} (business days "
                f"{self.calendar['business_days']})")

    @property
    def overlap_text(self) -> str:
        """The overlap policy in one line, for people (the console's job page)."""
        return OVERLAP_TEXT[self.overlap]

    def hash_key(self, job_id: int) -> str:
        """What H fields hash on: the client key, else the job id."""
        return self.key if self.key is not None else str(job_id)

    def timetable(self, job_id: int | None = None) -> Schedule:
        """The job's fires: its cron (or ``at``) read in its zone, inside its window."""
        key = self.hash_key(job_id) if job_id is not None else (self.key or "")
        return schedule(self.cron, self.tz, hash_key=key, at=self.at,
                        start_at=self.start_at, end_at=self.end_at)


def _parse(doc: Any) -> JobSpec:
    if not isinstance(doc, dict):
        raise InvalidJob(f"expected a JSON object, got {json_kind(doc)}", field="")
    text = _storable_text(doc)
    try:
        parts = {name: read(doc, text) for name, read in _PARTS}
        spec = _assemble(parts)
        _check_window(spec)
        _check_schedule(spec)
    except InvalidJob as first:
        # The rare path: read every part again, each on its own, to report them all.
        raise _every_problem(doc, text, first) from None
    return spec


def _unknown_fields(doc: dict[str, Any]) -> None:
    unknown = sorted(set(doc) - DOCUMENT_FIELDS)
    if unknown:
        raise InvalidJob(_unknown(str(unknown[0])), field=str(unknown[0]),
                         problems=[(str(name), _unknown(str(name))) for name in unknown])


def _unknown(name: str) -> str:
    return (f"unknown field {name!r}{did_you_mean(name, DOCUMENT_FIELDS)}; allowed: "
            f"{', '.join(sorted(DOCUMENT_FIELDS))}")


def _when(doc: dict[str, Any]) -> _When:
    # Present means a value: null is refused here as the schema refuses it (a PATCH resets
    # either with null, and store._patched drops the nulls before the merged document).
    crons = _crons(doc) if isinstance(doc.get("cron"), list) else None
    cron = (several_text(crons) if crons is not None
            else _required_str(doc, F.CRON) if "cron" in doc else None)
    for name in ("at", "every"):
        if name in doc and doc[name] is None:
            raise InvalidJob(f"expected {name} to be "
                             f"{'an RFC 3339 date-time' if name == 'at' else 'an interval'}"
                             " string, got null", field=name)
    at = _instant(doc, F.AT)
    every_s, anchor_at = _interval(doc)
    given = [name for name, value in (("cron", cron), ("every", every_s), ("at", at))
             if value is not None]
    if len(given) != 1:
        raise InvalidJob("give one of cron (a repeating schedule), every (an interval) or at "
                         "(one run at an instant): "
                         + (f"got {' and '.join(given)}, not both" if given
                            else "one of them is required"),
                         field=given[-1] if given else "cron")
    if every_s is not None:
        cron = interval_text(every_s, anchor_at)
    return _When(cron=cron, at=at, crons=crons, every_s=every_s, anchor_at=anchor_at)


@dataclass(frozen=True, slots=True)
class _When:
    """The timetable fields of a document: cron (a list's or an interval's text too), at,
    and the shapes the document gave (a list of crons, an interval and its anchor)."""

    cron: str | None
    at: datetime | None
    crons: tuple[str, ...] | None
    every_s: int | None
    anchor_at: datetime | None


def _optional_int(doc: dict[str, Any], spec: Field) -> int | None:
    return None if doc.get(spec.name) is None else _int(doc, spec)


# The parts of a job document, each read by one function of (document, its text) that
# raises InvalidJob for a broken rule. The fast path reads them in this order and stops at
# the first error (so that error is the same as ever); the path that reports every problem
# reads each on its own. A new field is one line here and one in _assemble.
_PARTS: tuple[tuple[str, Any], ...] = (
    ("unknown", lambda d, t: _unknown_fields(d)),
    ("key", lambda d, t: _optional_str(d, F.KEY)),
    ("when", lambda d, t: _when(d)),
    ("tz", lambda d, t: _required_str(d, F.TZ)),
    ("priority", lambda d, t: _choice(d, F.PRIORITY)),
    # the priority as given: urgent runs are never spread, whatever else is wrong
    ("spread", lambda d, t: _spread(d.get("spread"), d.get("priority"))),
    ("retry", lambda d, t: _retry(d)),
    ("target", lambda d, t: targets.check(d.get("target"))),
    ("payload", lambda d, t: _payload(d.get("payload", dict(F.PAYLOAD.default)), t)),
    ("misfire", lambda d, t: _misfire(d.get("misfire"))),
    ("catchup", lambda d, t: _choice(d, F.CATCHUP)),
    ("max_catchup", lambda d, t: _int(d, F.MAX_CATCHUP)),
    ("lease_seconds", lambda d, t: _int(d, F.LEASE_SECONDS)),
    ("rate_limit", lambda d, t: _rate_limit(d.get("rate_limit"))),
    ("active", lambda d, t: boolean(d, F.ACTIVE)),
    ("start_at", lambda d, t: _instant(d, F.START_AT)),
    ("end_at", lambda d, t: _instant(d, F.END_AT)),
    ("max_runs", lambda d, t: _optional_int(d, F.MAX_RUNS)),
    ("labels", lambda d, t: labels(d.get("labels"))),
    ("alert_after_failures", lambda d, t: _optional_int(d, F.ALERT_AFTER_FAILURES)),
    ("pause_after_failures", lambda d, t: _optional_int(d, F.PAUSE_AFTER_FAILURES)),
    ("calendar", lambda d, t: _calendar(d.get("calendar"))),
    ("overlap", lambda d, t: _choice(d, F.OVERLAP)),
    ("delivery_window", lambda d, t: _delivery_window(d.get("delivery_window"))),
)


def _assemble(parts: dict[str, Any]) -> JobSpec:
    spread_seconds, spread_key = parts["spread"]
    max_attempts, retry_base_s, retry_cap_s = parts["retry"]
    when: _When = parts["when"]
    return JobSpec(
        key=parts["key"], cron=when.cron, tz=parts["tz"], priority=parts["priority"],
        target=parts["target"], payload=parts["payload"], misfire=parts["misfire"],
        catchup=parts["catchup"], max_catchup=parts["max_catchup"],
        spread_seconds=spread_seconds, spread_key=spread_key,
        max_attempts=max_attempts, retry_base_s=retry_base_s, retry_cap_s=retry_cap_s,
        lease_seconds=parts["lease_seconds"], rate_limit=parts["rate_limit"],
        active=parts["active"], at=when.at, start_at=parts["start_at"],
        end_at=parts["end_at"], max_runs=parts["max_runs"], labels=parts["labels"],
        alert_after_failures=parts["alert_after_failures"],
        pause_after_failures=parts["pause_after_failures"],
        crons=when.crons, every_s=when.every_s, anchor_at=when.anchor_at,
        calendar=parts["calendar"], overlap=parts["overlap"],
        delivery_window=parts["delivery_window"],
    )


def _every_problem(doc: dict[str, Any], text: bytes | None, first: InvalidJob) -> InvalidJob:
    """``first`` with every other problem of ``doc`` listed after it, each once."""
    problems = list(first.problems)
    read: dict[str, Any] = {}

    def found(exc: InvalidJob) -> None:
        problems.extend(p for p in exc.problems if p not in problems)

    for name, reader in _PARTS:
        try:
            read[name] = reader(doc, text)
        except InvalidJob as exc:
            found(exc)
    # The rules between fields, on the fields that could be read: the window, and the
    # timetable (cron or at, in its zone).
    if all(name in read for name in ("when", "tz", "start_at", "end_at", "key")):
        when: _When = read["when"]
        partial = JobSpec(cron=when.cron, tz=read["tz"], target={}, at=when.at,
                          start_at=read["start_at"], end_at=read["end_at"], key=read["key"],
                          crons=when.crons, every_s=when.every_s, anchor_at=when.anchor_at)
        for check in (_check_window, _check_schedule):
            try:
                check(partial)
            except InvalidJob as exc:
                found(exc)
        if partial.cron is not None and any(field == "tz" for field, _ in problems):
            # the zone is wrong; the expression may be too, read on a zone that exists
            try:
                _check_schedule(replace(partial, tz="UTC"))
            except InvalidJob as exc:
                found(exc)
    return InvalidJob(str(first), field=first.field, problems=problems)


LATEST_INSTANT = datetime(9000, 1, 1, tzinfo=UTC)


def _crons(doc: dict[str, Any]) -> tuple[str, ...]:
    """A list of cron expressions: 1 to MAX_CRONS, each a text the cron field takes (checked
    here for its type and length, for its meaning in _check_schedule), naming the index of a
    bad one (``cron.2``)."""
    items = doc["cron"]
    if not 1 <= len(items) <= MAX_CRONS:
        raise InvalidJob(f"expected cron to be one expression or a list of 1 to {MAX_CRONS}, "
                         f"got a list of {len(items)}", field="cron")
    crons = []
    for index, item in enumerate(items):
        try:
            crons.append(_required_str({"cron": item}, F.CRON))
        except InvalidJob as exc:
            raise InvalidJob(f"cron.{index}: {exc}", field=f"cron.{index}") from None
        if "|" in item:
            raise InvalidJob(f"cron.{index}: '|' is not part of a cron expression; give each "
                             "expression as an item of the list", field=f"cron.{index}")
    return tuple(crons)


def _interval(doc: dict[str, Any]) -> tuple[int | None, datetime | None]:
    """(every_s, anchor_at): the interval's seconds and its anchor, if given."""
    anchor = _instant(doc, F.ANCHOR)
    if doc.get("every") is None:
        if anchor is not None:
            raise InvalidJob("anchor goes with every (an interval's start); without every give "
                             "no anchor (or null)", field="anchor")
        return None, None
    try:
        return every_seconds(doc["every"]), anchor
    except InvalidSchedule as exc:
        raise InvalidJob(str(exc), field="every") from None


def _instant(doc: dict[str, Any], spec: Field) -> datetime | None:
    """An RFC 3339 instant with an offset (``Z`` or ``±hh:mm``), as an aware UTC datetime."""
    value = doc.get(spec.name)
    if value is None:
        return None
    example = "like 2026-12-05T09:00:00+05:30"
    if not isinstance(value, str):
        raise InvalidJob(f"expected {spec.path} to be an RFC 3339 date-time string ({example}), "
                         f"got {json_kind(value)}", field=spec.path)
    assert spec.max_length is not None
    if len(value) > spec.max_length or not _RFC3339.fullmatch(value):
        raise InvalidJob(f"expected {spec.path} to be an RFC 3339 date-time with an offset "
                         f"({example}), got {json.dumps(value[:80])}", field=spec.path)
    try:
        parsed = datetime.fromisoformat(f"{value[:10]}T{value[11:]}".replace("z", "Z"))
    except ValueError:
        raise InvalidJob(f"{spec.path} {json.dumps(value)} is not a real date-time "
                         f"({example})", field=spec.path) from None
    try:
        instant = parsed.astimezone(UTC)
    except OverflowError:
        instant = None
    # A timetable walks local days up to a year past an instant; near datetime's end that
    # overflows (year 9999 gave a 500). Schedules this far out mean nothing to a reminder.
    if instant is None or instant >= LATEST_INSTANT:
        raise InvalidJob(f"{spec.path} {json.dumps(value)} is out of range: expected an instant "
                         f"before {LATEST_INSTANT:%Y-%m-%d}", field=spec.path)
    return instant


# RFC 3339's date-time (section 5.6): "T" or "t" (or a space, which 5.6 allows by note),
# seconds required, optional fraction, an offset required. ASCII digits only.
_RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}"
                      r"(\.[0-9]{1,6})?([Zz]|[+-][0-9]{2}:[0-9]{2})")


def _check_window(spec: JobSpec) -> None:
    if spec.start_at is not None and spec.end_at is not None and spec.end_at <= spec.start_at:
        raise InvalidJob(f"end_at ({spec.end_at.isoformat()}) must be after start_at "
                         f"({spec.start_at.isoformat()})", field="end_at")
    if spec.at is not None and not (spec.start_at or spec.at) <= spec.at <= (
            spec.end_at or spec.at):
        raise InvalidJob(f"at ({spec.at.isoformat()}) is outside the window start_at..end_at; "
                         "the job would never fire", field="at")


def _check_schedule(spec: JobSpec) -> None:
    if spec.cron is None:
        try:
            validate_zone(spec.tz)
        except InvalidSchedule as exc:
            raise InvalidJob(str(exc), field="tz") from None
        return
    parts = spec.crons or ((spec.cron,) if spec.every_s is None else ())
    if all(not uses_hash(part) and _schedule_known_valid(part, spec.tz) for part in parts) and (
            parts or _zone_known_valid(spec.tz)):
        return
    try:
        validate_zone(spec.tz)
    except InvalidSchedule as exc:
        raise InvalidJob(str(exc), field="tz") from None
    # Each expression alone, so the error names the one at fault (cron.3 in a list).
    for index, part in enumerate(parts):
        field = f"cron.{index}" if spec.crons is not None else "cron"
        try:
            Timetable(part, spec.tz, hash_key=spec.key or "")
        except InvalidSchedule as exc:
            prefix = f"{field}: " if spec.crons is not None else ""
            raise InvalidJob(f"{prefix}{exc}", field="tz" if exc.field == "tz" else field
                             ) from None


@lru_cache(maxsize=1024)
def _zone_known_valid(tz: str) -> bool:
    try:
        validate_zone(tz)
    except InvalidSchedule:
        return False
    return True


@lru_cache(maxsize=4096)
def _schedule_known_valid(cron: str, tz: str) -> bool:
    """Whether (cron, tz) is a valid schedule, remembered: an import of millions of jobs
    repeats a handful of schedules. An invalid pair is remembered as False and checked again
    in full, with its message, each time; H fields depend on the job's key and are not
    remembered at all."""
    try:
        validate_zone(tz)
        Timetable(cron, tz, hash_key="")
    except InvalidSchedule:
        return False
    return True


def _required_str(doc: dict[str, Any], spec: Field) -> str:
    """A non-blank text field (``spec.non_blank``), stripped of surrounding whitespace."""
    name = spec.name
    if name not in doc:
        raise InvalidJob(f"{name} is required", field=name)
    value = doc[name]
    if not isinstance(value, str) or not value.strip():
        raise InvalidJob(f"expected {name} to be a non-empty string, got {json_kind(value)}",
                         field=name)
    assert spec.max_length is not None
    if len(value) > spec.max_length:
        raise InvalidJob(f"{name} is {len(value)} characters; at most {spec.max_length}",
                         field=name)
    return value.strip()


def _optional_str(doc: dict[str, Any], spec: Field) -> str | None:
    if doc.get(spec.name) is None:
        return None
    return _required_str(doc, spec)


def _choice(doc: dict[str, Any], spec: Field) -> Any:
    value = doc.get(spec.name, spec.default)
    if value not in spec.choices:
        raise InvalidJob(f"expected {spec.path} to be one of {', '.join(spec.choices)}, got "
                         f"{json.dumps(value)}", field=spec.path)
    return value


def _int(obj: dict[str, Any], spec: Field) -> int:
    value = obj.get(spec.name, spec.default)
    path = spec.path
    if isinstance(value, float) and value.is_integer():
        value = int(value)      # JSON has one number type: 6.0 is the integer 6 (JSON Schema)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJob(f"expected {path} to be an integer, got {json_kind(value)}", field=path)
    low, high = int(spec.low or 0), int(spec.high or 0)
    if not low <= value <= high:
        raise InvalidJob(f"expected {path} to be an integer from {low} to {high}, got {value}",
                         field=path)
    return value


def _payload(value: Any, document_text: bytes | None) -> dict[str, Any]:
    """The payload object, refused exactly when the jobs table's CHECK would refuse it:
    PostgreSQL measures ``octet_length(payload::text)``, the bytes of jsonb's text output
    (", " and ": " between tokens, numbers as ``numeric`` prints them: ``1e300`` is 301
    bytes), not the compact text sent, so the limit is on ``jsontext.stored_size``."""
    payload = an_object(value, "payload")
    # The whole document's orjson text, when it has no exponent and is short, bounds the
    # payload's stored size without writing the payload again (the common case of an import
    # line): the payload's text is part of it, and PostgreSQL's text of it is longer only
    # by one byte per "," and ":".
    if document_text is not None:
        bound = jsontext.stored_size_bound(document_text)
        if bound is not None and bound <= MAX_PAYLOAD_BYTES:
            return payload
    if not jsontext.stored_size_at_most(payload, MAX_PAYLOAD_BYTES):
        size = jsontext.stored_size(payload)
        raise InvalidJob(f"payload is {size} bytes of JSON as PostgreSQL stores it (its jsonb "
                         f"text); at most {MAX_PAYLOAD_BYTES}", field="payload")
    return payload


def _misfire(value: Any) -> Misfire:
    if value is None:
        return Misfire()
    misfire = an_object(value, "misfire")
    policy = misfire.get("policy")
    if policy == "run_late":
        no_extra(misfire, member_names(F.MISFIRES, policy), "misfire")
        return Misfire()
    if policy == "skip_after":
        no_extra(misfire, member_names(F.MISFIRES, policy), "misfire")
        if "seconds" not in misfire:
            raise InvalidJob("misfire.seconds is required with skip_after",
                             field="misfire.seconds")
        seconds = _int(misfire, F.MISFIRE_SECONDS)
        return Misfire(policy="skip_after", seconds=seconds)
    if policy == "skip_after_local_time":
        no_extra(misfire, member_names(F.MISFIRES, policy), "misfire")
        until = misfire.get("until")
        match = matches(until, F.UNTIL)
        if not match:
            raise InvalidJob(f"expected misfire.until to be a local time HH:MM (00:00–23:59), "
                             f"got {json.dumps(until)}", field="misfire.until")
        return Misfire(policy="skip_after_local_time",
                       until=time(int(match[1]), int(match[2])))
    raise InvalidJob("expected misfire.policy to be one of run_late, skip_after, "
                     f"skip_after_local_time, got {json.dumps(policy)}", field="misfire.policy")


def _spread(value: Any, priority: str) -> tuple[int, str | None]:
    if value is None:
        return 0, None
    spread = an_object(value, "spread")
    no_extra(spread, frozenset(f.name for f in F.SPREAD_FIELDS), "spread")
    seconds = _int(spread, F.SPREAD_SECONDS)
    key = spread.get("key")
    low, high = F.SPREAD_KEY.min_length, F.SPREAD_KEY.max_length
    assert low is not None and high is not None
    if key is not None and (not isinstance(key, str) or not low <= len(key) <= high):
        raise InvalidJob(f"expected spread.key to be a string of {low}–{high} characters, got "
                         f"{json_kind(key)}", field="spread.key")
    if priority == "urgent":
        return 0, key  # urgent runs are never spread: they exist to be on time
    return seconds, key


def _calendar(value: Any) -> dict[str, str] | None:
    """The calendar object with every member given; that the calendar exists is the store's
    check (job/calendars.py), this one is the document's alone."""
    if value is None:
        return None
    calendar = an_object(value, "calendar")
    no_extra(calendar, frozenset(f.name for f in F.CALENDAR_FIELDS), "calendar")
    name = calendar.get("exclude")
    if not isinstance(name, str) or not matches(name, F.CALENDAR_EXCLUDE):
        raise InvalidJob("expected calendar.exclude to be a calendar's name (1-63 lowercase "
                         "letters, digits or '-', not beginning or ending with '-', like "
                         f"in-bank-holidays), got {json.dumps(name)}", field="calendar.exclude")
    days = calendar.get("business_days", F.CALENDAR_BUSINESS_DAYS.default)
    try:
        business_days(days)
    except InvalidSchedule as exc:
        raise InvalidJob(str(exc), field="calendar.business_days") from None
    return {"exclude": name, "on_excluded": _choice(calendar, F.CALENDAR_ON_EXCLUDED),
            "business_days": days.strip().lower()}


def _retry(doc: dict[str, Any]) -> tuple[int, float, float]:
    """(max_attempts, base_s, cap_s): the retry object, its attempts given there or by the
    deprecated top-level max_attempts, never both (the schema's "not" says the same)."""
    value = doc.get("retry")
    retry = {} if value is None else an_object(value, "retry")
    no_extra(retry, frozenset(f.name for f in F.RETRY_FIELDS), "retry")
    if "max_attempts" in doc:
        if "retry" in doc and (value is None or "max_attempts" in retry):
            raise InvalidJob("give retry.max_attempts or max_attempts (its deprecated "
                             "spelling), not both", field="max_attempts")
        max_attempts = _int(doc, F.MAX_ATTEMPTS)
    else:
        max_attempts = _int(retry, F.RETRY_MAX_ATTEMPTS)
    base = float(seconds(retry, F.RETRY_BASE_S))
    cap = float(seconds(retry, F.RETRY_CAP_S))
    if cap < base:
        # cap_s may be left out: its default is then below the base given
        got = json.dumps(retry["cap_s"]) if "cap_s" in retry else f"its default, {cap:g}"
        raise InvalidJob(f"expected retry.cap_s to be a number ≥ retry.base_s ({base:g}), "
                         f"got {got}", field="retry.cap_s")
    return max_attempts, base, cap


def _delivery_window(value: Any) -> dict[str, Any] | str | None:
    """The window object normalised (timetable/delivery.py reads it), "none", or None."""
    if value is None:
        return None
    if value == OPT_OUT:
        return OPT_OUT
    try:
        return parse_window(value).document()
    except InvalidWindow as exc:
        raise InvalidJob(str(exc), field=exc.field) from None


def _rate_limit(value: Any) -> str | None:
    if value is None:
        return None
    if not matches(value, F.RATE_LIMIT):
        raise InvalidJob("expected rate_limit to be a limit name (lowercase letters, digits, "
                         f"'.', '_' or '-'), got {json.dumps(value)}", field="rate_limit")
    return str(value)


def labels(value: Any) -> dict[str, str]:
    """The labels of a document , checked by the field table's patterns."""
    if value is None:
        return {}
    found = an_object(value, "labels")
    if len(found) > F.MAX_LABELS:
        raise InvalidJob(f"expected at most {F.MAX_LABELS} labels, got {len(found)}",
                         field="labels")
    for key, text in found.items():
        if not F.LABEL_KEY.fullmatch(key):
            raise InvalidJob("expected a label key of 1-63 letters, digits, '_', '.', '-' or "
                             "'/' that begins and ends with a letter or digit, got "
                             f"{json.dumps(key)}", field=f"labels.{key}")
        if not isinstance(text, str) or not F.LABEL_VALUE.fullmatch(text):
            raise InvalidJob(f"expected labels.{key} to be empty or 1-63 letters, digits, "
                             "'_', '.' or '-' that begin and end with a letter or digit, got "
                             f"{json.dumps(text)}", field=f"labels.{key}")
    return dict(sorted(found.items()))


# -- text PostgreSQL can store, and bounded nesting ---------------------------------------

# A document holding a container at a path this long nests deeper than MAX_PAYLOAD_DEPTH in
# one of its fields: the document itself is at path (), a field's value at (name,).
_DEEPEST_PATH = MAX_PAYLOAD_DEPTH


def _storable_text(doc: dict[str, Any]) -> bytes | None:
    """Refuse a document PostgreSQL cannot store, or nested too deeply; return its orjson
    text when that was written on the way (for the payload's size), else None.

    Fast path, one orjson call: orjson refuses lone surrogates and nesting beyond 254
    levels, escapes NUL as ``\\u0000`` (so its absence from the text proves there is none),
    and the nesting depth is at most the number of ``[`` and ``{`` in the text. Only a
    document that this cannot clear is walked, without recursion, to name the bad field.
    """
    try:
        text: bytes | None = orjson.dumps(doc)
    except orjson.JSONEncodeError:
        text = None     # a surrogate, deep nesting, an integer beyond 64 bits: walk it
    if text is not None and b"\\u0000" not in text and (
            text.count(b"[") + text.count(b"{") <= _DEEPEST_PATH + 1
            or _nests_at_most(doc, _DEEPEST_PATH + 1)):
        return text
    for path, value, is_key in _walk(doc):
        if isinstance(value, str):
            _check_text(value, path, is_key)
        elif isinstance(value, dict | list) and len(path) > _DEEPEST_PATH:
            where = _path(path)
            raise InvalidJob(f"{where} is nested too deeply: arrays and objects may nest at "
                             f"most {MAX_PAYLOAD_DEPTH} levels in a field", field=where)
    return text


# Exact types, as JSON parsers make them: a set lookup is several times cheaper per value than
# isinstance with a union, and this runs on every value of a payload with many objects.
_CONTAINERS = frozenset({dict, list})


def _nests_at_most(doc: dict[str, Any], levels: int) -> bool:
    """Whether arrays and objects nest at most ``levels`` deep (``doc`` is the first), one
    level at a time: a payload of many small objects costs a few comprehensions, not a walk
    of every value."""
    level: list[Any] = [doc]
    for _ in range(levels):
        level = [item for container in level
                 for item in (container.values() if isinstance(container, dict) else container)
                 if type(item) in _CONTAINERS]
        if not level:
            return True
    return False


_JsonPath = tuple[str | int, ...]


def _walk(doc: Any) -> Iterator[tuple[_JsonPath, Any, bool]]:
    """(path, value, is_key) of every value and object key, in document order, with an
    explicit stack; the children of a container nested too deeply are not visited (the
    caller refuses the container first)."""
    stack: list[tuple[_JsonPath, Any, bool]] = [((), doc, False)]
    while stack:
        path, value, is_key = stack.pop()
        yield path, value, is_key
        if len(path) > _DEEPEST_PATH:
            continue
        if isinstance(value, dict):
            children: list[tuple[_JsonPath, Any, bool]] = []
            for name, item in value.items():
                children.append(((*path, name), name, True))
                children.append(((*path, name), item, False))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(((*path, index), item, False)
                         for index, item in reversed(list(enumerate(value))))


def _check_text(text: str, path: _JsonPath, is_key: bool) -> None:
    reason = jsontext.unstorable(text)
    if reason is not None:
        where = _path(path)
        raise InvalidJob(f"{_subject(where, is_key)} {reason}", field=where)


def _subject(where: str, is_key: bool) -> str:
    return f"the key {where}" if is_key else where


def _path(path: _JsonPath) -> str:
    """The JSON path as the API names fields ("payload.items.0.to"); a key that cannot be
    written as it is (a NUL, a surrogate) is written with JSON escapes."""
    return ".".join(str(part) if isinstance(part, int) or _plain(part)
                    else json.dumps(part)[1:-1] for part in path)


def _plain(name: str) -> bool:
    return "\0" not in name and (name.isascii() or not any(
        "\ud800" <= char <= "\udfff" for char in name))
