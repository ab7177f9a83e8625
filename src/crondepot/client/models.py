"""What the API answers, as typed dictionaries: the JSON documents themselves.

A TypedDict is the decoded JSON with its keys typed: nothing is copied or converted, and a
field a newer server adds is kept rather than refused. Times are RFC 3339 strings as the API
sends them (``datetime.fromisoformat`` reads them). ``SCHEMAS`` names the OpenAPI schema
each one is; a test fails when a schema, or a property of one, has no counterpart here.
"""

# No `from __future__ import annotations`: TypedDict reads NotRequired only from evaluated
# annotations (Python 3.11), and __optional_keys__ must say which keys may be absent.
from typing import Any, Literal, NotRequired, TypedDict

Priority = Literal["urgent", "normal", "bulk"]
RunStatus = Literal["queued", "running", "succeeded", "failed", "dead", "skipped", "cancelled"]


class JobPause(TypedDict):
    note: str | None
    paused_at: str | None
    paused_by: str | None


class Job(TypedDict):
    """A stored job: its document (as the API takes it, defaults filled in) and its state."""

    id: int
    key: str | None
    cron: NotRequired[str | list[str]]     # a list when the job has several crons
    every: NotRequired[str]                 # an interval ("90s"), instead of cron or at
    anchor: NotRequired[str]                # the interval's anchor instant
    at: NotRequired[str]
    tz: str
    priority: Priority
    target: dict[str, Any]
    payload: dict[str, Any]
    misfire: dict[str, Any] | None
    catchup: Literal["all", "latest"]
    max_catchup: int
    spread: NotRequired[dict[str, Any] | None]
    retry: dict[str, Any] | None
    lease_seconds: int
    rate_limit: str | None
    active: bool
    start_at: str | None
    end_at: str | None
    max_runs: int | None
    labels: dict[str, str] | None
    alert_after_failures: int | None
    pause_after_failures: int | None
    overlap: Literal["allow", "skip", "buffer_one", "replace"]
    calendar: dict[str, Any] | None         # {"exclude": name, "on_excluded", "business_days"}
    delivery_window: dict[str, Any] | str | None    # {"from", "to", "days", "outside"}, "none"
    paused: bool
    pause: JobPause | None
    next_run_at: str | None
    next_nominal_at: str | None
    version: int
    created_at: str
    updated_at: str
    cancelled_at: str | None
    fire_count: int
    ended_at: str | None
    ended_reason: Literal["completed", "end_at", "max_runs"] | None


class JobHealth(TypedDict):
    unhealthy: bool
    consecutive_failures: int
    alert_after_failures: int
    threshold_from: Literal["job", "tenant"]
    last_success_at: str | None
    last_success_run_id: str | None


class JobWithHealth(Job):
    health: JobHealth


class JobPage(TypedDict):
    items: list[Job]
    next_cursor: str | None


class Run(TypedDict):
    run_id: str
    job_id: int
    priority: Priority
    status: RunStatus
    nominal_at: str
    due_at: str
    attempt: int
    available_at: str
    lease_owner: str | None
    lease_expires_at: str | None
    first_claimed_at: str | None
    started_at: str | None
    finished_at: str | None
    skip_reason: str | None
    last_error: str | None
    error_class: str | None
    result: Any
    created_at: str
    updated_at: str


class ListedRun(Run):
    """A run as the list across jobs shows it: with its job's key, and the time it is
    ordered by."""

    job_key: str | None
    ended_at: str


class Attempt(TypedDict):
    attempt: int
    started_at: str | None
    ended_at: str | None
    outcome: Literal["running", "succeeded", "failed", "dead", "skipped", "retried",
                     "lease_expired"]
    error: str | None
    error_class: str | None
    worker: str | None


class RunDetail(Run):
    worker: str | None
    attempts: list[Attempt]


class RunPage(TypedDict):
    items: list[Run]
    next_cursor: str | None


class ListedRunPage(TypedDict):
    items: list[ListedRun]
    next_cursor: str | None


class TriggerResult(TypedDict):
    run_id: str
    created: bool
    run: Run


class RetryResult(TypedDict):
    run_id: str
    previous_status: Literal["failed", "dead"]
    run: Run


