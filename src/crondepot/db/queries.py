"""Named SQL queries, loaded once from ``db/sql/queries/*.sql``.

Runtime code never builds SQL from strings: it asks for a query by name. A file holds
several queries, each introduced by a ``-- name: <identifier>`` line followed by comment
lines that say what it is for (and, where its shape matters, why it is shaped that way).
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


class _Queries:
    """Attribute access to the named queries: ``Q.claim_due_jobs``."""

    def __init__(self, queries: dict[str, str]) -> None:
        self._queries = queries

    def __getattr__(self, name: str) -> str:
        try:
            return self._queries[name]
        except KeyError:
            raise AttributeError(f"no SQL query named {name!r}") from None

    def names(self) -> list[str]:
        return sorted(self._queries)


def parse_queries(text: str, *, source: str) -> dict[str, str]:
    """Split one .sql file into its named queries; a name given twice is an error."""
    parts = _HEADER.split(text)
    queries: dict[str, str] = {}
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{source}: query {name!r} is defined twice")
        sql = body.strip()
        if not sql:
            raise ValueError(f"{source}: query {name!r} is empty")
        queries[name] = sql
    return queries


@cache
def load() -> _Queries:
    folder = resources.files("crondepot.db") / "sql" / "queries"
    queries: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        for name, sql in parse_queries(entry.read_text(), source=entry.name).items():
            if name in queries:
                raise ValueError(f"{entry.name}: query {name!r} is defined in two files")
            queries[name] = sql
    return _Queries(queries)


Q = load()
