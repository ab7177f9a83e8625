"""The API's request and response shapes, for the OpenAPI document.

A job document is validated by ``JobSpec.from_document`` (one set of rules for the API, the
importer and the CLI), never by these models. Its schema here (``JobDocument``,
``JobPatch``, ``Job``) is generated from the validator's own field table
(``crondepot.job.fields``, through ``crondepot.job.json_schema``), so the two cannot disagree.
The dead-letter replay body, which has no domain object of its own, is parsed by its model.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from crondepot.api.params import MAX_BIGINT, Instant
from crondepot.base import jsontext
from crondepot.base.vocab import (
    AttemptOutcome,
    ChannelKind,
    EndReason,
    NoticeEvent,
    NoticeStatus,
    Outcome,
    Priority,
    RunState,
    SkipReason,
)
from crondepot.job import fields as F
from crondepot.job.apply import DEFAULT_DAYS, MAX_DAYS
from crondepot.job.json_schema import document_schema, field_schema, patch_schema, stored_schema
from crondepot.job.url import schema_pattern
from crondepot.notices.channels import EMAIL_PATTERN

EMI_REMINDER: dict[str, Any] = {
    "key": "bank42:48213:emi",
    "cron": "0 9 5 * *",
    "tz": "Asia/Kolkata",
    "priority": "normal",
    "target": {"type": "http", "url": "https://hooks.bank42.example/emi", "timeout_s": 10,
               "dedupes": True},
    "payload": {"loan": 48213, "template": "emi_due"},
    "misfire": {"policy": "skip_after_local_time", "until": "20:00"},
    "catchup": "all",
    "spread": {"seconds": 1800, "key": "48213"},
    # at most 4 attempts; waits drawn from 0-60 s, 0-120 s, 0-240 s (cap 1800 s)
    "retry": {"max_attempts": 4, "base_s": 60, "cap_s": 1800},
    "lease_seconds": 60,
    "rate_limit": "sms-gateway",
}
# One run at an instant: "your bill is due in 3 days" (the job then ends, completed).
BILL_DUE_ONCE: dict[str, Any] = {
    "key": "bank42:bill:77120:due-in-3-days", "at": "2027-03-05T09:00:00+05:30",
    "tz": "Asia/Kolkata", "target": {"type": "python", "handler": "sms.send"},
    "payload": {"bill": 77120, "template": "bill_due_3d"}, "rate_limit": "sms-gateway",
}
# Twelve month-end instalments from April: L is the month's last day; the job ends itself.
EMI_TWELVE_MONTH_ENDS: dict[str, Any] = {
    "key": "bank42:48214:emi", "cron": "0 9 L * *", "tz": "Asia/Kolkata",
    "start_at": "2027-04-01T00:00:00+05:30", "max_runs": 12,
    "target": {"type": "python", "handler": "sms.send"},
    "payload": {"loan": 48214, "template": "emi_due"}, "rate_limit": "sms-gateway",
}
# An interval: re-check a failed payment every 4 hours from 10:00 IST on the day it failed,
# absolute time (no clock change moves it), until the job is cancelled.
PAYMENT_RECHECK_EVERY_4H: dict[str, Any] = {
    "key": "bank42:payment:99117:recheck", "every": "4h",
    "anchor": "2027-03-05T10:00:00+05:30", "tz": "Asia/Kolkata",
    "target": {"type": "python", "handler": "sms.send"},
    "payload": {"payment": 99117, "template": "payment_failed_retry"},
}
# Several schedules: 09:00 on weekdays and 10:00 on Saturdays, one run per instant.
BRANCH_HOURS_REMINDER: dict[str, Any] = {
    "key": "bank42:card:5521:bill-reminder", "cron": ["0 9 * * 1-5", "0 10 * * 6"],
    "tz": "Asia/Kolkata", "end_at": "2027-03-20T00:00:00+05:30",
    "target": {"type": "python", "handler": "sms.send"},
    "payload": {"card": 5521, "template": "card_bill_due"}, "rate_limit": "sms-gateway",
}
# An SMS only between 09:00 and 21:00, Monday to Saturday, in the customer's zone: a
# reminder due at 21:30 goes at 09:00 the next opening, with the same run id.
EMI_SMS_IN_HOURS: dict[str, Any] = {
    "key": "bank42:48213:emi-sms", "cron": "30 21 4 * *", "tz": "Asia/Kolkata",
    "target": {"type": "python", "handler": "sms.send"},
    "payload": {"loan": 48213, "template": "emi_due_tomorrow"}, "rate_limit": "sms-gateway",
    "delivery_window": {"from": "09:00", "to": "21:00", "days": "mon-sat",
                        "outside": "defer"},
}
# The nightly reconciliation of the day's SMS deliveries against the gateway's report: a
# run may take longer than usual, and a second one must never start beside it.
NIGHTLY_RECONCILIATION: dict[str, Any] = {
    "key": "bank42:reconcile:sms-deliveries", "cron": "30 1 * * *", "tz": "Asia/Kolkata",
    "priority": "bulk", "target": {"type": "python", "handler": "reports.nightly"},
    "payload": {"report": "sms_delivery_reconciliation"}, "overlap": "skip",
}
# The broker targets: a reminder published to the SMS senders' broker through a connection
# the operator named and granted (crondepot connections add / tenants grant --connection);
# the message is the webhook's JSON body.
RENEWAL_TO_NATS: dict[str, Any] = {
    "key": "bank42:policy:31007:renewal", "cron": "0 10 1 * *", "tz": "Asia/Kolkata",
    "target": {"type": "nats", "connection": "bus", "subject": "reminders.sms"},
    "payload": {"policy": 31007, "template": "renewal_due"},
}
EMI_TO_RABBITMQ: dict[str, Any] = {
    "key": "bank42:48213:emi-amqp", "cron": "0 9 5 * *", "tz": "Asia/Kolkata",
    "target": {"type": "amqp", "connection": "rabbit", "exchange": "reminders",
               "routing_key": "sms", "timeout_s": 10},
    "payload": {"loan": 48213, "template": "emi_due"},
}
BILL_TO_REDIS_STREAM: dict[str, Any] = {
    "key": "bank42:card:5521:bill-redis", "cron": "0 9 25 * *", "tz": "Asia/Kolkata",
    "target": {"type": "redis", "connection": "cache", "stream": "reminders"},
    "payload": {"card": 5521, "template": "card_bill_due"},
}
PYTHON_JOB: dict[str, Any] = {
    "key": "ops:nightly-report", "cron": "30 2 * * *", "tz": "Europe/Berlin",
    "priority": "bulk", "target": {"type": "python", "handler": "reports.nightly",
                                   "timeout_s": 1800, "dedupes": True},
}


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Generated(_Doc):
    """A model whose JSON schema is generated from the job document's field table."""

    @classmethod
    def _generated(cls) -> JsonSchemaValue:
        raise NotImplementedError

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return cls._generated()


