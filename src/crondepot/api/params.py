"""Request parameters as values SQL can take: integers within bigint, digits in ASCII only.

A number read from a query, path, header or body reaches PostgreSQL as a ``bigint``; one
beyond it fails in the driver (a 500), and ``str.isdigit()`` is true of "²" and "١", which
``int()`` then refuses or reads. Everything here answers a 422 naming the parameter instead.
It must never touch the database.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated

from pydantic import BeforeValidator

from crondepot.api.problems import Invalid
from crondepot.base import jsontext

MAX_BIGINT = 2**63 - 1
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _not_a_number(value: object) -> object:
    """pydantic reads a number, or a string of one, as a Unix time ("0.5" is 1970-01-01);
    an instant here is an RFC 3339 date-time, as the OpenAPI document says."""
    if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("expected an RFC 3339 date-time, like 2026-12-01T09:00:00Z")
    return value


# A date-time in a query or a body: RFC 3339 only, never a Unix time.
Instant = Annotated[datetime, BeforeValidator(_not_a_number)]


def ascii_digits(text: str) -> bool:
    """True if ``text`` is one or more of 0-9 (``"²".isdigit()`` is True; this is not)."""
    return text.isascii() and text.isdigit()


def bigint_or_none(text: str) -> int | None:
    """The number ``text`` spells in ASCII digits if it is at most ``MAX_BIGINT``, else None
    (converts at most 19 digits: ``int()`` refuses over 4,300, leading zeros included)."""
    digits = text.lstrip("0")
    if not ascii_digits(text) or len(digits) > len(str(MAX_BIGINT)):
        return None
    value = int(digits or "0")
    return value if value <= MAX_BIGINT else None


def bigint(text: str, *, field: str, expected: str) -> int:
    """``bigint_or_none`` of ``text``, or a 422 naming ``field`` ("expected <expected>")."""
    value = bigint_or_none(text)
    if value is None:
        raise Invalid(f"expected {field} to be {expected}, got {_quoted(text)}", field=field)
    return value


def unstorable_param(params: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    """(name, "<name> <why>") of the first parameter whose name or value PostgreSQL
    cannot store (a NUL or a lone surrogate, ``jsontext.unstorable``), or None."""
    for name, value in params:
        reason = jsontext.unstorable(name) or jsontext.unstorable(value)
        if reason is not None:
            shown = name if jsontext.unstorable(name) is None else "a parameter name"
            return shown, f"{shown} {reason}"
    return None


def window(since: datetime | None, until: datetime | None) -> None:
    """A 422 naming ``since`` if it is after ``until`` (a window that ends before it
    starts matches nothing and is a mistake)."""
    if since is not None and until is not None and _comparable(since) > _comparable(until):
        raise Invalid(f"since ({since.isoformat()}) is after until ({until.isoformat()})",
                      field="since")


def _comparable(value: datetime) -> datetime:
    # a naive value is read as UTC (only to compare it with an aware one)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _quoted(text: str) -> str:
    return json.dumps(text[:40] + ("…" if len(text) > 40 else ""))
