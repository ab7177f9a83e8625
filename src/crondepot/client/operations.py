"""Every API operation the client makes, as a ``Call`` builder: written once, sent by both
``Client`` and ``AsyncClient``.

To add an operation: a builder here, a method in each of sync.py and aio.py that sends it
(one line each; a test checks the two have the same signature), and its row in
``OPERATIONS``. A test fails while an operation of the API's ``/openapi.json`` has no row.

``idempotent`` says whether a call may be sent again when its first answer was lost or a
server error (crondepot.client._http): GET, PUT and DELETE are; a POST only when the route
is idempotent by design, as its builder says.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from itertools import islice
from typing import Any, TypeVar, cast

from crondepot.client import models as M
from crondepot.client._http import Call, body, params, segment
from crondepot.client.errors import ValidationError

T = TypeVar("T")
JSON_LINES = "application/x-ndjson"
ICALENDAR = "text/calendar"


def _as(_: type[T]) -> Any:
    """The reader of a JSON answer typed as ``T`` (a TypedDict: the document itself)."""
    return lambda document: cast(T, document)


def _nothing(_: Any) -> None:
    return None


def _get(path: str, kind: type[T], **query: Any) -> Call[T]:
    return Call("GET", path, _as(kind), params=params(**query), idempotent=True)


# -- jobs --------------------------------------------------------------------------------

def jobs_create(document: Mapping[str, Any]) -> Call[M.Job]:
    # A create with a key is idempotent by design: the same key and document answer the
    # stored job (200); a keyless create sent twice would make two jobs.
    return Call("POST", "/v1/jobs", _as(M.Job), json=dict(document),
                idempotent=document.get("key") is not None)


def jobs_get(job_id: int) -> Call[M.JobWithHealth]:
    return _get(f"/v1/jobs/{segment(job_id)}", M.JobWithHealth)


def jobs_get_by_key(key: str) -> Call[M.Job]:
    return _get(f"/v1/jobs/by-key/{segment(key)}", M.Job)


def jobs_list(*, cursor: str | None = None, limit: int | None = None,
              priority: str | None = None, paused: bool | None = None,
              active: bool | None = None, key_prefix: str | None = None,
              unhealthy: bool | None = None,
              labels: Mapping[str, str] | None = None) -> Call[M.JobPage]:
    label = [f"{k}={v}" for k, v in (labels or {}).items()]
    return _get("/v1/jobs", M.JobPage, cursor=cursor, limit=limit, priority=priority,
                paused=paused, active=active, key_prefix=key_prefix, unhealthy=unhealthy,
                label=label)


def jobs_update(job_id: int, changes: Mapping[str, Any], *, version: int) -> Call[M.Job]:
    # Not sent again: a lost answer of an update that was made would come back as a
    # version mismatch (the If-Match guard keeps it from being made twice).
    return Call("PATCH", f"/v1/jobs/{segment(job_id)}", _as(M.Job), json=dict(changes),
                headers={"If-Match": f'"{version}"',
                         "Content-Type": "application/merge-patch+json"})


def jobs_pause(job_id: int, *, note: str | None = None) -> Call[M.Job]:
    # Pausing a paused job changes nothing, its note included: idempotent.
    return Call("POST", f"/v1/jobs/{segment(job_id)}/pause", _as(M.Job), json=body(note=note),
                idempotent=True)


def jobs_resume(job_id: int) -> Call[M.Job]:
    # Resuming a job that is not paused changes nothing: idempotent.
    return Call("POST", f"/v1/jobs/{segment(job_id)}/resume", _as(M.Job), idempotent=True)


def jobs_trigger(job_id: int) -> Call[M.TriggerResult]:
    # A run named after the current second: sent again a second later, a second run.
    return Call("POST", f"/v1/jobs/{segment(job_id)}/trigger", _as(M.TriggerResult))


def jobs_cancel(job_id: int) -> Call[None]:
    return Call("DELETE", f"/v1/jobs/{segment(job_id)}", _nothing, idempotent=True)


def jobs_backfill(job_id: int, *, since: datetime, until: datetime | None = None,
                  include_skipped: bool = False,
                  dry_run: bool = False) -> Call[M.BackfillResult]:
    # A fire never gets a second row: idempotent by design.
    return Call("POST", f"/v1/jobs/{segment(job_id)}/backfill", _as(M.BackfillResult),
                json={**body(to=until), "from": since.isoformat(),
                      "include_skipped": include_skipped, "dry_run": dry_run},
                idempotent=True)


def jobs_put_by_key(key: str, document: Mapping[str, Any], *,
                    version: int | None = None) -> Call[M.Job]:
    # An upsert sent twice leaves the job as once (the second finds the same document and
    # changes nothing): idempotent. With If-Match it is not sent again: a lost answer of an
    # upsert that was made would come back as a version mismatch, as for an update.
    headers = {"If-Match": f'"{version}"'} if version is not None else {}
    return Call("PUT", f"/v1/jobs/by-key/{segment(key)}", _as(M.Job), json=dict(document),
                headers=headers, idempotent=version is None)


def jobs_apply(jobs: Iterable[Mapping[str, Any]], *, scope: Mapping[str, str] | None = None,
               prune: bool = False, dry_run: bool = False,
               days: int | None = None) -> Call[M.ApplyPlan]:
    # Idempotent by design: applying the same set again finds every job as the set says
    # and changes nothing (with prune, the jobs it cancelled stay cancelled).
    return Call("POST", "/v1/apply", _as(M.ApplyPlan),
                json={**body(scope=dict(scope) if scope is not None else None, days=days),
                      "prune": prune, "dry_run": dry_run,
                      "jobs": [dict(document) for document in jobs]},
                idempotent=True)


def jobs_import(documents: Iterable[Mapping[str, Any]]) -> Call[M.ImportResult]:
    # Existing keys are counted and left as they are, so an import whose every document
    # has a key may be sent again; a keyless one would be stored twice.
    lines: list[bytes] = []
    keyed = True
    for document in documents:
        keyed = keyed and document.get("key") is not None
        lines.append(json.dumps(document, separators=(",", ":")).encode())
    return Call("POST", "/v1/import", _as(M.ImportResult), content=b"\n".join(lines) + b"\n",
                headers={"Content-Type": JSON_LINES}, idempotent=keyed and bool(lines))


def jobs_import_batches(documents: Iterable[Mapping[str, Any]], batch_size: int | None
                        ) -> Iterator[tuple[int, Call[M.ImportResult]]]:
    """(documents before it, its call) of each batch of ``batch_size`` documents (None:
    one batch of them all), read from ``documents`` only as each batch is sent."""
    if batch_size is None:
        yield 0, jobs_import(documents)
        return
    if batch_size < 1:
        raise ValueError(f"expected batch_size to be at least 1, got {batch_size}")
    items = iter(documents)
    before = 0
    while batch := list(islice(items, batch_size)):
        yield before, jobs_import(batch)
        before += len(batch)
    if before == 0:
        yield 0, jobs_import([])        # no document: the API's answer to an empty body


class ImportTotals:
    """The results of an import's batches as one: counts summed, each error's line
    numbered in the whole iterable. A batch none of whose documents is valid (the API's
    422 with ``lines``) counts as that many failed lines; only when no document of the
    whole import was valid is the import refused, as the API refuses one body."""

    def __init__(self) -> None:
        self.total: M.ImportResult = {"lines": 0, "created": 0, "existing": 0, "failed": 0,
                                      "errors": []}
        self.last_refusal: ValidationError | None = None
        self.batches = 0

    def add(self, before: int, done: M.ImportResult) -> None:
        self.batches += 1
        for name in ("lines", "created", "existing", "failed"):
            self.total[name] += done[name]
        self.total["errors"].extend({**e, "line": e["line"] + before} for e in done["errors"])

    def refused(self, before: int, refusal: ValidationError) -> None:
        """Count a refused batch, or raise ``refusal`` if it is not an import's."""
        if "lines" not in refusal.problem:
            raise refusal
        self.last_refusal = refusal
        self.add(before, {"lines": refusal.problem["lines"], "created": 0, "existing": 0,
                          "failed": refusal.problem.get("failed", 0),
                          "errors": [{"line": e.line or 0, "field": e.field,
                                      "message": e.message} for e in refusal.errors]})

    def result(self) -> M.ImportResult:
        """The whole import's result; the refusal when none of its documents was valid."""
        if self.total["created"] + self.total["existing"] == 0 and \
                self.last_refusal is not None:
            if self.batches == 1:
                raise self.last_refusal         # one body: the API's own answer
            lines = self.total["lines"]
            problem = {**self.last_refusal.problem, "lines": lines,
                       "failed": self.total["failed"], "errors": self.total["errors"],
                       "detail": f"none of the {lines} lines is a valid job document; "
                                 "nothing was stored"}
            raise ValidationError(problem, status=422, headers=self.last_refusal.headers)
        return self.total