class JobDocument(_Generated):
    """A job document (also one line of an NDJSON import)."""

    @classmethod
    def _generated(cls) -> JsonSchemaValue:
        return document_schema()


class JobPatch(_Generated):
    """Fields to change. Each one given replaces the stored field whole; null resets it to
    its default. ``key`` and ``active`` cannot be changed (cancel with DELETE)."""

    @classmethod
    def _generated(cls) -> JsonSchemaValue:
        return patch_schema()


class JobPause(_Doc):
    """Why, since when and by whom a job is paused."""

    note: str | None = Field(description="what the pause said (POST .../pause {\"note\"})")
    paused_at: datetime | None = Field(description="when it was paused (null for a pause "
                                                   "made before the note was kept)")
    paused_by: str | None = Field(description="the token, operator or role that paused it; "
                                              "crondepot:pause_after_failures when the job "
                                              "paused itself")


class Job(_Doc):
    """A stored job: its document with every default filled in, and these fields."""

    id: int
    paused: bool
    next_run_at: datetime | None = Field(description="due time of the next run (with spread); "
                                                     "null when the timetable has no more")
    next_nominal_at: datetime | None
    version: int = Field(description="send it back in If-Match to PATCH")
    created_at: datetime
    updated_at: datetime
    cancelled_at: datetime | None
    fire_count: int = Field(description="fires written so far (runs and skipped rows; "
                                        "max_runs counts them)")
    ended_at: datetime | None = Field(description="when the job ended by its schedule: its "
                                                  "last fire's nominal time")
    ended_reason: EndReason | None = Field(
        description="why the job ended by itself: completed (its at run), end_at (its "
                    "window closed) or max_runs; null while it runs, or when cancelled")
    pause: JobPause | None = Field(description="while paused: why, since when, by whom")

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        own = handler.resolve_ref_schema(handler(core_schema))
        return stored_schema(own)