class DeadRun(TypedDict):
    run_id: str
    job_id: int
    job_key: str | None
    priority: Priority
    nominal_at: str
    due_at: str
    attempt: int
    finished_at: str
    error_class: str | None
    last_error: str | None


class DeadRunList(TypedDict):
    items: list[DeadRun]
    next_cursor: str | None


class ReplayResult(TypedDict):
    dry_run: bool
    count: int
    items: list[DeadRun]
    past_deadline: int
    past_deadline_run_ids: list[str]


# "from" is a Python keyword: the functional form names it.
BackfillResult = TypedDict("BackfillResult", {
    "job_id": int, "from": str, "to": str, "dry_run": bool, "fires": int, "written": int,
    "written_skipped": int, "requeued": int, "held_past_deadline": int,
    "already_had_row": int, "pending_from": str | None, "next_from": str | None,
    "written_run_ids": list[str], "written_skipped_run_ids": list[str],
    "requeued_run_ids": list[str], "held_past_deadline_run_ids": list[str],
    "run_ids_listed_at_most": int})


class BulkResult(TypedDict):
    action: Literal["pause", "resume", "cancel"]
    dry_run: bool
    count: int
    sample: list[str]


class LineError(TypedDict):
    line: int
    field: str
    message: str


class ImportResult(TypedDict):
    lines: int
    created: int
    existing: int
    failed: int
    errors: list[LineError]


class HoldChange(TypedDict):
    kind: str
    name: str
    held: bool
    changed: bool


class HoldItem(TypedDict):
    kind: str
    name: str
    created_at: str
    created_by: str
    queued: int


class HoldList(TypedDict):
    items: list[HoldItem]


class Limit(TypedDict):
    name: str
    rate_per_second: float
    burst: int
    owned: bool


class LimitList(TypedDict):
    items: list[Limit]


class Calendar(TypedDict):
    """A tenant's exclusion calendar: its dates (YYYY-MM-DD, sorted) and their count."""

    name: str
    dates: list[str]
    count: int
    version: int
    created_at: str
    updated_at: str


class CalendarList(TypedDict):
    items: list[Calendar]


class Channel(TypedDict):
    """A notification channel: ``type`` webhook (its ``url``) or email (its ``address``)."""

    id: int
    type: str
    url: NotRequired[str | None]
    address: NotRequired[str | None]
    created_at: str


class ChannelList(TypedDict):
    items: list[Channel]


class NoticeEventItem(TypedDict):
    """What happened: ``kind`` job_unhealthy, run_dead or job_ended."""

    kind: str
    run_id: str | None
    detail: str
    occurred_at: str


class Notice(TypedDict):
    """A message to one channel about one job (``type`` notice or digest) and how its
    delivery stands (``status`` pending, sent or failed, with ``last_error``)."""

    id: int
    channel_id: int
    channel_type: str
    job_id: int
    type: str
    events: list[NoticeEventItem]
    status: str
    attempts: int
    last_error: str | None
    created_at: str
    next_attempt_at: str | None
    sent_at: str | None


class NoticeList(TypedDict):
    items: list[Notice]
    held: int


class ApplyPlan(TypedDict):
    """What an apply changed (or, as a dry run, would change): ``counts`` (created,
    updated, cancelled, unchanged, changes, runs_cancelled, fires_added, fires_removed)
    and one entry of ``changes`` by key (action, id, fields, the fires added and removed
    over the next ``days``)."""

    scope: dict[str, str] | None
    prune: bool
    dry_run: bool
    days: int
    counts: dict[str, int]
    changes: list[dict[str, Any]]


class Token(TypedDict):
    id: int
    role: Literal["admin", "read"]
    label: str | None
    created_at: str
    last_used_at: str | None
    revoked_at: str | None


class NewToken(Token):
    """A token just issued: ``token`` is shown this once."""

    token: str


class TokenList(TypedDict):
    items: list[Token]


class RotatedSecret(TypedDict):
    signing_secret: str
    rotated_at: str
    previous_valid_until: str


class ForecastMinute(TypedDict):
    minute: str
    runs: int


class ForecastDeadline(TypedDict):
    deadline: str
    runs: int