# -- bulk --------------------------------------------------------------------------------

def bulk(action: str, *, key_prefix: str | None = None,
         labels: Mapping[str, str] | None = None, host: str | None = None,
         rate_limit: str | None = None, priority: str | None = None,
         dry_run: bool = False) -> Call[M.BulkResult]:
    # Pausing, resuming or cancelling the jobs a filter matches twice leaves them as once.
    document = body(key_prefix=key_prefix, labels=dict(labels) if labels else None,
                    host=host, rate_limit=rate_limit, priority=priority)
    return Call("POST", f"/v1/jobs/bulk/{action}", _as(M.BulkResult),
                json={**document, "dry_run": dry_run}, idempotent=True)


# -- runs --------------------------------------------------------------------------------

def runs_list(*, cursor: str | None = None, limit: int | None = None,
              status: str | None = None, job_id: int | None = None, error: str | None = None,
              since: datetime | None = None,
              until: datetime | None = None) -> Call[M.ListedRunPage]:
    return _get("/v1/runs", M.ListedRunPage, cursor=cursor, limit=limit, status=status,
                job_id=job_id, error=error, since=since, until=until)


def runs_list_for_job(job_id: int, *, cursor: str | None = None,
                      limit: int | None = None) -> Call[M.RunPage]:
    return _get(f"/v1/jobs/{segment(job_id)}/runs", M.RunPage, cursor=cursor, limit=limit)