class JobPage(_Doc):
    items: list[Job]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page")


class Run(_Doc):
    run_id: str
    job_id: int
    priority: Priority
    status: RunState
    nominal_at: datetime
    due_at: datetime
    attempt: int
    available_at: datetime
    lease_owner: str | None
    lease_expires_at: datetime | None
    first_claimed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    skip_reason: SkipReason | None
    last_error: str | None
    error_class: str | None
    result: Any
    created_at: datetime
    updated_at: datetime


class Attempt(_Doc):
    """One call of a run. outcome: running, succeeded, failed, dead, skipped (the last
    attempt, as the run row records it), or retried / lease_expired (an attempt that did not
    end the run)."""

    attempt: int
    started_at: datetime | None
    ended_at: datetime | None
    outcome: AttemptOutcome
    error: str | None
    error_class: str | None
    worker: str | None


class RunDetail(Run):
    """One run read by id: also who made its latest attempt, and every attempt."""

    worker: str | None
    attempts: list[Attempt]


class JobHealth(_Doc):
    """unhealthy: consecutive_failures >= alert_after_failures. consecutive_failures: the
    job's latest fires, in the order they ended, that ended failed, dead or skipped past
    their misfire deadline (a success resets it). threshold_from: job (its own
    alert_after_failures) or tenant (the tenant's default)."""

    unhealthy: bool
    consecutive_failures: int
    alert_after_failures: int
    threshold_from: Literal["job", "tenant"]
    last_success_at: datetime | None
    last_success_run_id: str | None


class JobWithHealth(Job):
    health: JobHealth


class RunPage(_Doc):
    items: list[Run]
    next_cursor: str | None


class ListedRun(Run):
    """A run in the list across jobs: also its job's key and when it ended (finished_at;
    due_at for a run that has not ended), the list's order."""

    job_key: str | None
    ended_at: datetime


class ListedRunPage(_Doc):
    items: list[ListedRun]
    next_cursor: str | None


