"""crondepot's closed sets and name patterns, each defined once: every layer takes them from here.

The SQL spells the same sets in its CHECK constraints and in the claim's queue order;
tests/unit/test_closed_sets.py holds each SQL spelling to the tuple below (and says which
sets have no CHECK). The API's models type their fields with these Literals, so the
OpenAPI document publishes each set as an enum (tests/api/test_openapi.py). A leaf module:
it imports nothing of crondepot, so every layer may use it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Literal, get_args

# A job's priority, in claim order (urgent first).
Priority = Literal["urgent", "normal", "bulk"]
PRIORITIES: tuple[Priority, ...] = get_args(Priority)

# A run's state. ``queued -> running -> succeeded | failed | queued (a retry) | dead``;
# ``skipped`` (a misfire rule, a deadline, a pause said no) and ``cancelled`` are written
# instead of a call.
RunState = Literal["queued", "running", "succeeded", "failed", "dead", "skipped", "cancelled"]
RUN_STATES: tuple[RunState, ...] = get_args(RunState)
# The states a finished run ends in, counted by `status` and the overview.
Outcome = Literal["succeeded", "failed", "dead", "skipped"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

# Why a run is ``skipped``. The scheduler's plan writes the first five (catch-up cut the
# fire, its misfire rule said too late, its job was paused); ``deadline_passed`` is the
# queue's: a queued run whose misfire deadline passed before a worker could call it;
# ``calendar``: the fire's local date is in its job's exclusion calendar (on_excluded: skip).
# ``overlap`` the claim's: the job's overlap policy dropped a fire that came while a run of
# the job was running (functions/claim_overlap.sql); ``replaced`` the worker's: a running
# run of an overlap `replace` job given up for a newer one (queries/queue.sql,
# record_replaced; its call cancelled, abandoned, or not started). ``restored`` the operator's:
# a fire after a restored database's restore point, of a job whose target does not drop
# repeats, that the lost timeline had most likely sent (``crondepot db restored``).
SkipReason = Literal["catchup_bound", "catchup_latest", "misfire_deadline",
                     "misfire_local_deadline", "paused", "deadline_passed", "calendar",
                     "delivery_window", "overlap", "replaced", "restored"]
SKIP_REASONS: tuple[SkipReason, ...] = get_args(SkipReason)

# Why a job ended by itself (jobs.ended_reason): its one ``at`` run is written, its window
# closed (``end_at``), or it had ``max_runs`` fires. A cancelled job has none.
# A job's overlap policy: what a fire does while a run of the same job is running (leased).
Overlap = Literal["allow", "skip", "buffer_one", "replace"]
OVERLAPS: tuple[Overlap, ...] = get_args(Overlap)

EndReason = Literal["completed", "end_at", "max_runs"]
END_REASONS: tuple[EndReason, ...] = get_args(EndReason)

# How an attempt that did not end its run ended, as run_attempts records it.
RecordedOutcome = Literal["retried", "lease_expired", "failed", "dead"]
RECORDED_OUTCOMES: tuple[RecordedOutcome, ...] = get_args(RecordedOutcome)
# The run states whose row records an attempt (made, or being made).
AttemptedState = Literal["running", "succeeded", "failed", "dead", "skipped"]
ATTEMPTED_STATES: tuple[AttemptedState, ...] = get_args(AttemptedState)
# An attempt's outcome as a run's history shows it: the latest attempt's is its run's
# state, an earlier one's is recorded.
AttemptOutcome = Literal[AttemptedState, RecordedOutcome]
ATTEMPT_OUTCOMES: tuple[AttemptOutcome, ...] = get_args(AttemptOutcome)

# What a run calls, a job document's ``target.type``. Each kind is a module of that name
# in crondepot.job.targets (what a document may say) and in crondepot.worker.targets (the
# call); both registries are built from this tuple.
TargetKind = Literal["http", "python", "amqp", "nats", "redis"]
TARGET_KINDS: tuple[TargetKind, ...] = get_args(TargetKind)

# Failure notices (notices/): a tenant's channel kinds, the events the outbox records
# (functions/notice_jobs.sql, notice_runs.sql) and a message's states.
ChannelKind = Literal["webhook", "email"]
CHANNEL_KINDS: tuple[ChannelKind, ...] = get_args(ChannelKind)
NoticeEvent = Literal["job_unhealthy", "run_dead", "job_ended"]
NOTICE_EVENTS: tuple[NoticeEvent, ...] = get_args(NoticeEvent)
NoticeStatus = Literal["pending", "sent", "failed"]
NOTICE_STATUSES: tuple[NoticeStatus, ...] = get_args(NoticeStatus)

# Names a job refers to, matched whole (``fullmatch``): a shared rate limit's and a Python
# handler's. The job document, the grants, the buckets and the holds check the same two.
# A calendar's name: a short slug ("in-bank-holidays"), as the calendars table's CHECK.
CALENDAR_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
LIMIT_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
HANDLER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """" (did you mean 'max_attempts'?)" when ``name`` is a near miss of one of ``choices``
    (a typo, a case slip), else "". A name longer than any field or handler is no near miss.
    Every "unknown name" refusal says it the same way: fields, handlers, limits, hosts."""
    if len(name) > 128:
        return ""
    close = difflib.get_close_matches(name.lower(), sorted(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""
