"""The job's stored columns: one table that every write of a job and its read back are
derived from (``job/store.py``).

``WRITES`` is the view both inserts write through (``job_writes_7``, as ``insert_jobs`` names
it), column for column and in its order: ``insert_jobs`` takes one array per entry, named
and typed as the entry; the COPY of an import batch sends rows of them with their types;
``update_job_document`` sets the entries a patch may change; a stored row (``stored_jobs``)
becomes a ``JobSpec`` again through the same entries. The SQL spells the columns, so tests
hold the table to the view in the catalog and to those queries
(tests/integration/test_job_column_table.py): a column cannot be written by one path and
missed by another.

A column holds a ``JobSpec`` attribute (``attr``; a dotted path for a part of one, as
``misfire.policy``), or, without one, a value the writer computes (the id, the first fire,
the creation instant). Pure data and getters: no I/O, no SQL.

A plain field of the document is its ``Field`` (``fields.py``), its ``JobSpec`` attribute
(``spec.py``), an entry here, and a migration adding the column with a new write view (the
previous release keeps writing through the old one) and ``stored_jobs`` again; then
``queries/jobs.sql`` names the new view and the column, and ``make schema``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from operator import attrgetter
from typing import Any

from psycopg.types.json import Jsonb

from crondepot.base import jsontext
from crondepot.job.spec import JobSpec, Misfire


def _jsonb(attr: str) -> Callable[[JobSpec], Any]:
    get = attrgetter(attr)

    # orjson through crondepot.base.jsontext: the same jsonb as the json module, faster.
    def read(spec: JobSpec) -> Jsonb | None:
        value = get(spec)       # None is SQL NULL (an optional column), not JSON null
        return None if value is None else Jsonb(value, jsontext.dumps)
    return read


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the write view (and of the jobs table)."""

    name: str                  # the column; also the parameter name in the queries
    pg_type: str               # its PostgreSQL type: COPY's, and insert_jobs's array of it
    attr: str | None = None    # the JobSpec attribute stored in it; None: the writer's value
    patchable: bool = True     # update_job_document writes it (key and active stay)
    # the value a write sends, from a spec: the attribute, wrapped for jsonb; computed once
    read: Callable[[JobSpec], Any] = _field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attr is None:
            read: Callable[[JobSpec], Any] = _writers_value
        elif self.pg_type == "jsonb":
            read = _jsonb(self.attr)
        else:
            read = attrgetter(self.attr)
        object.__setattr__(self, "read", read)


def _writers_value(spec: JobSpec) -> Any:
    raise TypeError("this column's value is the writer's, not the spec's")


WRITES: tuple[Column, ...] = (
    Column("id", "bigint"),
    Column("tenant_id", "bigint"),
    Column("key", "text", "key", patchable=False),
    Column("cron", "text", "cron"),
    Column("tz", "text", "tz"),
    Column("next_run_at", "timestamptz"),          # the first fire's due time
    Column("next_nominal_at", "timestamptz"),      # the first fire's nominal time
    Column("priority", "text", "priority"),
    Column("active", "boolean", "active", patchable=False),
    Column("target", "jsonb", "target"),
    Column("payload", "jsonb", "payload"),
    Column("misfire_policy", "text", "misfire.policy"),
    Column("misfire_seconds", "integer", "misfire.seconds"),
    Column("misfire_until", "time", "misfire.until"),
    Column("catchup", "text", "catchup"),
    Column("max_catchup", "integer", "max_catchup"),
    Column("spread_seconds", "integer", "spread_seconds"),
    Column("spread_key", "text", "spread_key"),
    Column("max_attempts", "integer", "max_attempts"),
    Column("lease_seconds", "integer", "lease_seconds"),
    Column("rate_limit", "text", "rate_limit"),
    Column("at", "timestamptz", "at"),
    Column("start_at", "timestamptz", "start_at"),
    Column("end_at", "timestamptz", "end_at"),
    Column("max_runs", "integer", "max_runs"),
    Column("labels", "jsonb", "labels"),
    Column("alert_after_failures", "integer", "alert_after_failures"),
    Column("retry_base_s", "float8", "retry_base_s"),
    Column("retry_cap_s", "float8", "retry_cap_s"),
    Column("pause_after_failures", "integer", "pause_after_failures"),
    Column("crons", "jsonb", "crons"),             # a list given as cron, as given
    Column("every_s", "integer", "every_s"),       # an interval: cron holds its text
    Column("anchor_at", "timestamptz", "anchor_at"),
    Column("calendar", "jsonb", "calendar"),
    Column("overlap", "text", "overlap"),
    Column("delivery_window", "jsonb", "delivery_window"),   # null: the tenant's default
    Column("created_at", "timestamptz"),           # the instant the first fire is from
)

# The columns that hold the document, and those a patch rewrites.
SPEC: tuple[Column, ...] = tuple(c for c in WRITES if c.attr is not None)
PATCHED: tuple[Column, ...] = tuple(c for c in SPEC if c.patchable)
COPY_TYPES: tuple[str, ...] = tuple(c.pg_type for c in WRITES)

# The document's columns by attribute: whole attributes, and the parts of ``misfire``, the
# one attribute stored as several columns (policy, seconds, until).
_WHOLE = tuple((c.name, c.attr) for c in SPEC if c.attr and "." not in c.attr)
_MISFIRE = tuple((c.attr.removeprefix("misfire."), c.name) for c in SPEC
                 if c.attr and c.attr.startswith("misfire."))


def patch_params(spec: JobSpec) -> dict[str, Any]:
    """The parameters of ``update_job_document`` that come from the document."""
    return {c.name: c.read(spec) for c in PATCHED}


def spec_from_row(row: Mapping[str, Any]) -> JobSpec:
    """The JobSpec a stored row (``stored_jobs``, by column name) holds."""
    whole = {attr: row[name] for name, attr in _WHOLE}
    if whole["crons"] is not None:
        whole["crons"] = tuple(whole["crons"])      # jsonb reads back as a list
    return JobSpec(**whole, misfire=Misfire(**{part: row[name] for part, name in _MISFIRE}))