class RetryRequest(_Doc):
    """How to retry a failed or dead run (an empty body is the default)."""

    ignore_deadline: bool = Field(
        False, description="also retry a run past its misfire deadline (it goes without "
                           "one); by default such a run is refused (409)")

    model_config = ConfigDict(extra="forbid")

    @field_validator("ignore_deadline", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> Any:
        return json_number(value, (bool,))


class RetryResult(_Doc):
    run_id: str
    previous_status: Literal["failed", "dead"]
    run: Run


class DeadRun(_Doc):
    run_id: str
    job_id: int
    job_key: str | None
    priority: Priority
    nominal_at: datetime
    due_at: datetime
    attempt: int
    finished_at: datetime
    error_class: str | None
    last_error: str | None


class DeadRunList(_Doc):
    items: list[DeadRun]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page")


def _storable(text: str) -> str:
    # Compared with text columns: what PostgreSQL cannot store is a 422 naming the field.
    reason = jsontext.unstorable(text)
    if reason is not None:
        raise ValueError(reason)
    return text


# (the schema says no NUL; a lone surrogate is refused too, but no portable regex says it)
StorableText = Annotated[str, AfterValidator(_storable),
                         Field(json_schema_extra={"pattern": jsontext.NO_NUL})]


def json_number(value: Any, kinds: tuple[type, ...]) -> Any:
    """Refuse what pydantic's lax mode would coerce but JSON Schema does not allow: a bool or
    a string for a number, a number or a string for a bool. (An integral float such as 5.0 is
    a JSON Schema integer and stays accepted.)"""
    if isinstance(value, bool) != (bool in kinds) or isinstance(value, str):
        raise ValueError(f"expected {' or '.join(k.__name__ for k in kinds)}, "
                         f"got {type(value).__name__}")
    return value


class ReplayRequest(_Doc):
    """Which dead runs to queue again (at least one filter). Runs keep their ids."""

    run_ids: list[StorableText] | None = Field(None, max_length=10_000)
    job_id: int | None = Field(None, ge=1, le=MAX_BIGINT)
    error: StorableText | None = Field(None, min_length=1, max_length=500,
                                       description="error class, or a part of the error "
                                                   "message")
    since: Instant | None = None
    until: Instant | None = None
    limit: int = Field(1000, ge=1, le=100_000)
    dry_run: bool = False
    ignore_deadline: bool = Field(
        False, description="also replay runs past their misfire deadline (they go without "
                           "one); by default they stay in the dead letter and are counted "
                           "in past_deadline")

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "examples": [{"error": "TimeoutError", "since": "2025-01-05T03:30:00Z",
                      "dry_run": True}],
        # the route's rule "at least one filter", as a schema can say it: present and not
        # null (each property's own schema says its type; a type here would be merged by
        # ReDoc with the property's null alternative, a schema warning)
        "anyOf": [{"required": ["run_ids"],
                   "properties": {"run_ids": {"not": {"type": "null"}, "minItems": 1}}},
                  {"required": ["job_id"], "properties": {"job_id": {"not": {"type": "null"}}}},
                  {"required": ["error"], "properties": {"error": {"not": {"type": "null"}}}},
                  {"required": ["since"], "properties": {"since": {"not": {"type": "null"}}}},
                  {"required": ["until"], "properties": {"until": {"not": {"type": "null"}}}}]})

    @field_validator("job_id", "limit", mode="before")
    @classmethod
    def _integer(cls, value: Any) -> Any:
        return value if value is None else json_number(value, (int,))

    @field_validator("since", "until", mode="before")
    @classmethod
    def _text(cls, value: Any) -> Any:
        # a date-time is a string to JSON Schema; lax pydantic would read 0.5 as Unix time
        if value is not None and not isinstance(value, str):
            raise ValueError(f"expected an RFC 3339 date-time, got {type(value).__name__}")
        return value

    @field_validator("dry_run", "ignore_deadline", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> Any:
        return json_number(value, (bool,))


class ReplayResult(_Doc):
    dry_run: bool
    count: int
    items: list[DeadRun]
    past_deadline: int = Field(description="matching runs held back: past their misfire "
                                           "deadline (replay with ignore_deadline to send "
                                           "them)")
    past_deadline_run_ids: list[str]


class BackfillRequest(_Doc):
    """A past range of nominal times, ``from`` included, ``to`` excluded (RFC 3339, with an
    offset); at most 31 days, ending by now."""

    since: Instant = Field(alias="from", description="earliest nominal time, included")
    until: Instant | None = Field(None, alias="to",
                                   description="latest nominal time, excluded (default and "
                                               "at most: now)")
    include_skipped: bool = Field(False, description="also queue again the fires whose row "
                                                     "is skipped (unless past their misfire "
                                                     "deadline)")
    dry_run: bool = Field(False, description="report what would be written; write nothing")

    @field_validator("include_skipped", "dry_run", mode="before")
    @classmethod
    def _bool(cls, value: Any) -> Any:
        return json_number(value, (bool,))


class BackfillResult(_Doc):
    job_id: int
    from_: datetime = Field(alias="from")
    to: datetime
    dry_run: bool
    fires: int = Field(description="fires handled by this call (at most 10,000)")
    written: int = Field(description="fires without a row: written queued, due now")
    written_skipped: int = Field(description="fires without a row past their misfire "
                                             "deadline: written skipped, as the scheduler "
                                             "would")
    requeued: int = Field(description="skipped fires queued again (include_skipped)")
    held_past_deadline: int = Field(description="skipped fires left skipped: past their "
                                                "misfire deadline")
    already_had_row: int = Field(description="fires with a row, left as it was")
    pending_from: datetime | None = Field(description="fires from here on are the "
                                                      "scheduler's (a paused job): not written")
    next_from: datetime | None = Field(description="more fires remain: call again with this "
                                                   "as from")
    written_run_ids: list[str]
    written_skipped_run_ids: list[str]
    requeued_run_ids: list[str]
    held_past_deadline_run_ids: list[str]
    run_ids_listed_at_most: int


class TriggerResult(_Doc):
    run_id: str
    created: bool = Field(description="false: a run with this id (same second) existed")
    run: Run


class LineError(_Doc):
    line: int
    field: str
    message: str


class ImportResult(_Doc):
    lines: int
    created: int
    existing: int = Field(description="lines whose key was already used (nothing written)")
    failed: int
    errors: list[LineError] = Field(description="the first 1000 bad lines")


class QueueStats(_Doc):
    ready: int
    waiting: int = Field(description="queued, waiting for a retry time")
    oldest_ready_seconds: float | None


class LagStats(_Doc):
    samples: int
    p50_seconds: float | None
    p99_seconds: float | None


class Stats(_Doc):
    queue: dict[Priority, QueueStats]
    lag: LagStats = Field(description="first_claimed_at - due_at of first attempts claimed "
                                      "in the last 5 minutes")
    dead_letter: int
    finished_last_hour: dict[Outcome, int] = Field(
        description="runs that ended in the last hour by outcome: succeeded, failed, dead, "
                    "skipped")


class Health(_Doc):
    """/healthz: the process is up, and which release and schema revision it runs."""

    status: Literal["ok"]
    version: str = Field(examples=["0.1.0"], description="the crondepot release")
    schema_revision: int = Field(
        examples=[31], description="the highest migration of this release: the database had "
                                   "exactly these applied when the process started (it "
                                   "refuses any other schema)")


class FieldError(_Doc):
    field: str = Field(examples=["misfire.until"])
    message: str
    line: int | None = Field(None, description="the NDJSON line refused, in an import's "
                                               "errors")


class Problem(_Doc):
    """RFC 9457 problem details."""

    type: str = Field(examples=["https://crondepot.dev/problems/validation"])
    title: str
    status: int
    detail: str
    errors: list[FieldError] | None = None
    key: str | None = None
    current_version: int | None = None
    run_status: RunState | None = Field(None, description="the run's state, when it cannot be "
                                                     "retried in it")
    quota: str | None = Field(None, description="the quota refused (max_jobs, "
                                                "max_urgent_jobs, urgent_allowed)")
    limit: int | None = Field(None, description="that quota's value")
    lines: int | None = Field(None, description="an import refused whole: its lines")
    failed: int | None = Field(None, description="an import refused whole: its lines "
                                                 "refused (all of them)")


MAX_APPLY_JOBS = 10_000   # documents per POST /v1/apply; a larger set goes through the CLI


def apply_request_schema() -> dict[str, Any]:
    scope = {**field_schema(F.LABELS), "minProperties": 1, "maxProperties": 1,
             "description": "one label, stamped on every job written; prune cancels only "
                            "jobs carrying it"}
    scope.pop("default", None)
    return {"title": "ApplyRequest", "type": "object", "additionalProperties": False,
            "required": ["jobs"],
            "properties": {
                "scope": {"anyOf": [scope, {"type": "null"}]},
                "prune": {"type": "boolean", "default": False,
                          "description": "cancel the scope's jobs the set no longer names "
                                         "(needs a scope)"},
                "dry_run": {"type": "boolean", "default": False,
                            "description": "answer the plan, change nothing"},
                "days": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS,
                         "default": DEFAULT_DAYS,
                         "description": "the plan lists the fires of the next N days"},
                "jobs": {"type": "array", "maxItems": MAX_APPLY_JOBS,
                         "items": {"allOf": [{"$ref": "#/components/schemas/JobDocument"},
                                             {"required": ["key"], "properties": {
                                                 "active": {"const": True}}}]},
                         "description": "every job of the set, each with its key"}}}