class ForecastWave(TypedDict):
    start: str
    runs: int
    sent: int
    drained_at: str | None
    past_deadline: int
    deadlines: list[ForecastDeadline]


class ForecastLimit(TypedDict):
    rate_limit: str | None
    status: str
    held_by: str | None
    rate_per_second: float | None
    burst: int | None
    shared: bool
    tokens_now: float | None
    runs: int
    queued_now: int
    past_deadline: int
    per_minute: list[ForecastMinute]
    waves: list[ForecastWave]
    waves_omitted: int


class Forecast(TypedDict):
    now: str
    until: str
    hours: int
    jobs: int
    groups: int
    runs: int
    queued_now: int
    past_deadline: int
    skipped: dict[str, int]
    unreadable_jobs: int
    order: str
    limits: list[ForecastLimit]
    seconds: float


class LedgerFire(TypedDict):
    job_id: int
    tenant_id: int
    job_key: str | None
    nominal_at: str
    run_id: str
    rows: int


class LedgerUnreadable(TypedDict):
    cron: str
    tz: str
    error: str
    job_ids: list[int]


class LedgerReport(TypedDict):
    since: str
    until: str
    fires: int
    pending: int
    oldest_pending: str | None
    unaccounted_count: int
    duplicated_count: int
    unaccounted: list[LedgerFire]
    duplicated: list[LedgerFire]
    unreadable: list[LedgerUnreadable]
    seconds: float
    clean: bool


class QueueStats(TypedDict):
    ready: int
    waiting: int
    oldest_ready_seconds: float | None


class LagStats(TypedDict):
    samples: int
    p50_seconds: float | None
    p99_seconds: float | None


class Stats(TypedDict):
    queue: dict[str, QueueStats]
    lag: LagStats
    dead_letter: int
    finished_last_hour: dict[str, int]


class AuditEntry(TypedDict):
    id: int
    at: str
    actor: str
    action: str
    subject: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class AuditPage(TypedDict):
    items: list[AuditEntry]
    next_cursor: str | None


class Status(TypedDict):
    """/readyz: ``{"status": "ready"}``."""

    status: str


class Health(TypedDict):
    """/healthz: ``{"status": "ok", "version": "0.1.0", "schema_revision": 31}``."""

    status: str
    version: str
    schema_revision: int


# Each OpenAPI response schema and the TypedDict that is it (tests/api/test_client_coverage.py
# checks their properties match). The request schemas (JobDocument, JobPatch, BulkRequest,
# ...) are the methods' parameters: see REQUEST_SCHEMAS in crondepot.client.operations.
SCHEMAS: dict[str, type[Any]] = {
    "Job": Job, "JobPause": JobPause, "JobHealth": JobHealth, "JobWithHealth": JobWithHealth,
    "JobPage": JobPage, "Run": Run, "ListedRun": ListedRun, "Attempt": Attempt,
    "RunDetail": RunDetail, "RunPage": RunPage, "ListedRunPage": ListedRunPage,
    "TriggerResult": TriggerResult, "RetryResult": RetryResult, "DeadRun": DeadRun,
    "DeadRunList": DeadRunList, "ReplayResult": ReplayResult,
    "BackfillResult": BackfillResult, "BulkResult": BulkResult, "LineError": LineError,
    "ImportResult": ImportResult, "HoldChange": HoldChange, "HoldItem": HoldItem,
    "HoldList": HoldList, "Limit": Limit, "LimitList": LimitList, "Calendar": Calendar,
    "CalendarList": CalendarList, "Channel": Channel, "ChannelList": ChannelList,
    "NoticeEventItem": NoticeEventItem, "Notice": Notice, "NoticeList": NoticeList,
    "ApplyPlan": ApplyPlan, "Token": Token,
    "NewToken": NewToken, "TokenList": TokenList, "RotatedSecret": RotatedSecret,
    "LedgerFire": LedgerFire, "LedgerUnreadable": LedgerUnreadable,
    "LedgerReport": LedgerReport, "ForecastMinute": ForecastMinute,
    "ForecastDeadline": ForecastDeadline, "ForecastWave": ForecastWave,
    "ForecastLimit": ForecastLimit, "Forecast": Forecast, "QueueStats": QueueStats,
    "LagStats": LagStats, "Stats": Stats, "Health": Health,
}
