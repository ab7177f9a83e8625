"""Properties of crondepot.jsontext against the standard library, on any JSON value."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from crondepot import jsontext

_SCALARS = (st.none() | st.booleans() | st.text(max_size=20)
            | st.integers(min_value=-(2**80), max_value=2**80)
            | st.floats(allow_nan=False, allow_infinity=False)
            | st.sampled_from([1e-05, 1e16, 1e-300, 1.7976931348623157e308, -0.0]))
VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=5)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=5), max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_loads_reads_any_json_text_as_the_standard_library_does(value: Any) -> None:
    for raw in (json.dumps(value), json.dumps(value, separators=(",", ":"), indent=1)):
        read, expected = jsontext.loads(raw.encode()), json.loads(raw)
        # json.dumps tells 1 from 1.0 and -0.0 from 0.0, and keeps the keys' order
        assert json.dumps(read) == json.dumps(expected)


@settings(max_examples=400, deadline=None)
@given(VALUES | st.floats(allow_nan=True, allow_infinity=True))
def test_orjson_text_is_never_less_than_a_quarter_of_the_standard_librarys(value: Any) -> None:
    try:
        fast = len(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return          # measured by the standard library alone
    assert jsontext.compact_size(value) <= jsontext.SPELLING_RATIO * fast


@settings(max_examples=300, deadline=None)
@given(VALUES, st.integers(min_value=0, max_value=400))
def test_compact_size_at_most_agrees_with_the_exact_size(value: Any, limit: int) -> None:
    assert jsontext.compact_size_at_most(value, limit) == (jsontext.compact_size(value) <= limit)


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_dumps_is_the_same_value(value: Any) -> None:
    assert json.loads(jsontext.dumps(value)) == value