class ApplyRequest(_Doc):
    """Documented only (the route reads the body itself, to name ``jobs[3].cron``)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return apply_request_schema()


DOCUMENTED: tuple[type[BaseModel], ...] = (JobDocument, JobPatch, ApplyRequest)


class LedgerFire(_Doc):
    job_id: int
    tenant_id: int
    job_key: str | None
    nominal_at: datetime = Field(description="the fire's nominal (cron) time")
    run_id: str = Field(description="the id its run has, or would have")
    rows: int = Field(description="rows in runs for this fire: 0 (unaccounted) or 2 and more")


class LedgerUnreadable(_Doc):
    cron: str = Field(description="a stored cron that no longer parses")
    tz: str
    error: str = Field(description="why it does not parse")
    job_ids: list[int] = Field(description="the jobs it was in force for in the window")


class LedgerReport(_Doc):
    """The ledger rule checked over a window: every fire of every job's timetable (as it was
    in force, edits and cancels included) has exactly one row in runs."""

    since: datetime
    until: datetime
    fires: int = Field(description="fires of the window's timetables")
    pending: int = Field(description="fires not owed a row yet (a paused job, a scheduler "
                                     "behind): they will be written or recorded, not lost")
    oldest_pending: datetime | None = Field(description="the earliest pending fire: the next "
                                                        "check must reach back to it")
    unaccounted_count: int = Field(description="fires owed a row that have none: lost")
    duplicated_count: int = Field(description="fires with more than one row")
    unaccounted: list[LedgerFire] = Field(description="the first 1,000 unaccounted fires")
    duplicated: list[LedgerFire]
    unreadable: list[LedgerUnreadable] = Field(
        description="timetables in force in the window whose cron or tz no longer parses: "
                    "their fires cannot be checked")
    seconds: float
    clean: bool = Field(description="no fire unaccounted or duplicated, no timetable "
                                    "unreadable")


class ForecastMinute(_Doc):
    minute: datetime
    runs: int = Field(description="runs of the limit whose ready time falls in this minute")


class ForecastDeadline(_Doc):
    deadline: datetime
    runs: int = Field(description="runs that would pass this misfire deadline")


class ForecastWave(_Doc):
    """Runs of one limit with no idle bucket between them."""

    start: datetime = Field(description="when the first run of the wave is ready")
    runs: int
    sent: int = Field(description="runs sent (the others pass their deadline)")
    drained_at: datetime | None = Field(description="when the last run is sent; null: held")
    past_deadline: int
    deadlines: list[ForecastDeadline]


class ForecastLimit(_Doc):
    """The tenant's runs on one rate limit (``rate_limit`` null: on none)."""

    rate_limit: str | None
    status: Literal["drained", "held", "unlimited", "unknown"] = Field(
        description="drained through the bucket; held (nothing sent); unlimited (counted "
                    "only: workers bound them, not modelled); unknown (a limit the tenant "
                    "may not use: the runs fail)")
    held_by: Literal["rate_limit", "host"] | None
    rate_per_second: float | None
    burst: int | None
    shared: bool = Field(description="a shared bucket: other tenants' runs are not counted")
    tokens_now: float | None
    runs: int = Field(description="runs the timetables write in the horizon")
    queued_now: int
    past_deadline: int
    per_minute: list[ForecastMinute] = Field(description="minutes with at least one run")
    waves: list[ForecastWave] = Field(description="the first 500 waves")
    waves_omitted: int


