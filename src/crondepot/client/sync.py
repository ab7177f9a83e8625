"""``Client``: the API over httpx, blocking. ``AsyncClient`` (aio.py) has the same methods,
each awaited; both send the calls of crondepot.client.operations."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from crondepot.client import models as M
from crondepot.client import operations as ops
from crondepot.client._http import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    Call,
    RetryPolicy,
    client_options,
    result,
    transport_error,
)
from crondepot.client.errors import TransportError, ValidationError

T = TypeVar("T")


class Jobs:
    """Jobs: create, read, list, change, pause, resume, trigger, cancel, backfill, import,
    upsert by key, and apply a set of them (schedules as code)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def create(self, document: Mapping[str, Any]) -> M.Job:
        """Create a job from its document (as ``POST /v1/jobs`` takes it). With a ``key``
        the create is idempotent (the same key and document answer the stored job) and is
        retried; a different document under the key raises KeyConflict. Without a key it
        is never sent twice."""
        return self._c.send(ops.jobs_create(document))

    def get(self, job_id: int) -> M.JobWithHealth:
        """The job, with its health; NotFound for an unknown id or another tenant's."""
        return self._c.send(ops.jobs_get(job_id))

    def get_by_key(self, key: str) -> M.Job:
        """The job whose key is exactly ``key`` (cancelled ones included)."""
        return self._c.send(ops.jobs_get_by_key(key))

    def list(self, *, cursor: str | None = None, limit: int | None = None,
             priority: M.Priority | None = None, paused: bool | None = None,
             active: bool | None = None, key_prefix: str | None = None,
             unhealthy: bool | None = None,
             labels: Mapping[str, str] | None = None) -> M.JobPage:
        """One page of jobs, by id; ``next_cursor`` leads to the next (None on the last).
        ``labels``: jobs carrying every one of them."""
        return self._c.send(ops.jobs_list(
            cursor=cursor, limit=limit, priority=priority, paused=paused, active=active,
            key_prefix=key_prefix, unhealthy=unhealthy, labels=labels))

    def iter(self, *, page_size: int | None = None, priority: M.Priority | None = None,
             paused: bool | None = None, active: bool | None = None,
             key_prefix: str | None = None, unhealthy: bool | None = None,
             labels: Mapping[str, str] | None = None) -> Iterator[M.Job]:
        """Every job ``list`` would page through, one request per page as it is read."""
        return self._c.pages(lambda cursor: ops.jobs_list(
            cursor=cursor, limit=page_size, priority=priority, paused=paused, active=active,
            key_prefix=key_prefix, unhealthy=unhealthy, labels=labels))

    def update(self, job_id: int, changes: Mapping[str, Any], *, version: int) -> M.Job:
        """Change a job (a JSON merge patch of its document) if it is still at ``version``
        (its ``version`` as read); VersionMismatch otherwise. Not retried."""
        return self._c.send(ops.jobs_update(job_id, changes, version=version))

    def pause(self, job_id: int, *, note: str | None = None) -> M.Job:
        """Pause a job, saying why; pausing a paused job changes nothing (idempotent)."""
        return self._c.send(ops.jobs_pause(job_id, note=note))

    def resume(self, job_id: int) -> M.Job:
        """Resume a job from now (its missed fires are written skipped); idempotent."""
        return self._c.send(ops.jobs_resume(job_id))

    def trigger(self, job_id: int) -> M.TriggerResult:
        """Queue one run now. Not retried: a second call a second later is a second run."""
        return self._c.send(ops.jobs_trigger(job_id))

    def cancel(self, job_id: int) -> None:
        """Cancel a job (its history is kept); cancelling a cancelled job changes nothing."""
        return self._c.send(ops.jobs_cancel(job_id))

    def backfill(self, job_id: int, *, since: datetime, until: datetime | None = None,
                 include_skipped: bool = False, dry_run: bool = False) -> M.BackfillResult:
        """Write the fires of [since, until) that have no row (at most 31 days and 10,000
        fires a call: call again from ``next_from`` while it is set). Idempotent by
        design: a fire never gets a second row."""
        return self._c.send(ops.jobs_backfill(job_id, since=since, until=until,
                                              include_skipped=include_skipped,
                                              dry_run=dry_run))

    def import_documents(self, documents: Iterable[Mapping[str, Any]], *,
                         batch_size: int | None = None) -> M.ImportResult:
        """Import job documents as NDJSON: valid ones are stored, bad ones reported in
        ``errors`` by line (1 = the first document); ValidationError when none is valid.
        One body (at most 64 MiB) unless ``batch_size``: then a request per that many
        documents, the iterable read only as each is sent, and the results summed. A batch
        is retried only when every document in it has a key (existing keys are counted as
        ``existing`` and left as they are, so the whole import may be run again)."""
        totals = ops.ImportTotals()
        for before, call in ops.jobs_import_batches(documents, batch_size):
            try:
                totals.add(before, self._c.send(call))
            except ValidationError as refusal:
                totals.refused(before, refusal)
        return totals.result()

    def put_by_key(self, key: str, document: Mapping[str, Any], *,
                   version: int | None = None) -> M.Job:
        """Create or replace the job whose key is ``key`` with ``document`` (the whole
        document: fields left out take their defaults; its ``key``, if given, must be
        ``key``); the same document changes nothing. ``version`` (If-Match): the version
        read, VersionMismatch if the job is at another or does not exist. Retried without
        ``version`` (sent twice, the same job); with it, not retried (a lost answer of an
        upsert that was made would come back as VersionMismatch)."""
        return self._c.send(ops.jobs_put_by_key(key, document, version=version))

    def apply(self, jobs: Iterable[Mapping[str, Any]], *,
              scope: Mapping[str, str] | None = None, prune: bool = False,
              dry_run: bool = False, days: int | None = None) -> M.ApplyPlan:
        """Make the tenant's jobs what the set ``jobs`` (each with its key) says, all or
        nothing: upsert each by key, stamp ``scope`` (one label, {"deploy": "reminders"})
        on them, and with ``prune`` cancel the scope's jobs the set no longer names. The
        plan answered lists each change and the fires it adds and removes over the next
        ``days``; ``dry_run`` changes nothing. Idempotent by design, so retried: applying
        the same set again finds every job as it says and changes nothing."""
        call = ops.jobs_apply(jobs, scope=scope, prune=prune, dry_run=dry_run, days=days)
        return self._c.send(call)


