"""JSON text of job documents: read and written fast where that is exact, by the standard
library where it is not.

An import reads millions of lines, and the standard library's ``json`` was a quarter of the
API's CPU per line; ``orjson`` does the same in a fraction of it. It differs in three ways
that must not leak out, so each falls back to the standard library:

- it turns an integer beyond 64 bits into a float (a 20-digit account number would change on
  the way in): a line with a run of 19 or more digits is read by ``json``;
- it refuses what ``json`` takes (a UTF-8 byte order mark, a lone surrogate) and
  words its errors its own way: any line it refuses is read again by ``json``, so the result
  or the error message is exactly what it was before ``orjson``;
- it cannot write integers beyond 64 bits or lone surrogates: those values are written by
  ``json``.

Nesting is where both stop: orjson reads at most 1,024 levels of arrays and objects, and
``json`` recurses once per level until RecursionError (about 1,000). Text nested deeper is
refused with a ``ValueError`` like any other malformed JSON; the bound on what a job may
nest (``MAX_PAYLOAD_DEPTH``) is far lower and is checked on the value.

This module never validates a document; ``JobSpec.from_document`` does.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal
from typing import Any

import orjson

# Every ASCII digit becomes "0", every other byte a space: a run of 19 zeros after the
# translation is a run of 19 digits before it. Any integer that fits in 64 bits, the
# range orjson reads exactly, has at most 20 digits, and any with at most 18 fits; a run
# of 19 or more (in a string too: that only costs the slower read) goes to ``json``.
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_NUMBER = b"0" * 19


def loads(raw: bytes | str) -> Any:
    """``json.loads(raw)`` that refuses NaN and Infinity; raises ``ValueError`` (a
    ``json.JSONDecodeError`` or ``UnicodeDecodeError``) exactly as the standard library
    does, or ``TooDeep``."""
    value = _read_exact(raw)
    if value is not _UNREAD:
        return value
    try:
        return json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        # json's C scanner counts its recursion and raises cleanly: the stack is unwound
        # here, and a line of an import is refused like any other malformed line.
        raise TooDeep(raw) from None


def loads_stored(raw: str | bytes) -> Any:
    """A document PostgreSQL stored (json or jsonb): read by ``orjson`` where that is exact,
    by ``json`` otherwise, with the standard library's results, as psycopg's default loader
    gives them. Nothing is refused here that the default loader would read."""
    value = _read_exact(raw)
    return json.loads(raw) if value is _UNREAD else value


_UNREAD = object()


def _read_exact(raw: bytes | str) -> Any:
    """``orjson``'s reading of ``raw`` where it is the standard library's, else ``_UNREAD``:
    text with a run of 19 or more digits, and text orjson refuses (the standard library
    then gives its own result or error message). Text nested beyond orjson's limit raises
    ``TooDeep``: json would only recurse until it fails."""
    if isinstance(raw, bytes) and _LONG_NUMBER not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if str(exc).startswith("depth limit exceeded"):
                raise TooDeep(raw) from None
    return _UNREAD


def refusal(exc: ValueError, whole: str) -> tuple[str, str]:
    """(field, message) for text ``loads`` refused: the top-level member a value too deep
    to read is under, when the text shows it, else ``whole`` (the body, the line)."""
    if isinstance(exc, TooDeep) and exc.member is not None:
        return exc.member, f"{exc.member}: {exc}"
    return whole, f"malformed JSON: {exc}"


class TooDeep(ValueError):
    """JSON text nested deeper than the parsers read. ``member`` is the top-level object
    member the deep nesting is under ("payload"), when the text shows it, so the error can
    name the field."""

    def __init__(self, raw: bytes | str) -> None:
        super().__init__("arrays and objects nested too deeply to read (about 1,000 levels "
                         "or more)")
        self.member = _deep_member(raw)


# Strings (with their escapes), brackets and colons: enough of JSON's tokens to follow the
# nesting and the top-level keys without parsing, in C (re), never recursing.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]')
_MEMBER = re.compile(r"[A-Za-z0-9_.-]{1,64}")     # the job document's field names and more
_DEEP = 900       # below where either parser gives up, so the scan reaches it


def _deep_member(raw: bytes | str) -> str | None:
    """The top-level member whose value nests deeper than ``_DEEP`` levels, or None (the
    text is not an object, the key is no plain name, or the scan does not find it).
    Only called for text a parser refused as too deep, so the scan is rare; it stops at
    the first level beyond ``_DEEP``."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    depth = 0
    member: str | None = None
    last: str | None = None
    for token in _TOKENS.finditer(text):
        mark = token.group()
        if mark in ("[", "{"):
            depth += 1
            if depth > _DEEP:
                return member if member is not None and _MEMBER.fullmatch(member) else None
        elif mark in ("]", "}"):
            depth -= 1
        elif mark == ":":
            if depth == 1 and last is not None:
                member = last
        elif depth == 1:
            last = mark[1:-1]      # a string at the top level: a key if a colon follows
    return None


