"""The ``--tenant`` option of tenant-scoped commands and the ``TENANT`` argument of
``tenants`` actions: a name, or ``CRONDEPOT_TENANT``; an unknown name is an error."""

from __future__ import annotations

import argparse
import os
from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.db import Q

TENANT_ENV = "CRONDEPOT_TENANT"


class UnknownTenant(CrondepotError, LookupError):
    """No tenant by this name."""


def add_tenant(parser: argparse.ArgumentParser, *, required: bool = True,
               help_text: str = "the tenant acted for") -> None:
    default = os.environ.get(TENANT_ENV) or None
    parser.add_argument("--tenant", metavar="NAME", default=default,
                        required=required and default is None,
                        help=f"{help_text} (env {TENANT_ENV})")


def add_tenant_argument(parser: argparse.ArgumentParser) -> None:
    """The tenant a ``tenants`` action works on, as its first argument; with
    ``CRONDEPOT_TENANT`` set it may be left out, like ``--tenant`` elsewhere."""
    default = os.environ.get(TENANT_ENV) or None
    parser.add_argument("tenant", metavar="TENANT", nargs="?" if default else None,
                        default=default,
                        help=f"the tenant's name (may be left out when {TENANT_ENV} is set)")


def tenant_id(conn: psycopg.Connection[Any], name: str) -> int:
    """The id of the tenant called ``name``; UnknownTenant when there is none."""
    row = conn.execute(Q.tenant_by_name, {"name": name}).fetchone()
    if row is None:
        raise UnknownTenant(f"unknown tenant {name!r} (`crondepot tenants list` shows them)")
    value: int = row[0]
    return value
