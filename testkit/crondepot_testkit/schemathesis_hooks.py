"""schemathesis hooks for crondepot's runs (named by schemathesis.toml beside it).

- ``application/x-ndjson``: the import's body is documented as an array of job documents;
  each item is sent as one line of compact JSON (anything else generated, as one line).
- The run's own tokens are kept: a ``DELETE /v1/tokens/{token_id}`` aimed at one of the ids
  in ``CRONDEPOT_FUZZ_KEEP_TOKENS`` is sent for id 1 instead (never a token: seeded ids start
  far above). Revoking the token the run authenticates with would turn every later request
  into a 401 and test nothing more; revoking is still tested on the tokens the run issues.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import schemathesis

KEEP_ENV = "CRONDEPOT_FUZZ_KEEP_TOKENS"


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx: Any, value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    items = value if isinstance(value, list) else [value]
    return b"".join(json.dumps(item, separators=(",", ":")).encode() + b"\n"
                    for item in items)


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    keep = {part for part in os.environ.get(KEEP_ENV, "").split(",") if part}
    parameters = case.path_parameters or {}
    if case.operation.path == "/v1/tokens/{token_id}" \
            and str(parameters.get("token_id")) in keep:
        parameters["token_id"] = 1


# A schema-valid request may still be refused for a reason no JSON Schema can state: state
# (a version, a grant, a quota), an opaque cursor, a rule across two fields. schemathesis.toml
# lets these operations answer 412/422 to valid data; this check then holds each such answer
# to the reason named here, by problem type and field, so any other refusal still fails.
# Job-document rules the JobDocument schema states in its descriptions only: a cron that
# parses (fields, ranges, steps), a zone the tz database has, a target.url whose literal
# address is outside the refused ranges (a host may be spelt in decimal, octal or hex), and
# a payload PostgreSQL can store (its jsonb text size; no NUL or lone surrogate in any key
# or string at any depth). A refusal naming payload.<path> counts as payload.
# Schedules beyond cron (docs/schedules.md): an at/start_at/end_at in RFC 3339 with an offset
# (JSON Schema's format is an annotation), end_at after start_at and at inside them (rules
# across two fields), an at or end_at that leaves a fire after now and a max_runs above the
# fires a job already had (rules against the clock and the stored job). A retry curve's
# cap_s at least its base_s (a rule across two fields).
_UNSTATABLE = {(422, "validation", "cron"), (422, "validation", "tz"),
               (422, "validation", "target.url"), (422, "validation", "payload"),
               (422, "validation", "at"), (422, "validation", "start_at"),
               (422, "validation", "end_at"), (422, "validation", "max_runs"),
               (422, "validation", "retry.cap_s"),
               # a calendar the tenant has (state, like a grant)
               (422, "validation", "calendar.exclude"),
               # an interval of at most 3650 days: a bound on the count times its unit's
               # seconds, which a pattern cannot say; an anchor in RFC 3339 with an offset
               (422, "validation", "every"), (422, "validation", "anchor"),
               (422, "validation", "delivery_window.to")}
EXPECTED_REFUSALS: dict[str, set[tuple[int, str, str | None]]] = {
    "POST /v1/jobs": {(422, "not-granted", None), (422, "quota-exceeded", None),
                      *_UNSTATABLE},
    "PATCH /v1/jobs/{job_id}": {(412, "version-mismatch", None), (422, "not-granted", None),
                                (422, "quota-exceeded", None), *_UNSTATABLE},
    # An import none of whose lines is stored is a 422 naming its first line's field: the
    # reasons a single create has (a grant and a quota are refused per line, by field).
    "POST /v1/import": {(422, "validation", "target.handler"), (422, "validation", "rate_limit"),
                        (422, "validation", "priority"), (422, "validation", "job"),
                        *_UNSTATABLE},
    # An upsert: the body's key must be the path's (or absent), a cancelled key is not
    # reused, If-Match names the version, active: false is not an upsert (cancel it); then a
    # create's or a PATCH's reasons.
    "PUT /v1/jobs/by-key/{key}": {(412, "version-mismatch", None), (422, "not-granted", None),
                                  (422, "quota-exceeded", None), (422, "validation", "key"),
                                  (422, "validation", "active"), *_UNSTATABLE},
    # An apply's document refusals name jobs[i].<field> (the index is stripped below): a
    # key given twice, outside the scope or cancelled; a label of the scope's name with
    # another value; prune without a scope; then a create's and a PATCH's reasons.
    "POST /v1/apply": {(412, "version-mismatch", None), (422, "not-granted", None),
                       (422, "quota-exceeded", None), (422, "validation", "key"),
                       (422, "validation", "labels"), (422, "validation", "prune"),
                       *_UNSTATABLE},
    "GET /v1/jobs": {(422, "validation", "cursor")},                 # next_cursor is opaque
    "GET /v1/jobs/{job_id}/runs": {(422, "validation", "cursor")},
    "GET /v1/verify": {(422, "validation", "since")},                 # at most 31 days
    "GET /v1/dead-letter": {(422, "validation", "since"),             # since after until
                            (422, "validation", "cursor")},
    "GET /v1/audit": {(422, "validation", "cursor")},
    # (job_id: the generator rounds the documented maximum, 2^63 - 1, through a float and
    # sends 2^63, which is over it)
    "POST /v1/dead-letter/replay": {(422, "validation", "since"), (422, "validation", "job_id")},
    "GET /v1/runs": {(422, "validation", "cursor"), (422, "validation", "since")},
    "POST /v1/jobs/{job_id}/backfill": {(422, "validation", "from"), (422, "validation", "to")},
    # a date that exists and lies in 2000-2199 (a pattern says only YYYY-MM-DD); an
    # iCalendar body that parses and has an all-day event
    "PUT /v1/calendars/{name}": {(422, "validation", "dates"), (422, "validation", "file")},
    # a webhook URL whose literal address is outside the refused ranges (as target.url); at
    # most 20 channels a tenant (state)
    "POST /v1/notification-channels": {(422, "validation", "url"),
                                       (422, "validation", "channels")},
}


def _reason(response: Any) -> tuple[int, str, str | None]:
    try:
        body = response.json()
    except ValueError:
        return response.status_code, "", None
    errors = body.get("errors") or [{}]
    slug = str(body.get("type", "")).rsplit("/", 1)[-1]
    field = errors[0].get("field") if body.get("type", "").endswith("/validation") else None
    if isinstance(field, str):
        field = re.sub(r"^jobs\[\d+\]\.?", "", field)      # POST /v1/apply's documents
        field = re.sub(r"^cron\.\d+$", "cron", field)      # one cron of a list, by index
        if field.startswith("payload."):
            field = "payload"
        elif field.startswith("labels."):
            field = "labels"
        elif field.startswith("dates["):
            field = "dates"
    return response.status_code, slug, field


@schemathesis.check
def refusal_has_a_named_reason(ctx: Any, response: Any, case: Any) -> bool | None:
    """A schema-valid request refused with 412/422 (allowed for the operations above) is
    refused for the reason named in EXPECTED_REFUSALS; a negative import answered 200 (the
    import reports bad lines in its answer) reports the line as failed."""
    label = case.operation.label
    meta = case.meta
    if meta is None:
        return None
    mode = meta.generation.mode
    if mode.is_positive and label in EXPECTED_REFUSALS and response.status_code in (412, 422):
        reason = _reason(response)
        allowed = EXPECTED_REFUSALS[label]
        if reason not in allowed and (reason[0], reason[1], None) not in allowed:
            raise AssertionError(f"valid data refused for a reason the schema does not "
                                 f"name: {reason} ({response.text[:300]})")
    if mode.is_negative and label == "POST /v1/import" and response.status_code == 200 \
            and not response.json().get("failed"):
        raise AssertionError(f"invalid NDJSON lines imported without a reported failure: "
                             f"{response.text[:300]}")
    return None
