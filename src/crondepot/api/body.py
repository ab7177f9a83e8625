"""Reading request bodies: JSON documents and NDJSON files, as plain Python values.

Job documents are parsed here and validated by ``JobSpec.from_document``, not by pydantic:
the domain owns its rules, and the API schemas only describe them.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from crondepot import jsontext
from crondepot.api.problems import Invalid, UnsupportedMedia

NDJSON_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-seq")


def _media(request: Request, default: str) -> str:
    return request.headers.get("content-type", default).split(";")[0].strip().lower()


async def json_body(request: Request) -> Any:
    """The body parsed as JSON (a dependency); 415 for another media type, 422 if malformed."""
    media = _media(request, "application/json")
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMedia(f"expected Content-Type application/json, got {media}")
    return parse_json(await request.body(), field="body")


async def ndjson_body(request: Request) -> bytes:
    """The raw NDJSON body (a dependency); lines are parsed one by one by the importer."""
    media = _media(request, "")
    if media not in NDJSON_TYPES:
        raise UnsupportedMedia(f"expected Content-Type application/x-ndjson, got "
                               f"{media or 'none'}")
    return await request.body()


def parse_json(raw: bytes | str, *, field: str) -> Any:
    if not raw.strip():
        raise Invalid("the body is empty; expected a JSON object", field=field)
    try:
        return jsontext.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Invalid(f"malformed JSON: {exc}", field=field) from None
