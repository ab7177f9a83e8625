"""Properties of crondepot.base.jsontext against the standard library, on any JSON value, and of
the size it says PostgreSQL stores against a real server."""

from __future__ import annotations

import json
from typing import Any

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg.types.json import Jsonb

from crondepot.base import jsontext

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


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_dumps_is_the_same_value(value: Any) -> None:
    assert json.loads(jsontext.dumps(value)) == value


# -- the size PostgreSQL measures (octet_length(payload::text) in the jobs table's CHECK) --

_STORABLE_TEXT = st.text(st.characters(blacklist_categories=("Cs",),
                                       blacklist_characters="\x00"), max_size=12)
_STORED_SCALARS = (st.none() | st.booleans() | _STORABLE_TEXT
                   | st.sampled_from(["\x01\x1f\x7f\b\f\n\r\t\"\\/", "é€\U0001f600\u2028",
                                      ", : {} []", "1e300"])
                   | st.integers(min_value=-(2**70), max_value=2**70)
                   | st.sampled_from([2**64, -(2**63) - 1, 10**400, -(10**60)])
                   | st.floats(allow_nan=False, allow_infinity=False)
                   | st.sampled_from([1e300, 1e-7, -0.0, 0.0, 5e-324, 1.7976931348623157e308,
                                      -1e-300, 1e-05, 15.0, 1e16, 1e15, 1.2345678901234567e20,
                                      -2.5e-10]))
STORED_VALUES = st.recursive(
    _STORED_SCALARS, lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(_STORABLE_TEXT, inner, max_size=5), max_leaves=40)


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(STORED_VALUES)
def test_stored_size_is_what_postgresql_measures(conn: psycopg.Connection[Any],
                                                  value: Any) -> None:
    # as crondepot sends a job's payload (Jsonb with jsontext.dumps), and as psycopg's default
    # dumper (json.dumps, floats spelled by repr) sends it: PostgreSQL stores the same text
    row = conn.execute("SELECT octet_length(%s::jsonb::text), octet_length(%s::jsonb::text)",
                       (Jsonb(value, jsontext.dumps), Jsonb(value))).fetchone()
    assert row is not None
    assert jsontext.stored_size(value) == row[0] == row[1]


@settings(max_examples=300, deadline=None)
@given(STORED_VALUES, st.integers(min_value=0, max_value=400))
def test_stored_size_at_most_agrees_with_the_exact_size(value: Any, limit: int) -> None:
    assert jsontext.stored_size_at_most(value, limit) == (jsontext.stored_size(value) <= limit)
    bound = jsontext.stored_size_bound(jsontext.dumps(value))
    assert bound is None or jsontext.stored_size(value) <= bound