class Bulk:
    """Pause, resume or cancel every job a filter matches (at least one criterion);
    ``dry_run`` counts them and lists a few keys. Idempotent."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def pause(self, *, key_prefix: str | None = None,
              labels: Mapping[str, str] | None = None, host: str | None = None,
              rate_limit: str | None = None, priority: M.Priority | None = None,
              dry_run: bool = False) -> M.BulkResult:
        call = ops.bulk("pause", key_prefix=key_prefix, labels=labels, host=host,
                        rate_limit=rate_limit, priority=priority, dry_run=dry_run)
        return self._c.send(call)

    def resume(self, *, key_prefix: str | None = None,
               labels: Mapping[str, str] | None = None, host: str | None = None,
               rate_limit: str | None = None, priority: M.Priority | None = None,
               dry_run: bool = False) -> M.BulkResult:
        call = ops.bulk("resume", key_prefix=key_prefix, labels=labels, host=host,
                        rate_limit=rate_limit, priority=priority, dry_run=dry_run)
        return self._c.send(call)

    def cancel(self, *, key_prefix: str | None = None,
               labels: Mapping[str, str] | None = None, host: str | None = None,
               rate_limit: str | None = None, priority: M.Priority | None = None,
               dry_run: bool = False) -> M.BulkResult:
        call = ops.bulk("cancel", key_prefix=key_prefix, labels=labels, host=host,
                        rate_limit=rate_limit, priority=priority, dry_run=dry_run)
        return self._c.send(call)


class Runs:
    """Runs across jobs and per job, one run with its attempts, and retrying one."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self, *, cursor: str | None = None, limit: int | None = None,
             status: M.RunStatus | None = None, job_id: int | None = None,
             error: str | None = None, since: datetime | None = None,
             until: datetime | None = None) -> M.ListedRunPage:
        """One page of the tenant's runs, newest ended first."""
        return self._c.send(ops.runs_list(cursor=cursor, limit=limit, status=status,
                                          job_id=job_id, error=error, since=since,
                                          until=until))

    def iter(self, *, page_size: int | None = None, status: M.RunStatus | None = None,
             job_id: int | None = None, error: str | None = None,
             since: datetime | None = None,
             until: datetime | None = None) -> Iterator[M.ListedRun]:
        return self._c.pages(lambda cursor: ops.runs_list(
            cursor=cursor, limit=page_size, status=status, job_id=job_id, error=error,
            since=since, until=until))

    def list_for_job(self, job_id: int, *, cursor: str | None = None,
                     limit: int | None = None) -> M.RunPage:
        """One page of a job's runs, newest first; NotFound for another tenant's job."""
        return self._c.send(ops.runs_list_for_job(job_id, cursor=cursor, limit=limit))

    def iter_for_job(self, job_id: int, *, page_size: int | None = None) -> Iterator[M.Run]:
        return self._c.pages(lambda cursor: ops.runs_list_for_job(job_id, cursor=cursor,
                                                                  limit=page_size))

    def get(self, run_id: str) -> M.RunDetail:
        return self._c.send(ops.runs_get(run_id))

    def retry(self, run_id: str, *, ignore_deadline: bool = False) -> M.RetryResult:
        """Queue a failed or dead run again (same run id); RunNotRetryable or
        RunPastDeadline otherwise. Not retried."""
        return self._c.send(ops.runs_retry(run_id, ignore_deadline=ignore_deadline))


