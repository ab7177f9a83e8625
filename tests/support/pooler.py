"""The API under test, directly or with its request pool behind a private PgBouncer in
transaction mode (``crondepot api --pooled-db``).

``CRONDEPOT_TEST_API_POOLER=1`` puts every app that the API tests build with ``api_app``
behind one PgBouncer per test process (deploy/pgbouncer/pgbouncer.ini, started on first use,
stopped at exit), as the URL's own role: the whole of ``tests/api`` then runs through it.
Where a pooler cannot sit (the embedded PostgreSQL, reached through a Unix socket; no
pgbouncer installed) those tests are skipped, naming why.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

import pytest
from fastapi import FastAPI
from psycopg.conninfo import conninfo_to_dict

from crondepot.api import ApiSettings, create_app
from crondepot_testkit.pgbouncer import PgBouncer, unusable

API_POOLER_ENV = "CRONDEPOT_TEST_API_POOLER"
_BOUNCERS: dict[tuple[str, str], PgBouncer] = {}


def through_pooler() -> bool:
    return os.environ.get(API_POOLER_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def shared_bouncer(url: str) -> PgBouncer:
    """This process's PgBouncer in front of ``url``'s server (every database on it)."""
    if (why := unusable(url)) is not None:
        pytest.skip(f"{API_POOLER_ENV}: {why}")
    params: dict[str, Any] = conninfo_to_dict(url)
    key = (str(params.get("host")), str(params.get("port", 5432)))
    if key not in _BOUNCERS:
        _BOUNCERS[key] = bouncer = PgBouncer(url)
        atexit.register(bouncer.close)
    return _BOUNCERS[key]


def pooled_url(bouncer: PgBouncer, url: str) -> str:
    """``url``'s database and role, through ``bouncer``."""
    user = str(conninfo_to_dict(url).get("user") or "postgres")
    return bouncer.url(url, user)


def api_app(url: str, settings: ApiSettings | None = None, **kwargs: Any) -> FastAPI:
    """``create_app(url, …)``; with ``CRONDEPOT_TEST_API_POOLER=1``, its requests through
    this process's PgBouncer (``url`` stays the direct URL, checked at start)."""
    if through_pooler() and "pooled_url" not in kwargs:
        kwargs["pooled_url"] = pooled_url(shared_bouncer(url), url)
    return create_app(url, settings, **kwargs)
