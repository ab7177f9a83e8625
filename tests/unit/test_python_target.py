"""The python target's document: a handler, and optionally a timeout and ``dedupes``."""

from __future__ import annotations

from typing import Any

import pytest

from crondepot.base.errors import InvalidJob
from crondepot.job.spec import JobSpec


def _doc(**target: Any) -> dict[str, Any]:
    return {"cron": "0 9 * * *", "tz": "UTC",
            "target": {"type": "python", "handler": "sms.send", **target}}


def test_a_handler_alone_is_stored_as_it_always_was() -> None:
    assert JobSpec.from_document(_doc()).target == {"type": "python", "handler": "sms.send"}


def test_a_timeout_and_dedupes_are_kept() -> None:
    target = JobSpec.from_document(_doc(timeout_s=2.5, dedupes=True)).target
    assert target == {"type": "python", "handler": "sms.send", "timeout_s": 2.5,
                      "dedupes": True}
    assert JobSpec.from_document(_doc(timeout_s=None)).target == {
        "type": "python", "handler": "sms.send"}


@pytest.mark.parametrize(("target", "field", "words"), [
    ({"timeout_s": 0}, "target.timeout_s", "above 0"),
    ({"timeout_s": -1}, "target.timeout_s", "above 0"),
    ({"timeout_s": 43_201}, "target.timeout_s", "at most 43200"),
    ({"timeout_s": True}, "target.timeout_s", "got true"),
    ({"timeout_s": "30"}, "target.timeout_s", 'got "30"'),
    ({"dedupes": "yes"}, "target.dedupes", "true or false"),
    ({"url": "https://x.example"}, "target.url", "unknown"),
])
def test_a_bad_timeout_or_dedupes_is_refused_naming_the_field(
        target: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(InvalidJob) as caught:
        JobSpec.from_document(_doc(**target))
    assert caught.value.field == field
    assert words in str(caught.value)