class DeadLetter:
    """The dead letter: list it, replay from it."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self, *, cursor: str | None = None, limit: int | None = None,
             job_id: int | None = None, error: str | None = None,
             since: datetime | None = None, until: datetime | None = None) -> M.DeadRunList:
        return self._c.send(ops.dead_letter_list(cursor=cursor, limit=limit, job_id=job_id,
                                                 error=error, since=since, until=until))

    def iter(self, *, page_size: int | None = None, job_id: int | None = None,
             error: str | None = None, since: datetime | None = None,
             until: datetime | None = None) -> Iterator[M.DeadRun]:
        return self._c.pages(lambda cursor: ops.dead_letter_list(
            cursor=cursor, limit=page_size, job_id=job_id, error=error, since=since,
            until=until))

    def replay(self, *, run_ids: Sequence[str] | None = None, job_id: int | None = None,
               error: str | None = None, since: datetime | None = None,
               until: datetime | None = None, limit: int | None = None,
               dry_run: bool = False, ignore_deadline: bool = False) -> M.ReplayResult:
        """Queue dead runs again (same run ids), at least one filter given. Retried only
        as a dry run (sent again, it would replay runs that died in between)."""
        return self._c.send(ops.dead_letter_replay(
            run_ids=run_ids, job_id=job_id, error=error, since=since, until=until,
            limit=limit, dry_run=dry_run, ignore_deadline=ignore_deadline))


class Holds:
    """Holds on the tenant's queued runs of a rate limit or a host (jobs untouched).
    Holding what is held, or releasing what is not, changes nothing (idempotent)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self) -> M.HoldList:
        return self._c.send(ops.holds_list())

    def pause_limit(self, name: str) -> M.HoldChange:
        return self._c.send(ops.hold("limits", name, "pause"))

    def resume_limit(self, name: str) -> M.HoldChange:
        return self._c.send(ops.hold("limits", name, "resume"))

    def pause_host(self, host: str) -> M.HoldChange:
        return self._c.send(ops.hold("hosts", host, "pause"))

    def resume_host(self, host: str) -> M.HoldChange:
        return self._c.send(ops.hold("hosts", host, "resume"))


class Limits:
    """The rate limits the tenant may use; its own ones it may create and change."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self) -> M.LimitList:
        return self._c.send(ops.limits_list())

    def get(self, name: str) -> M.Limit:
        return self._c.send(ops.limits_get(name))

    def put(self, name: str, *, rate_per_second: float, burst: int | None = None) -> M.Limit:
        """Create or change a limit of the tenant's own (LimitNotOwned for a shared one)."""
        return self._c.send(ops.limits_put(name, rate_per_second=rate_per_second,
                                           burst=burst))


class Calendars:
    """The tenant's exclusion calendars (a job names one in ``calendar.exclude``). A
    calendar is replaced whole, from its dates or an iCalendar file."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self) -> M.CalendarList:
        return self._c.send(ops.calendars_list())

    def get(self, name: str) -> M.Calendar:
        return self._c.send(ops.calendars_get(name))

    def put(self, name: str, dates: Iterable[str | date] | None = None, *,
            ics: str | bytes | None = None) -> M.Calendar:
        """Create or replace a calendar with ``dates`` (YYYY-MM-DD strings or dates), or
        with the all-day events of ``ics``, an iCalendar file (one of the two). Retried:
        sent twice, the same dates."""
        return self._c.send(ops.calendars_put(name, dates, ics=ics))

    def delete(self, name: str) -> None:
        """Delete a calendar no live job names (CalendarInUse otherwise, with some of their
        ids). Retried: if the first answer was lost, the retry may answer NotFound (the
        calendar is gone either way)."""
        return self._c.send(ops.calendars_delete(name))


class Notices:
    """The tenant's failure notices: its notification channels (a webhook signed as run
    deliveries are, or an e-mail address) and the notices sent to them."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def channels(self) -> M.ChannelList:
        return self._c.send(ops.notices_channels())

    def add_channel(self, type: str, *, url: str | None = None,
                          address: str | None = None) -> M.Channel:
        """Add a channel: ``type`` "webhook" with ``url``, or "email" with ``address``. The
        same channel again answers the one there. Retried."""
        return self._c.send(ops.notices_add_channel(type, url=url, address=address))

    def get_channel(self, channel_id: int) -> M.Channel:
        return self._c.send(ops.notices_get_channel(channel_id))

    def remove_channel(self, channel_id: int) -> None:
        """Remove a channel with its waiting events and notices. Retried: a lost first
        answer makes the retry a NotFound (the channel is gone either way)."""
        return self._c.send(ops.notices_remove_channel(channel_id))

    def list(self, *, status: str | None = None, before: int | None = None,
                   limit: int | None = None) -> M.NoticeList:
        """Notices newest first (``status``: pending, sent or failed); ``before``: only
        those with a smaller id (the next page)."""
        return self._c.send(ops.notices_list(status=status, before=before, limit=limit))


