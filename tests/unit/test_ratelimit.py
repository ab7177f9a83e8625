"""Rate strings and token batches (pure)."""

from __future__ import annotations

import pytest

from crondepot.limits.buckets import InvalidLimit, batch_size, parse_rate


@pytest.mark.parametrize(("text", "rate"), [("450/s", 450.0), ("600/m", 10.0),
                                            ("2.5/sec", 2.5), (" 30 / minute ", 0.5)])
def test_rates_per_second_or_minute(text: str, rate: float) -> None:
    assert parse_rate(text) == rate


@pytest.mark.parametrize("text", ["fast", "0/s", "-1/s", "450", "450/h", "/s", ""])
def test_bad_rates_say_what_is_expected(text: str) -> None:
    with pytest.raises(InvalidLimit, match="450/s"):
        parse_rate(text)


def test_batches_are_about_20_ms_of_tokens_between_1_and_20() -> None:
    assert [batch_size(r) for r in (0.2, 50, 450, 5000)] == [1, 1, 9, 20]
