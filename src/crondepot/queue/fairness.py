"""Fair claims across tenants: the operator's weights.

Within a priority, a claim shares its turns among the tenants that have runs ready, in
proportion to their ``tenants.claim_weight`` (default 1), so one tenant's burst of due runs
does not hold back another tenant's (docs/operations.md, "Tenants"). The sharing itself
happens in the claim (``db/sql/functions/claim_fair.sql``); this module sets the weights.
"""

from __future__ import annotations

from typing import Any

import psycopg

from crondepot.base.errors import CrondepotError
from crondepot.db import Q

MIN_WEIGHT = 1
MAX_WEIGHT = 1000       # the column's CHECK (migration 0012)


class InvalidWeight(CrondepotError, ValueError):
    """A claim weight out of range, or for a tenant that does not exist."""


def set_claim_weight(conn: psycopg.Connection[Any], tenant_id: int, weight: int) -> int:
    """Set the tenant's claim weight; returns the weight it replaced."""
    if isinstance(weight, bool) or not isinstance(weight, int) \
            or not MIN_WEIGHT <= weight <= MAX_WEIGHT:
        raise InvalidWeight(f"claim weight: expected an integer from {MIN_WEIGHT} to "
                            f"{MAX_WEIGHT}, got {weight!r}")
    with conn.transaction():
        row = conn.execute(Q.set_tenant_claim_weight,
                           {"tenant_id": tenant_id, "weight": weight}).fetchone()
    if row is None:
        raise InvalidWeight(f"claim weight: no tenant with id {tenant_id}")
    previous: int = row[0]
    return previous
