"""NDJSON bodies are split one line at a time, numbered as ``bytes.splitlines`` numbers them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from crondepot.api.body import ndjson_lines


def reference(raw: bytes) -> list[tuple[int, bytes]]:
    """How the importer split bodies before: every line held at once, blank ones skipped."""
    return [(n, line) for n, line in enumerate(raw.splitlines(), start=1) if line.strip()]


@given(st.lists(st.sampled_from([b"\n", b"\r", b"\r\n", b" ", b"\t", b"\x0b", b"\x0c", b"{}",
                                 b"a", b'{"k": 1}', b"\x85", b"\xe2\x80\xa8"]), max_size=40))
def test_lines_and_numbers_are_those_of_splitlines(parts: list[bytes]) -> None:
    raw = b"".join(parts)
    assert list(ndjson_lines(raw)) == reference(raw)


def test_blank_stretches_are_skipped_and_counted() -> None:
    raw = b"\n" * 1000 + b"{}\r\n\r\n \t\n" + b"x" + b"\r" * 3 + b"y"
    assert list(ndjson_lines(raw)) == [(1001, b"{}"), (1004, b"x"), (1007, b"y")]
    assert list(ndjson_lines(b"")) == [] and list(ndjson_lines(b"\n \n")) == []
