"""Request integers: ASCII digits only, within bigint, never an int() of thousands of digits."""

from __future__ import annotations

import pytest

from crondepot.api.params import MAX_BIGINT, bigint_or_none


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0), ("7", 7), ("007", 7), (str(MAX_BIGINT), MAX_BIGINT), ("0" * 5000, 0),
    ("0" * 5000 + "42", 42),
    (str(MAX_BIGINT + 1), None), ("9" * 5000, None), ("", None), ("²", None), ("١", None),
    ("１２", None), ("-1", None), ("+1", None), (" 1", None), ("1_000", None), ("1e3", None),
])
def test_bigint_or_none(text: str, value: int | None) -> None:
    assert bigint_or_none(text) == value
