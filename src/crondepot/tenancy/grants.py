"""Grants: which Python handlers, rate-limit buckets and broker connections a tenant may
name.

See docs/operations.md, "Tenants".

A handler is code in the workers, which the API cannot see; a grant is what declares its
name to the API, for one tenant (``crondepot tenants grant bank42 --handler sms.send``). A
shared bucket, made by the operator (``crondepot limits set``), is usable by the tenants it
is granted to; a bucket a tenant made itself (``PUT /v1/limits/{name}``) is its own and needs
no grant. A job naming anything else is refused when it is written (``refusal``, through
``crondepot.job.admission``), and a worker refuses, as a permanent failure, a run whose
grant went away after it was queued (``GrantCache``, ``run_refusal``).

Refusals never tell one tenant that another tenant's bucket exists: an unknown name and a
name it may not use read the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg
from psycopg_pool import ConnectionPool

from crondepot.base.errors import CrondepotError, InvalidJob, PermanentError
from crondepot.base.vocab import HANDLER_NAME, LIMIT_NAME, did_you_mean
from crondepot.db import Q
from crondepot.db.cache import ReadThrough


class Uses(Protocol):
    """What a grant decides on: the handler a job's target names and the rate limit it
    names (a ``JobSpec`` is one). Tenancy sits below the job document and never imports it."""

    @property
    def target(self) -> Mapping[str, Any]: ...

    @property
    def rate_limit(self) -> str | None: ...

# How long a worker trusts what it read of a tenant's grants: a revoke reaches every worker
# within this, at one small query per tenant per interval.
CACHE_SECONDS = 2.0


class NotGranted(InvalidJob):
    """A job names a handler or a rate limit its tenant may not use (or that does not
    exist); ``field`` is ``target.handler`` or ``rate_limit``."""


class InvalidGrant(CrondepotError, ValueError):
    """A grant or revoke the operator asked for cannot be done; nothing was changed."""


class GrantMissing(PermanentError):
    """A worker's refusal of a run whose handler or limit its tenant may no longer use."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantUses:
    """What one tenant may name in its jobs."""

    tenant: str
    handlers: frozenset[str]
    limits: frozenset[str]       # shared ones granted to it, and its own
    connections: frozenset[str] = frozenset()     # broker connections (tenancy/connections)


def tenant_uses(conn: psycopg.Connection[Any], tenant_id: int) -> TenantUses:
    row = conn.execute(Q.tenant_uses, {"tenant_id": tenant_id}).fetchone()
    if row is None:
        raise InvalidGrant(f"no tenant with id {tenant_id}")
    return TenantUses(tenant=row[0], handlers=frozenset(row[1]), limits=frozenset(row[2]),
                      connections=frozenset(row[3]))


def refusal(spec: Uses, uses: TenantUses) -> NotGranted | None:
    """Why ``spec`` may not be written for this tenant, or None. Pure."""
    handler = spec.target.get("handler")      # of any kind: a handler named is a grant
    if handler is not None and handler not in uses.handlers:
        return NotGranted(
            f"handler {handler!r} is not granted to tenant {uses.tenant}"
            f"{did_you_mean(handler, uses.handlers)} (an operator "
            f"grants it: crondepot tenants grant {uses.tenant} --handler {handler})",
            field="target.handler")
    connection = spec.target.get("connection")     # a broker target's (job/targets/amqp…)
    if connection is not None and connection not in uses.connections:
        # An unknown name and another tenant's read the same: nothing is told of either.
        return NotGranted(
            f"connection {connection!r} is not one tenant {uses.tenant} may use"
            f"{did_you_mean(connection, uses.connections)}: it does not exist or is not "
            f"granted (an operator grants it: crondepot tenants grant {uses.tenant} "
            f"--connection {connection})", field="target.connection")
    if spec.rate_limit is not None and spec.rate_limit not in uses.limits:
        return NotGranted(
            f"rate limit {spec.rate_limit!r} is not one tenant {uses.tenant} may use"
            f"{did_you_mean(spec.rate_limit, uses.limits)}: it does "
            "not exist or is not granted (an operator grants a shared one: crondepot tenants "
            f"grant {uses.tenant} --limit {spec.rate_limit}; PUT /v1/limits/"
            f"{spec.rate_limit} makes the tenant's own)", field="rate_limit")
    return None


# -- the operator's commands ------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    kind: str           # "handler" | "limit" | "connection"
    name: str
    granted_at: Any