class Forecast(_Doc):
    """The tenant's runs over the next hours, drained through its rate limits in the
    claim's order (earliest deadline first within a limit)."""

    now: datetime
    until: datetime
    hours: int
    jobs: int = Field(description="live, unpaused jobs due in the horizon")
    groups: int = Field(description="distinct timetables computed")
    runs: int
    queued_now: int
    past_deadline: int
    skipped: dict[str, int] = Field(description="fires written skipped, by reason")
    unreadable_jobs: int
    order: Literal["deadline_first"] = Field(
        description="the claim's order: oldest first, and within one rate limit the turns "
                    "of runs with a misfire deadline go to the earliest deadline")
    limits: list[ForecastLimit]
    seconds: float


class LimitDocument(_Doc):
    """A tenant's own rate limit (token bucket): ``rate_per_second`` on average, at most
    ``burst`` calls at once."""

    rate_per_second: float = Field(gt=0, le=1_000_000, examples=[450])
    burst: int | None = Field(None, ge=1, le=1_000_000, description="default: one second's "
                                                                      "worth, at least 1")


class Limit(_Doc):
    name: str = Field(examples=["sms-gateway"])
    rate_per_second: float
    burst: int
    owned: bool = Field(description="the tenant's own bucket (true) or a shared one granted "
                                    "to it by the operator (false)")