class Tokens:
    """The tenant's API tokens (any token lists them; issuing, revoking and rotating the
    webhook signing secret need an admin token)."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self) -> M.TokenList:
        return self._c.send(ops.tokens_list())

    def create(self, *, role: str = "admin", label: str | None = None) -> M.NewToken:
        """Issue a token; its ``token`` is shown this once. Not retried."""
        return self._c.send(ops.tokens_create(role=role, label=label))

    def revoke(self, token_id: int) -> None:
        """Revoke a token (TokenConflict for the tenant's last admin token)."""
        return self._c.send(ops.tokens_revoke(token_id))

    def rotate_signing_secret(self, *, overlap_seconds: int | None = None
                              ) -> M.RotatedSecret:
        """A new webhook signing secret (shown once); the old one signs during the
        overlap. Not retried."""
        return self._c.send(ops.tokens_rotate_signing_secret(overlap_seconds=overlap_seconds))


class Audit:
    """Who changed which job or run, newest first."""

    def __init__(self, client: Client) -> None:
        self._c = client

    def list(self, *, cursor: str | None = None, limit: int | None = None,
             subject: str | None = None, action: str | None = None) -> M.AuditPage:
        return self._c.send(ops.audit_list(cursor=cursor, limit=limit, subject=subject,
                                           action=action))

    def iter(self, *, page_size: int | None = None, subject: str | None = None,
             action: str | None = None) -> Iterator[M.AuditEntry]:
        return self._c.pages(lambda cursor: ops.audit_list(
            cursor=cursor, limit=page_size, subject=subject, action=action))


class Client:
    """The crondepot API for one tenant's token.

    ``timeout``: seconds for each request (connect, read, write). ``retries``: how many
    times a call may be sent again after a 429, a 503 or a lost connection (see
    ``crondepot.client._http``; a ``RetryPolicy`` gives the backoff too). ``transport``:
    an httpx transport (a proxy, a test's). Use it as a context manager, or ``close()``.
    """

    def __init__(self, base_url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, retry: RetryPolicy | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.policy = retry or RetryPolicy(retries=retries)
        self.http = httpx.Client(transport=transport,
                                 **client_options(base_url, token, timeout))
        self.jobs = Jobs(self)
        self.bulk = Bulk(self)
        self.runs = Runs(self)
        self.dead_letter = DeadLetter(self)
        self.holds = Holds(self)
        self.limits = Limits(self)
        self.calendars = Calendars(self)
        self.notices = Notices(self)
        self.tokens = Tokens(self)
        self.audit = Audit(self)

    def verify(self, *, since: datetime | None = None,
               until: datetime | None = None) -> M.LedgerReport:
        """The ledger check of the tenant's jobs (default: the last 24 hours)."""
        return self.send(ops.verify(since=since, until=until))

    def forecast(self, *, hours: int | None = None) -> M.Forecast:
        """The tenant's runs over the next ``hours`` (24) against its rate limits."""
        return self.send(ops.forecast(hours=hours))

    def stats(self) -> M.Stats:
        return self.send(ops.stats())

    def health(self) -> M.Health:
        """/healthz: the process is up; its release and schema revision."""
        return self.send(ops.health())

    def ready(self) -> M.Status:
        """/readyz: the database answers and its schema is current (Unavailable if not)."""
        return self.send(ops.ready())

    def send(self, call: Call[T]) -> T:
        """Send ``call``, again as the retry policy allows; its result, or its error."""
        attempt = 0
        while True:
            outcome: httpx.Response | TransportError
            try:
                outcome = self.http.send(call.request(self.http))
            except httpx.TransportError as exc:
                outcome = transport_error(exc)
            wait = self.policy.delay(call, outcome, attempt)
            if wait is None:
                return result(call, outcome)
            time.sleep(wait)
            attempt += 1

    def pages(self, page: Callable[[str | None], Call[Any]]) -> Iterator[Any]:
        """The items of every page, following ``next_cursor``; a page is fetched when
        the one before is used up."""
        cursor: str | None = None
        while True:
            got = self.send(page(cursor))
            yield from got["items"]
            cursor = got["next_cursor"]
            if cursor is None:
                return

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()