# The part of unstorable's rule (below) that a JSON Schema pattern can spell, in syntax that
# ECMA-262 and Python's re read alike: no NUL. A lone surrogate is refused too, but no
# portable pattern says it.
NOT_NUL = "[^\\u0000]"
NO_NUL = f"^{NOT_NUL}*$"


def people_text(value: object, max_chars: int) -> str | None:
    """What is wrong with ``value`` as free text for people (a token's label, a pause
    note): text of 1 to ``max_chars`` characters, not only spaces, no control character,
    storable; None if nothing is."""
    if not isinstance(value, str):
        return f"expected text, got {type(value).__name__}"
    if not value.strip() or len(value) > max_chars:
        return f"expected 1 to {max_chars} characters, not only spaces, got {len(value)}"
    if any(ch < " " or ch == "\x7f" for ch in value) or unstorable(value):
        return "control characters and lone surrogates are not allowed"
    return None


def unstorable(text: str) -> str | None:
    """Why PostgreSQL cannot store ``text`` (in a text column or in jsonb), or None: a NUL
    character, or a lone UTF-16 surrogate (JSON can spell one, ``"\\ud800"``, and Python's
    ``json`` reads it). Either would fail in the driver or the server: a 500, not a 422."""
    if "\0" in text:
        return "contains a NUL character (\\u0000), which PostgreSQL cannot store"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (f"contains a lone UTF-16 surrogate (\\u{ord(text[exc.start]):04x}): "
                    "not valid Unicode text")
    return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    # json reads 1e400 as inf, which no JSON writer can store faithfully (orjson writes
    # null, json writes Infinity and PostgreSQL refuses the whole batch): refuse the line.
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is too large for a JSON number (beyond a double)")
    return value