def runs_get(run_id: str) -> Call[M.RunDetail]:
    return _get(f"/v1/runs/{segment(run_id)}", M.RunDetail)


def runs_retry(run_id: str, *, ignore_deadline: bool = False) -> Call[M.RetryResult]:
    # Not sent again: once queued, the run is no longer retryable (409), which would hide
    # that the first one was made.
    return Call("POST", f"/v1/runs/{segment(run_id)}/retry", _as(M.RetryResult),
                json={"ignore_deadline": ignore_deadline})


# -- dead letter -------------------------------------------------------------------------

def dead_letter_list(*, cursor: str | None = None, limit: int | None = None,
                     job_id: int | None = None, error: str | None = None,
                     since: datetime | None = None,
                     until: datetime | None = None) -> Call[M.DeadRunList]:
    return _get("/v1/dead-letter", M.DeadRunList, cursor=cursor, limit=limit, job_id=job_id,
                error=error, since=since, until=until)


def dead_letter_replay(*, run_ids: Sequence[str] | None = None, job_id: int | None = None,
                       error: str | None = None, since: datetime | None = None,
                       until: datetime | None = None, limit: int | None = None,
                       dry_run: bool = False,
                       ignore_deadline: bool = False) -> Call[M.ReplayResult]:
    # A replay by filter sent again would also replay runs that died in between: only a
    # dry run is sent again.
    ids = list(run_ids) if run_ids is not None else None
    return Call("POST", "/v1/dead-letter/replay", _as(M.ReplayResult),
                json={**body(run_ids=ids, job_id=job_id, error=error, since=since,
                             until=until, limit=limit),
                      "dry_run": dry_run, "ignore_deadline": ignore_deadline},
                idempotent=dry_run)


# -- holds and rate limits ---------------------------------------------------------------

def holds_list() -> Call[M.HoldList]:
    return _get("/v1/holds", M.HoldList)


def hold(kind: str, name: str, action: str) -> Call[M.HoldChange]:
    # Holding what is held (or releasing what is not) changes nothing: idempotent.
    return Call("POST", f"/v1/{kind}/{segment(name)}/{action}", _as(M.HoldChange),
                idempotent=True)


