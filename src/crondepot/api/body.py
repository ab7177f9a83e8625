"""Reading request bodies: JSON documents and NDJSON files, as plain Python values.

Job documents are parsed here and validated by ``JobSpec.from_document``, not by pydantic:
the domain owns its rules, and the API schemas only describe them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from fastapi import Request

from crondepot.api.problems import Invalid, UnsupportedMedia
from crondepot.base import jsontext

NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-seq")
_NOT_BLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")     # bytes.strip() strips the others
_BREAK = re.compile(rb"[\r\n]")                      # bytes.splitlines() breaks at these


def _media(request: Request, default: str) -> str:
    return request.headers.get("content-type", default).split(";")[0].strip().lower()


async def json_body(request: Request) -> Any:
    """The body parsed as JSON (a dependency); 415 for another media type, 422 if malformed."""
    media = _media(request, "application/json")
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMedia(f"expected Content-Type application/json, got {media}")
    return parse_json(await request.body(), field="body")


async def ndjson_body(request: Request) -> bytearray:
    """The raw NDJSON body (a dependency); lines are parsed one by one by the importer.

    Gathered in one growing buffer, not as ``request.body()`` does (its chunks, then a copy
    joining them), so a body of the import bound (64 MiB) is held once, not twice."""
    media = _media(request, "")
    if media not in NDJSON_TYPES:
        raise UnsupportedMedia(f"expected Content-Type application/x-ndjson, got "
                               f"{media or 'none'}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
    return body


def ndjson_lines(raw: bytes | bytearray) -> Iterator[tuple[int, bytes]]:
    """(number, line) of each line of ``raw`` that is not blank, numbered as
    ``enumerate(raw.splitlines(), start=1)`` numbers them, one at a time."""
    for number, start, end in ndjson_spans(raw):
        yield number, bytes(raw[start:end])


def ndjson_spans(raw: bytes | bytearray) -> Iterator[tuple[int, int, int]]:
    """(number, start, end) of each line of ``raw`` that is not blank, as ``ndjson_lines``
    numbers them: the caller sees a line's length before it copies anything.

    ``splitlines`` would hold one object per line at once: 32 MiB of bare newlines took the
    API from 66 to 355 MB peak. Here blank stretches are skipped by a regex search (in C) and
    counted with ``bytes.count``, so only the non-blank line in hand is ever copied."""
    at, number = 0, 1                       # a position in raw, and the number of its line
    while (found := _NOT_BLANK.search(raw, at)) is not None:
        text_at = found.start()             # raw[at:text_at] is blank: count its breaks
        number += (raw.count(b"\n", at, text_at) + raw.count(b"\r", at, text_at)
                   - raw.count(b"\r\n", at, text_at))
        last_break = max(raw.rfind(b"\n", at, text_at), raw.rfind(b"\r", at, text_at))
        start = at if last_break < 0 else last_break + 1
        end = _BREAK.search(raw, text_at)
        at = len(raw) if end is None else end.start()
        yield number, start, at


def text_params(request: Request) -> None:
    """Refuse a query or path parameter PostgreSQL cannot store (a NUL, ``%00``; see
    ``jsontext.unstorable``), a dependency of every /v1 route: a filter such as
    ``key_prefix`` would otherwise fail in the database, a 500, instead of a 422 naming the
    parameter."""
    for params in (request.path_params, request.query_params):
        for name, value in params.items():
            reason = jsontext.unstorable(value) if isinstance(value, str) else None
            if reason is not None:
                raise Invalid(f"{name} {reason}", field=name)


def parse_json(raw: bytes | str, *, field: str) -> Any:
    if not raw.strip():
        raise Invalid("the body is empty; expected a JSON object", field=field)
    try:
        return jsontext.loads(raw)
    except ValueError as exc:       # UnicodeDecodeError and TooDeep among them
        # a value too deep to parse is named by the member it is under, as validation names
        # a field nested too deeply (at most MAX_PAYLOAD_DEPTH levels)
        named, message = jsontext.refusal(exc, field)
        raise Invalid(message, field=named) from None