def dumps(value: Any) -> bytes:
    """Compact JSON as UTF-8 bytes (for psycopg's jsonb dumper): the same value as
    ``json.dumps`` writes, though a float may be spelled differently (``1e-05`` or
    ``0.00001``); PostgreSQL reads both as the same number."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


# A JSON escape of NUL that is not itself an escaped backslash followed by "u0000".
_NUL_ESCAPE = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def storable(value: Any) -> bytes:
    """JSON text of ``value`` that PostgreSQL will take as jsonb, or ``ValueError`` saying
    why there is none: a value JSON cannot write (an object of a type neither writer knows,
    nesting beyond their limits, NaN where an integer beyond 64 bits sends the value to
    ``json``; orjson itself writes NaN as null), a NUL character or a lone surrogate.
    For values that did not come through a validated document (a handler's result): one
    such value must not fail a statement that records others with it."""
    try:
        return _without_nul(orjson.dumps(value))
    except orjson.JSONEncodeError:
        pass
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        return _without_nul(text.encode())
    except (TypeError, ValueError, RecursionError) as exc:   # UnicodeEncodeError included
        raise ValueError(f"not storable as JSON: {exc}") from None


def _without_nul(text: bytes) -> bytes:
    if _NUL_ESCAPE.search(text):
        raise ValueError("not storable as JSON: contains a NUL character (\\u0000), which "
                         "PostgreSQL cannot store")
    return text


# -- the size PostgreSQL measures -------------------------------------------------------
#
# The jobs table checks ``octet_length(payload::text)``: the bytes of jsonb's text output,
# not of the text crondepot sent. PostgreSQL reads the text into jsonb and writes it again:
# - ", " between the members of an object or the items of an array and ": " after a key,
#   where the compact text has "," and ":" (one byte more for each);
# - every number as the ``numeric`` it was read into prints: never with an exponent, with
#   as many decimals as the text implied (``1e300`` is "1" and 300 zeros, ``1e-7`` is
#   "0.0000001", ``1.50e1`` is "15.0", ``1.2345678901234567e+20`` is
#   "123456789012345670000"), and without the sign of a zero (``-0.0`` is "0.0");
# - strings escaped as its ``escape_json`` does: \" \\ \b \f \n \r \t, any other character
#   below U+0020 as \u00XX, everything else as raw UTF-8. orjson and json (ensure_ascii off)
#   escape exactly these, so a string takes as many bytes in their text as in PostgreSQL's.
# Both writers spell a float with the same shortest digits and the same last decimal place
# (``1e-05`` against ``0.00001``), so PostgreSQL stores the same text whichever wrote it.
# tests/property/test_jsontext_properties.py checks all this against a real server.

# A JSON string in a writer's text (no raw newline can be in one: they are escaped).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
# Every digit becomes "0" and "E" becomes "e": "0e" in the translation is a digit before an
# "e", where a number has its exponent (or a string has "2e": that only costs the exact
# measurement).
_NUMBER_MARKS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x65 if b in (0x45, 0x65) else b
                      for b in range(256))
# Outside strings, the punctuation becomes spaces: what is left between spaces is a number,
# true, false or null.
_TOKENS_ONLY = bytes(0x20 if b in b",:[]{}" else b for b in range(256))
_NUMBER_START = frozenset(b"-0123456789")


def stored_size(value: Any) -> int:
    """``octet_length(v::jsonb::text)`` for ``value`` sent as ``dumps`` writes it: the bytes
    of PostgreSQL's text output of the jsonb, in UTF-8 (what the jobs table's CHECK on the
    payload measures)."""
    return stored_text_size(dumps(value))


def stored_text_size(text: bytes) -> int:
    """``octet_length(text::jsonb::text)`` for compact JSON ``text`` as ``dumps`` writes it
    (no whitespace between tokens)."""
    rest = _outside_strings(text)
    size = len(text) + rest.count(b",") + rest.count(b":")
    if b"0e" in rest.translate(_NUMBER_MARKS) or b"-0" in rest:
        # Only a number with an exponent or a minus before a zero integer part (it may be a
        # negative zero) is written otherwise: JSON has no leading zeros, a writer no
        # trailing ones beyond "1.0"'s, which numeric keeps.
        for token in rest.translate(_TOKENS_ONLY).split():
            if token[0] in _NUMBER_START and (
                    b"e" in token or b"E" in token or token.startswith(b"-0")):
                size += _numeric_length(token) - len(token)
    return size


def stored_size_bound(text: bytes) -> int | None:
    """An upper bound of ``stored_text_size(text)`` found without reading the strings or the
    numbers, or None where the text may hold a number with an exponent (which PostgreSQL may
    write hundreds of bytes longer). Without one, a number is never longer in PostgreSQL's
    text (only a negative zero changes, shorter), and each "," or ":" costs one byte more; a
    "," or ":" in a string only makes the bound larger."""
    if b"0e" in text.translate(_NUMBER_MARKS):
        return None
    return len(text) + text.count(b",") + text.count(b":")


def stored_size_at_most(value: Any, limit: int) -> bool:
    """Whether ``stored_size(value) <= limit``, mostly without reading the strings and the
    numbers: a text with no exponent whose bound fits, fits; any other is measured
    exactly."""
    text = dumps(value)
    bound = stored_size_bound(text)
    if bound is not None and bound <= limit:
        return True
    return stored_text_size(text) <= limit


def _outside_strings(text: bytes) -> bytes:
    """``text`` without its strings. No byte of a multi-byte UTF-8 character is ASCII, so a
    '"' byte always delimits a string unless a backslash escapes it."""
    if b"\\" not in text:
        return b"".join(text.split(b'"')[::2])
    return _STRING.sub(b"", text)


def _numeric_length(number: bytes) -> int:
    """The length of the JSON number as PostgreSQL's ``numeric_out`` prints it: the decimal
    value with as many decimals as the text gave less its exponent (``1.50e1`` is "15.0"),
    never an exponent (``1e300`` is "1" and 300 zeros), no sign on zero (``-0.0`` is
    "0.0")."""
    value = Decimal(number.decode("ascii"))
    sign, _, exponent = value.as_tuple()
    assert isinstance(exponent, int)           # a JSON number is finite
    decimals = max(0, -exponent)
    if value.is_zero():
        whole, sign = 1, 0
    else:
        whole = max(1, value.adjusted() + 1)
    return sign + whole + (1 + decimals if decimals else 0)