def limits_list() -> Call[M.LimitList]:
    return _get("/v1/limits", M.LimitList)


def limits_get(name: str) -> Call[M.Limit]:
    return _get(f"/v1/limits/{segment(name)}", M.Limit)


def limits_put(name: str, *, rate_per_second: float,
               burst: int | None = None) -> Call[M.Limit]:
    return Call("PUT", f"/v1/limits/{segment(name)}", _as(M.Limit),
                json=body(rate_per_second=rate_per_second, burst=burst), idempotent=True)


# -- calendars ---------------------------------------------------------------------------

def calendars_list() -> Call[M.CalendarList]:
    return _get("/v1/calendars", M.CalendarList)


def calendars_get(name: str) -> Call[M.Calendar]:
    return _get(f"/v1/calendars/{segment(name)}", M.Calendar)


def calendars_put(name: str, dates: Iterable[str | date] | None = None, *,
                  ics: str | bytes | None = None) -> Call[M.Calendar]:
    # A calendar is replaced whole: sent twice, the same dates. Idempotent.
    if (dates is None) == (ics is None):
        raise ValueError("expected either dates or ics (an iCalendar file), not both")
    if isinstance(dates, str | bytes):      # a str is an iterable of one-letter strings
        raise ValueError("expected dates to be a list of dates, not one string")
    if ics is not None:
        content = ics.encode() if isinstance(ics, str) else ics
        return Call("PUT", f"/v1/calendars/{segment(name)}", _as(M.Calendar), content=content,
                    headers={"Content-Type": ICALENDAR}, idempotent=True)
    days = [d.isoformat() if isinstance(d, date) else d for d in dates or ()]
    return Call("PUT", f"/v1/calendars/{segment(name)}", _as(M.Calendar),
                json={"dates": days}, idempotent=True)


def calendars_delete(name: str) -> Call[None]:
    # Sent again after a lost answer, a delete that was made answers NotFound: the
    # calendar is gone either way.
    return Call("DELETE", f"/v1/calendars/{segment(name)}", _nothing, idempotent=True)


# -- failure notices ---------------------------------------------------------------------

def notices_channels() -> Call[M.ChannelList]:
    return _get("/v1/notification-channels", M.ChannelList)


def notices_add_channel(type: str, *, url: str | None = None,
                        address: str | None = None) -> Call[M.Channel]:
    # The same channel again answers the one there (200): idempotent by design.
    return Call("POST", "/v1/notification-channels", _as(M.Channel),
                json={"type": type, **body(url=url, address=address)}, idempotent=True)


def notices_get_channel(channel_id: int) -> Call[M.Channel]:
    return _get(f"/v1/notification-channels/{segment(channel_id)}", M.Channel)


def notices_remove_channel(channel_id: int) -> Call[None]:
    return Call("DELETE", f"/v1/notification-channels/{segment(channel_id)}", _nothing,
                idempotent=True)


def notices_list(*, status: str | None = None, before: int | None = None,
                 limit: int | None = None) -> Call[M.NoticeList]:
    return _get("/v1/notices", M.NoticeList, status=status, before=before, limit=limit)


# -- tokens ------------------------------------------------------------------------------

def tokens_list() -> Call[M.TokenList]:
    return _get("/v1/tokens", M.TokenList)


def tokens_create(*, role: str = "admin", label: str | None = None) -> Call[M.NewToken]:
    # Sent twice, two tokens: never sent again.
    return Call("POST", "/v1/tokens", _as(M.NewToken), json=body(role=role, label=label))


def tokens_revoke(token_id: int) -> Call[None]:
    return Call("DELETE", f"/v1/tokens/{segment(token_id)}", _nothing, idempotent=True)


def tokens_rotate_signing_secret(*, overlap_seconds: int | None = None
                                 ) -> Call[M.RotatedSecret]:
    # Sent twice, the first new secret would be lost: never sent again.
    return Call("POST", "/v1/signing-secret/rotate", _as(M.RotatedSecret),
                json=body(overlap_seconds=overlap_seconds))


# -- audit, ledger, service --------------------------------------------------------------

