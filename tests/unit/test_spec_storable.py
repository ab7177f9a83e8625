"""Job documents PostgreSQL could not store, or nested too deeply, are refused naming the
field; the orjson fast path and the walk agree at the depth bound."""

from __future__ import annotations

import json
from typing import Any

import pytest

from crondepot.base import jsontext
from crondepot.base.errors import InvalidJob
from crondepot.job.spec import MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, JobSpec

GOOD: dict[str, Any] = {"key": "k", "cron": "0 9 * * *", "tz": "UTC",
                        "target": {"type": "python", "handler": "sms.send"}}


def nest(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


def field_of(doc: dict[str, Any]) -> str:
    with pytest.raises(InvalidJob) as caught:
        JobSpec.from_document(doc)
    assert caught.value.field is not None
    return caught.value.field


@pytest.mark.parametrize("wide", [False, True])
def test_a_payload_nests_at_most_the_bound(wide: bool) -> None:
    # wide: many sibling containers, so the cheap bracket count cannot clear the document
    # and the level-by-level check decides
    extra = {"list": [[i] for i in range(50)]} if wide else {}
    deepest = {"x": nest(MAX_PAYLOAD_DEPTH - 1), **extra}       # payload object + 31 arrays
    assert JobSpec.from_document({**GOOD, "payload": deepest}).payload == deepest
    too_deep = {"x": nest(MAX_PAYLOAD_DEPTH), **extra}
    assert field_of({**GOOD, "payload": too_deep}) == "payload.x" + ".0" * 31


def test_the_walk_names_surrogates_and_nuls_wherever_they_are() -> None:
    assert field_of({**GOOD, "payload": {"a": [{"b": "\ud800"}]}}) == "payload.a.0.b"
    assert field_of({**GOOD, "payload": {"a": "x\x00"}}) == "payload.a"
    assert field_of({**GOOD, "payload": {"\udc00": 1}}) == "payload.\\udc00"
    assert field_of({**GOOD, "key": "\x00"}) == "key"
    assert field_of({**GOOD, "spread": {"key": "\ud800"}}) == "spread.key"
    # a long integer makes orjson refuse the document: the walk still clears it
    big = {"n": 10**30, "s": "é", "pair": "\U0001f600"}
    assert JobSpec.from_document({**GOOD, "payload": big}).payload == big


def test_a_backslash_u0000_spelled_out_is_text_not_a_nul() -> None:
    text = {"t": "\\u0000 and [[[["}
    assert JobSpec.from_document({**GOOD, "payload": text}).payload == text


@pytest.mark.parametrize("raw", [b"[" * 100_000 + b"]" * 100_000,
                                 "[" * 5_000 + "]" * 5_000,           # str: json only
                                 b'{"n": 12345678901234567890, "p": ' + b"[" * 5000])
def test_text_nested_beyond_the_parsers_is_a_value_error(raw: bytes | str) -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        jsontext.loads(raw)


def test_too_deep_names_the_top_level_member_when_it_can() -> None:
    deep = '{"key": "a:b", "payload": {"x": ' + "[" * 5000 + "]" * 5000 + "}}"
    with pytest.raises(jsontext.TooDeep) as caught:
        jsontext.loads(deep.encode())
    assert caught.value.member == "payload"
    with pytest.raises(jsontext.TooDeep) as caught:
        jsontext.loads(json.dumps({"we ird": 1})[:-1] + ', "a b": ' + "[" * 5000)
    assert caught.value.member is None          # not a plain field name: not echoed


# -- the payload's size as PostgreSQL measures it: octet_length(payload::text) --------------

def test_a_payload_of_numbers_postgresql_writes_long_is_refused() -> None:
    # 427 bytes of compact JSON; PostgreSQL writes each 1e+300 as "1" and 300 zeros
    payload = {"a": [1e300] * 60}
    assert len(jsontext.dumps(payload)) == 427            # as compact JSON
    assert jsontext.stored_size(payload) == 18187
    with pytest.raises(InvalidJob, match=r"payload is 18187 bytes .* at most 16384") as caught:
        JobSpec.from_document({**GOOD, "payload": payload})
    assert caught.value.field == "payload"
    # in an import line, read from text (the orjson text of the document has the exponents)
    line = json.dumps({**GOOD, "payload": payload}).encode()
    with pytest.raises(InvalidJob) as caught:
        JobSpec.from_document(jsontext.loads(line))
    assert caught.value.field == "payload"


@pytest.mark.parametrize("filler", [
    lambda n: {"t": "x" * n},                                  # separators only
    lambda n: {"t": "é" * (n // 2) + "x" * (n % 2), "n": -0.0, "f": [1e-7, 1.5e1]},
    lambda n: {"big": 10**40, "t": "\n" * (n // 2) + "x" * (n % 2), "e": 2.5e20},
])
def test_a_payload_at_the_stored_limit_is_taken_and_one_byte_more_refused(filler: Any) -> None:
    def sized(size: int) -> dict[str, Any]:
        start = jsontext.stored_size(filler(0))
        payload = filler(size - start)
        assert jsontext.stored_size(payload) == size
        return payload

    at_limit = sized(MAX_PAYLOAD_BYTES)
    assert JobSpec.from_document({**GOOD, "payload": at_limit}).payload == at_limit
    over = sized(MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(InvalidJob, match=f"payload is {MAX_PAYLOAD_BYTES + 1} bytes") as caught:
        JobSpec.from_document({**GOOD, "payload": over})
    assert caught.value.field == "payload"
