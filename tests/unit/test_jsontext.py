"""Reading job documents with orjson never changes a value or an error message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crondepot.base import jsontext
from crondepot.base.errors import InvalidJob
from crondepot.job.spec import MAX_PAYLOAD_BYTES, JobSpec


def _outcome(raw: bytes | str) -> tuple[str, Any]:
    """What the standard library made of ``raw`` before orjson: ('ok', value) or the error."""
    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return "ok", json.loads(raw, parse_constant=no_constant)
    except ValueError as exc:
        return type(exc).__name__, str(exc)


def _jsontext(raw: bytes | str) -> tuple[str, Any]:
    try:
        return "ok", jsontext.loads(raw)
    except ValueError as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("raw", [
    b'{"account": 123456789012345678901234567890}',       # beyond 64 bits: orjson -> float
    b'{"account": -9223372036854775809}',                  # just below int64
    b'{"account": 18446744073709551616}',                  # just above uint64
    b'{"account": 18446744073709551615, "b": -9223372036854775808}',   # the edges themselves
    b'{"n": 999999999999999999}',                          # 18 digits: orjson reads it
    b'{"n": NaN}', b'{"n": -Infinity}',
    b'\xef\xbb\xbf{"a": 1}',                               # a UTF-8 byte order mark
    b'{"a": "\\ud800"}',                                   # a lone surrogate escape
    b'{"a": "\xff"}', b'{"a": 1,}', b"{", b"[1, 2", b'"text"', b"12", b"null",
    '{"a": "ünïcode", "b": 12345678901234567890123}',      # str input
    b'{"a": 1.5e-7, "b": 1e16, "c": -0.0, "d": 0.1, "e": [true, false, null]}',
])
def test_loads_gives_what_the_standard_library_gives(raw: bytes | str) -> None:
    assert _jsontext(raw) == _outcome(raw)


@pytest.mark.parametrize("raw", [b'{"n": 1e400}', b'{"n": -1e400}', '{"n": [1E999]}'])
def test_a_number_beyond_a_double_is_refused_not_read_as_infinity(raw: bytes | str) -> None:
    with pytest.raises(ValueError, match="too large for a JSON number"):
        jsontext.loads(raw)


@pytest.mark.parametrize("raw", [
    b'{"account": 123456789012345678901234567890}', b'{"n": 18446744073709551616}',
    b'{"n": 1e400}', b'{"a": "\\ud800"}', b'{"a": 1, "a": 2}', b'{"to": "+15550100"}',
    b'{"a": 1.5e-7, "b": 1e16, "c": -0.0, "d": 0.1, "e": [true, false, null], "f": "\xc3\xa9"}',
    '{"a": "str input"}',
])
def test_stored_documents_read_as_the_default_loader_reads_them(raw: bytes | str) -> None:
    # What psycopg's default loader (json.loads) gives for json/jsonb from the database:
    # the worker's faster reader must give the same, 1e400 and lone surrogates included.
    assert jsontext.loads_stored(raw) == json.loads(raw)


def test_a_long_integer_keeps_every_digit() -> None:
    value = jsontext.loads(b'{"account": 123456789012345678901234567890}')
    assert value == {"account": 123456789012345678901234567890}
    assert isinstance(value["account"], int)


def test_dumps_writes_long_integers_exactly() -> None:
    value = {"account": 123456789012345678901234567890, "text": "\u00e9"}
    assert json.loads(jsontext.dumps(value)) == value


def test_a_payload_of_exactly_the_limit_is_taken_and_one_byte_more_refused() -> None:
    base = {"key": "k", "cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "sms.send"}}
    padding = MAX_PAYLOAD_BYTES - jsontext.stored_size({"t": ""})
    assert JobSpec.from_document({**base, "payload": {"t": "x" * padding}})
    with pytest.raises(InvalidJob, match=f"payload is {MAX_PAYLOAD_BYTES + 1} bytes") as exc:
        JobSpec.from_document({**base, "payload": {"t": "x" * (padding + 1)}})
    assert exc.value.field == "payload"


def test_payload_size_is_what_postgresql_stores_whoever_spelt_the_float() -> None:
    # 1e-05 is "1e-05" in the standard library's text and "0.00001" in PostgreSQL's: the
    # limit counts PostgreSQL's bytes (", " and the numbers written out).
    floats = {"f": [1e-05] * 2000}
    size = jsontext.stored_size(floats)
    assert size == len('{"f": []}') + 2000 * len("0.00001") + 1999 * len(", ")
    assert jsontext.stored_size_at_most(floats, size)
    assert not jsontext.stored_size_at_most(floats, size - 1)


def test_storable_writes_what_postgresql_takes_and_says_why_not() -> None:
    from datetime import UTC, datetime

    assert jsontext.storable({"n": 2**70, "s": "Zoë"}) == (
        '{"n":1180591620717411303424,"s":"Zoë"}'.encode())
    assert jsontext.storable({"at": datetime(2026, 1, 1, tzinfo=UTC)}) == (
        b'{"at":"2026-01-01T00:00:00+00:00"}')
    assert jsontext.storable({"nan": float("nan")}) == b'{"nan":null}'      # orjson's reading
    assert jsontext.storable("C:\\u0000") == b'"C:\\\\u0000"'              # not a NUL
    for value, reason in [({1, 2}, "not JSON serializable"),
                          ({"big": 2**70, "nan": float("nan")}, "Out of range float"),
                          ("a\x00b", "NUL character"), ("\udc80", "surrogate"),
                          ({"k": object()}, "not JSON serializable")]:
        with pytest.raises(ValueError, match=reason):
            jsontext.storable(value)