def audit_list(*, cursor: str | None = None, limit: int | None = None,
               subject: str | None = None, action: str | None = None) -> Call[M.AuditPage]:
    return _get("/v1/audit", M.AuditPage, cursor=cursor, limit=limit, subject=subject,
                action=action)


def verify(*, since: datetime | None = None,
           until: datetime | None = None) -> Call[M.LedgerReport]:
    return _get("/v1/verify", M.LedgerReport, since=since, until=until)


def forecast(*, hours: int | None = None) -> Call[M.Forecast]:
    return _get("/v1/forecast", M.Forecast, hours=hours)


def stats() -> Call[M.Stats]:
    return _get("/v1/stats", M.Stats)


def health() -> Call[M.Health]:
    return _get("/healthz", M.Health)


def ready() -> Call[M.Status]:
    return _get("/readyz", M.Status)


# Each operation of the API's OpenAPI document (by operationId) and the client method that
# makes it (the same name on Client and AsyncClient). tests/api/test_client_coverage.py
# fails when an operation has no row, or a row names no method.
OPERATIONS: dict[str, str] = {
    "jobs_create": "jobs.create",
    "jobs_read": "jobs.get",
    "job_keys_read_by_key": "jobs.get_by_key",
    "job_keys_upsert_by_key": "jobs.put_by_key",
    "apply_apply": "jobs.apply",
    "jobs_list": "jobs.list",
    "jobs_patch": "jobs.update",
    "jobs_pause": "jobs.pause",
    "jobs_resume": "jobs.resume",
    "jobs_trigger": "jobs.trigger",
    "jobs_cancel": "jobs.cancel",
    "backfill_backfill_job": "jobs.backfill",
    "imports_import_jobs": "jobs.import_documents",
    "bulk_pause": "bulk.pause",
    "bulk_resume": "bulk.resume",
    "bulk_cancel": "bulk.cancel",
    "runs_list_all_runs": "runs.list",
    "runs_list_runs": "runs.list_for_job",
    "runs_read_run": "runs.get",
    "runs_retry_run": "runs.retry",
    "deadletter_list": "dead_letter.list",
    "deadletter_replay": "dead_letter.replay",
    "holds_list": "holds.list",
    "holds_pause_limit": "holds.pause_limit",
    "holds_resume_limit": "holds.resume_limit",
    "holds_pause_host": "holds.pause_host",
    "holds_resume_host": "holds.resume_host",
    "ratelimits_list": "limits.list",
    "ratelimits_read": "limits.get",
    "ratelimits_put": "limits.put",
    "calendars_list": "calendars.list",
    "calendars_read": "calendars.get",
    "calendars_put": "calendars.put",
    "calendars_delete": "calendars.delete",
    "notices_list": "notices.channels",
    "notices_create": "notices.add_channel",
    "notices_read": "notices.get_channel",
    "notices_delete": "notices.remove_channel",
    "notices_list_notices": "notices.list",
    "tokens_list": "tokens.list",
    "tokens_create": "tokens.create",
    "tokens_revoke": "tokens.revoke",
    "tokens_rotate": "tokens.rotate_signing_secret",
    "audit_read_audit": "audit.list",
    "ledger_verify_ledger": "verify",
    "forecast_read_forecast": "forecast",
    "service_read_stats": "stats",
    "service_healthz": "health",
    "service_readyz": "ready",
}

# The request schemas of the OpenAPI document, and the method whose parameters they are.
REQUEST_SCHEMAS: dict[str, str] = {
    "JobDocument": "jobs.create",
    "JobPatch": "jobs.update",
    "PauseRequest": "jobs.pause",
    "BackfillRequest": "jobs.backfill",
    "BulkRequest": "bulk.pause",
    "ReplayRequest": "dead_letter.replay",
    "RetryRequest": "runs.retry",
    "LimitDocument": "limits.put",
    "CalendarDocument": "calendars.put",
    "ChannelDocument": "notices.add_channel",
    "ApplyRequest": "jobs.apply",
    "TokenRequest": "tokens.create",
    "SecretRotation": "tokens.rotate_signing_secret",
    # the error document: crondepot.client.errors.ApiError and its FieldError list
    "Problem": "errors",
    "FieldError": "errors",
}