def grant(conn: psycopg.Connection[Any], tenant_id: int, *, handlers: Iterable[str] = (),
          limits: Iterable[str] = (), connections: Iterable[str] = ()) -> None:
    """Grant every name given, or none of them (InvalidGrant says which name is wrong).
    Granting a name already granted changes nothing."""
    connections = list(dict.fromkeys(connections))
    handlers, limits = _names(handlers, limits, connections)
    with conn.transaction():
        for name in limits:
            _check_shared(conn, name)
        for name in connections:
            if conn.execute(Q.connection_url, {"name": name}).fetchone() is None:
                raise InvalidGrant(f"connection: no connection named {name!r} (add it first: "
                                   f"crondepot connections add {name} URL); nothing was "
                                   "changed")
            conn.execute(Q.grant_connection, {"tenant_id": tenant_id, "name": name})
        for name in handlers:
            conn.execute(Q.grant_handler, {"tenant_id": tenant_id, "name": name})
        for name in limits:
            conn.execute(Q.grant_limit, {"tenant_id": tenant_id, "name": name})


def revoke(conn: psycopg.Connection[Any], tenant_id: int, *, handlers: Iterable[str] = (),
           limits: Iterable[str] = (), connections: Iterable[str] = ()) -> None:
    """Revoke every name given, or none of them: a name that is not granted is an error.
    Jobs naming it stay (they are the tenant's), but their runs fail until it is granted."""
    connections = list(dict.fromkeys(connections))
    handlers, limits = _names(handlers, limits, connections)
    with conn.transaction():
        for kind, names, query in (("handler", handlers, Q.revoke_handler),
                                   ("limit", limits, Q.revoke_limit),
                                   ("connection", connections, Q.revoke_connection)):
            for name in names:
                if conn.execute(query, {"tenant_id": tenant_id, "name": name}).rowcount == 0:
                    raise InvalidGrant(f"{kind} {name!r} is not granted to this tenant; "
                                       "nothing was revoked")


def list_grants(conn: psycopg.Connection[Any], tenant_id: int) -> list[Grant]:
    return [Grant(kind=kind, name=name, granted_at=at)
            for kind, name, at in conn.execute(Q.list_grants, {"tenant_id": tenant_id})]


def _names(handlers: Iterable[str], limits: Iterable[str],
           connections: list[str]) -> tuple[list[str], list[str]]:
    handlers, limits = list(dict.fromkeys(handlers)), list(dict.fromkeys(limits))
    if not handlers and not limits and not connections:
        raise InvalidGrant("name at least one --handler NAME, --limit NAME or --connection "
                           "NAME")
    for name in handlers:
        if not HANDLER_NAME.fullmatch(name):
            raise InvalidGrant(f"handler: expected a name like 'sms.send' (letters, digits, "
                               f"'_', '.', ':' or '-'), got {name!r}; nothing was changed")
    for name in limits:
        if not LIMIT_NAME.fullmatch(name):
            raise InvalidGrant(f"limit: expected a name like 'sms-gateway' (lowercase letters, "
                               f"digits, '.', '_' or '-'), got {name!r}; nothing was changed")
    return handlers, limits


def _check_shared(conn: psycopg.Connection[Any], name: str) -> None:
    row = conn.execute(Q.rate_limit_owner, {"name": name}).fetchone()
    if row is None:
        raise InvalidGrant(f"limit: no rate limit named {name!r} (create it first: crondepot "
                           f"limits set {name} RATE); nothing was changed")
    if row[0] is not None:
        raise InvalidGrant(f"limit: {name!r} is a tenant's own bucket (made with PUT "
                           "/v1/limits), usable by that tenant alone; grant a shared one "
                           "(crondepot limits set); nothing was changed")


# -- the worker's check -----------------------------------------------------------------

class GrantCache:
    """A worker's view of each tenant's grants, read at most every ``ttl`` seconds per
    tenant (thread-safe; one read per tenant at a time, the last view kept while the
    database is away: crondepot.db.cache). A revoke therefore reaches the worker within
    ``ttl``."""

    def __init__(self, pool: ConnectionPool, *, ttl: float = CACHE_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._view = ReadThrough(pool, tenant_uses, ttl=ttl, clock=clock,
                                 what=lambda tenant_id: f"the grants of tenant {tenant_id}")

    def get(self, tenant_id: int) -> TenantUses:
        return self._view.get(tenant_id)


def run_refusal(target: dict[str, Any], rate_limit: str | None,
                uses: TenantUses) -> GrantMissing | None:
    """Why a worker must not call a run's target, or None. Pure."""
    if "handler" in target and target["handler"] not in uses.handlers:
        return GrantMissing(f"handler {target.get('handler')!r} is not granted to tenant "
                            f"{uses.tenant} (revoked after the run was queued?); not called")
    if "connection" in target and target["connection"] not in uses.connections:
        return GrantMissing(f"connection {target.get('connection')!r} is not granted to "
                            f"tenant {uses.tenant} (revoked or removed after the run was "
                            "queued?); not published")
    if rate_limit is not None and rate_limit not in uses.limits:
        return GrantMissing(f"rate limit {rate_limit!r} is not one tenant {uses.tenant} may "
                            "use (revoked or removed after the run was queued?); not called")
    return None
