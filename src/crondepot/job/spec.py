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
from dataclasses import dataclass, field
from datetime import UTC, datetime, time
from functools import lru_cache
from typing import Any, Literal

import orjson

from crondepot.base import jsontext
from crondepot.base.errors import InvalidJob, InvalidSchedule
from crondepot.base.vocab import HANDLER_NAME, LIMIT_NAME, PRIORITIES, Overlap, Priority
from crondepot.job import fields as F
from crondepot.job import targets
from crondepot.job.checks import (
    an_object,
    boolean,
    did_you_mean,
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
from crondepot.timetable import Schedule, Timetable, schedule, uses_hash, validate_zone

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
    "replace": "replace: acts as buffer_one for now (a running attempt is not cancelled: "
               "that part of replace is not built yet)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    cron: str | None      # None: an ``at`` job
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
        if self.start_at is not None:
            parts.append(f"from {self.start_at.astimezone(UTC).isoformat()}")
        if self.end_at is not None:
            parts.append(f"until {self.end_at.astimezone(UTC).isoformat()}")
        if self.max_runs is not None:
            parts.append(f"at most {self.max_runs} fire{'s' if self.max_runs > 1 else ''}")
        return ", ".join(parts)

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
    unknown = sorted(set(doc) - DOCUMENT_FIELDS)
    if unknown:
        allowed = ", ".join(sorted(DOCUMENT_FIELDS))
        hint = did_you_mean(str(unknown[0]), DOCUMENT_FIELDS)
        raise InvalidJob(f"unknown field {unknown[0]!r}{hint}; allowed: {allowed}",
                         field=str(unknown[0]))
    key = _optional_str(doc, F.KEY)
    # Present means a value: null is refused here as the schema refuses it (a PATCH resets
    # either with null, and store._patched drops the nulls before the merged document).
    cron = _required_str(doc, F.CRON) if "cron" in doc else None
    if "at" in doc and doc["at"] is None:
        raise InvalidJob("expected at to be an RFC 3339 date-time string, got null",
                         field="at")
    at = _instant(doc, F.AT)
    if (cron is None) == (at is None):
        raise InvalidJob("give cron (a repeating schedule) or at (one run at an instant), "
                         f"{'not both' if cron is not None else 'one of them is required'}",
                         field="at" if cron is not None else "cron")
    tz = _required_str(doc, F.TZ)
    priority = _choice(doc, F.PRIORITY)
    spread_seconds, spread_key = _spread(doc.get("spread"), priority)
    max_attempts, retry_base_s, retry_cap_s = _retry(doc)
    spec = JobSpec(
        key=key, cron=cron, tz=tz, priority=priority,
        target=targets.check(doc.get("target")),
        payload=_payload(doc.get("payload", dict(F.PAYLOAD.default)), text),
        misfire=_misfire(doc.get("misfire")),
        catchup=_choice(doc, F.CATCHUP),
        max_catchup=_int(doc, F.MAX_CATCHUP),
        spread_seconds=spread_seconds, spread_key=spread_key,
        max_attempts=max_attempts, retry_base_s=retry_base_s, retry_cap_s=retry_cap_s,
        lease_seconds=_int(doc, F.LEASE_SECONDS),
        rate_limit=_rate_limit(doc.get("rate_limit")),
        active=boolean(doc, F.ACTIVE),
        at=at, start_at=_instant(doc, F.START_AT), end_at=_instant(doc, F.END_AT),
        max_runs=_optional_int(doc, F.MAX_RUNS),
        labels=labels(doc.get("labels")),
        alert_after_failures=None if doc.get("alert_after_failures") is None
        else _int(doc, F.ALERT_AFTER_FAILURES),
        pause_after_failures=None if doc.get("pause_after_failures") is None
        else _int(doc, F.PAUSE_AFTER_FAILURES),
        overlap=_choice(doc, F.OVERLAP),
    )
    _check_window(spec)
    _check_schedule(spec)
    return spec


LATEST_INSTANT = datetime(9000, 1, 1, tzinfo=UTC)


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


def _optional_int(doc: dict[str, Any], spec: Field) -> int | None:
    return None if doc.get(spec.name) is None else _int(doc, spec)


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
    if not uses_hash(spec.cron) and _schedule_known_valid(spec.cron, spec.tz):
        return
    try:
        validate_zone(spec.tz)
    except InvalidSchedule as exc:
        raise InvalidJob(str(exc), field="tz") from None
    try:
        spec.timetable()
    except InvalidSchedule as exc:
        raise InvalidJob(str(exc), field="tz" if exc.field == "tz" else "cron") from None


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