class LimitList(_Doc):
    items: list[Limit]


class CalendarDocument(_Doc):
    """A tenant's exclusion calendar, replaced whole: its dates (YYYY-MM-DD, at most 3,650;
    repeats and order do not matter). ``PUT`` also takes an iCalendar file
    (``Content-Type: text/calendar``): its all-day events' dates."""

    dates: list[str] = Field(max_length=3650, examples=[["2026-12-25", "2027-01-26"]],
                             json_schema_extra={"items": {
                                 "type": "string", "format": "date",
                                 "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}})


class Calendar(_Doc):
    name: str = Field(examples=["in-bank-holidays"])
    dates: list[str] = Field(examples=[["2026-12-25", "2027-01-26"]])
    count: int
    version: int = Field(description="grows with every change of the dates")
    created_at: str
    updated_at: str


class CalendarList(_Doc):
    items: list[Calendar]


# tokens.check_label's rule: no control character, not only spaces (and, as for every
# string, no lone surrogate: a range of them is not a portable regex)
_LABEL_CHAR = "[^\\u0000-\\u001f\\u007f]"
LABEL = f"^{_LABEL_CHAR}*[^\\s\\u0000-\\u001f\\u007f]{_LABEL_CHAR}*$"


def _label_schema(schema: dict[str, Any]) -> None:
    for option in schema.get("anyOf", ()):
        if option.get("type") == "string":
            option.update(minLength=1, pattern=LABEL)


class TokenRequest(_Doc):
    """A token to issue to the caller's tenant (the body may be left out: an admin token)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    role: Literal["admin", "read"] = Field(default="admin", description="read tokens may only read")
    label: StorableText | None = Field(default=None, max_length=100, examples=["ci read"],
                                       description="what the token is for (1 to 100 "
                                                   "printable characters)",
                                       json_schema_extra=_label_schema)


class PauseRequest(_Doc):
    """Why the job is paused (the body may be left out)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    note: StorableText | None = Field(default=None, max_length=500,
                                      examples=["SMS gateway migration until Monday 09:00"],
                                      description="free text for people: 1 to 500 "
                                                  "printable characters",
                                      json_schema_extra=_label_schema)


class Token(_Doc):
    """A token as listed: never the token itself (only its sha256 is stored)."""

    id: int
    role: Literal["admin", "read"]
    label: str | None
    created_at: datetime
    last_used_at: datetime | None = Field(description="to the minute")
    revoked_at: datetime | None


class NewToken(Token):
    token: str = Field(description="shown once, in this response; keep it now")


class TokenList(_Doc):
    items: list[Token]


class SecretRotation(_Doc):
    """How long the old signing secret keeps signing next to the new one."""

    overlap_seconds: int = Field(default=86400, ge=0, le=30 * 86400,
                                 description="0 retires the old secret at once")

    @field_validator("overlap_seconds", mode="before")
    @classmethod
    def _integer(cls, value: Any) -> Any:
        return json_number(value, (int,))


class RotatedSecret(_Doc):
    signing_secret: str = Field(description="the new whsec_ secret, shown once, in this "
                                            "response")
    rotated_at: datetime
    previous_valid_until: datetime = Field(description="until then every webhook carries "
                                                       "both signatures, then only the new one")


# -- failure notices (notices/, docs/notices.md) ------------------------------------------

class ChannelDocument(_Doc):
    """A notification channel to add: a webhook (``url``, called with a JSON body signed as
    run deliveries are) or an e-mail address (``address``, through the operator's SMTP
    relay). The same channel again answers the one there (200)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={
        # each type with its own field, and not the other's
        "oneOf": [{"properties": {"type": {"const": "webhook"}}, "required": ["url"],
                   "not": {"required": ["address"]}},
                  {"properties": {"type": {"const": "email"}}, "required": ["address"],
                   "not": {"required": ["url"]}}]})

    type: ChannelKind = Field(description="webhook or email")
    url: str | None = Field(default=None, description="type webhook: an http or https URL "
                                                      "(no credentials; not a private or "
                                                      "loopback address)",
                            json_schema_extra=lambda schema: _string_schema(
                                schema, schema_pattern(), 2048,
                                "https://hooks.bank42.example/crondepot-notices"))
    address: str | None = Field(default=None, description="type email: one e-mail address",
                                json_schema_extra=lambda schema: _string_schema(
                                    schema, f"^{EMAIL_PATTERN}$", 254,
                                    "payments-oncall@bank42.example"))


    @field_validator("url", "address", mode="before")
    @classmethod
    def _not_null(cls, value: object) -> object:
        # Left out is None (the default, never validated); sent, it must be a string.
        if value is None:
            raise ValueError("expected a string, got null")
        return value


def _string_schema(schema: dict[str, Any], pattern: str, longest: int, example: str) -> None:
    """A field that is a string when sent: null is refused (``_not_null``)."""
    description = schema.get("description")
    schema.clear()
    schema.update(type="string", pattern=pattern, maxLength=longest, examples=[example])
    if description:
        schema["description"] = description


class Channel(_Doc):
    id: int
    type: ChannelKind
    url: str | None = Field(default=None, description="type webhook")
    address: str | None = Field(default=None, description="type email")
    created_at: str


class ChannelList(_Doc):
    items: list[Channel]


class NoticeEventItem(_Doc):
    kind: NoticeEvent
    run_id: str | None = Field(description="the dead-lettered run (run_dead)")
    detail: str
    occurred_at: str


class Notice(_Doc):
    """A message to one channel about one job: a ``notice``, or a ``digest`` of the events
    the hour's window held back (at most one message per channel and job an hour)."""

    id: int
    channel_id: int
    channel_type: ChannelKind
    job_id: int
    type: Literal["notice", "digest"]
    events: list[NoticeEventItem]
    status: NoticeStatus
    attempts: int
    last_error: str | None
    created_at: str
    next_attempt_at: str | None = Field(description="pending: when it is tried next")
    sent_at: str | None


class NoticeList(_Doc):
    items: list[Notice]
    held: int = Field(description="events waiting for their message: the sender's next "
                                  "turn, or the end of their job's hour")
