"""Fault-injection run: the whole system under crashes, restarts and a misbehaving gateway.

Proves the promise with figures (docs/reliability.md): a crash causes a late run, never a lost one,
and a repeat never reaches a target that drops repeated keys.

What it does (everything on loopback, nothing on the machine's shared PostgreSQL):

- starts a private PostgreSQL (``testkit/crondepot_testkit/cluster.py``: pgserver's binaries,
  a free port), migrates it, creates a tenant and a shared rate limit ``sms-gateway`` a
  little under the gateways' own limit;
- starts two in-process gateways (``bench/gateway.py``): one drops repeated idempotency keys
  (jobs with ``"dedupes": true``), one does not (``"dedupes": false``);
- creates thousands of every-minute jobs (spread over 50 s of the minute, ``run_late``,
  catch-up ``all``, lease 15 s, target timeout 3 s), half to each gateway, plus a 9 a.m.-style
  spike: thousands of jobs due at one fixed UTC minute a little into the run, unspread;
  and a few jobs under each schedule rule of issue 31 (``create_rule_jobs``): a calendar
  holding the run's dates (every fire skipped ``calendar``, no call), a delivery window
  opening a couple of minutes in (no call before it), ``overlap: skip`` with a gateway
  answer slower than the minute (no two calls of a job in flight at once); and every-minute
  jobs publishing to NATS JetStream (the broker target that deduplicates), on a stream of
  the run's own on the machine's NATS (``CRONDEPOT_CHAOS_NATS``, default 127.0.0.1:4222),
  whose messages are counted per ``Nats-Msg-Id``: a duplicate effect there is a message
  stored twice;
- runs 3 ``crondepot scheduler`` copies (one under ``faketime -f +2h``: a skewed host clock;
  its wall clock only, see ``start_services``) and 3 ``crondepot worker`` processes as real
  processes, each in its own process group; the first scheduler and the first worker take
  their hot path through a private PgBouncer in transaction mode (deploy/pgbouncer/
  pgbouncer.ini, ``--pooled-db`` as a role that sees every tenant; their LISTEN and
  maintenance direct), so the faults hit pooled and direct processes side by side
  (``--no-pgbouncer``: all direct; without pgbouncer installed, all direct and the report
  says so);
- injects faults on a schedule proportional to the duration: ``kill -9`` of a random
  scheduler or worker every few seconds (restarted a second later); one PostgreSQL restart
  (``pg_ctl stop -m immediate`` + start); one worker ``SIGSTOP``-ed for lease + 10 s, then
  ``SIGCONT``-ed; a 503 storm (half of all requests) and an outage (every request 503) at
  both gateways. Every fault is logged with its time;
- meanwhile an operator works (docs/ledger.md): about 1 % of the every-minute jobs a minute get
  an edit (payload, cron ``* * * * *`` <-> ``*/2 * * * *``, or spread seconds) through
  ``update_job``, some are paused and resumed a little later (the last few stay paused),
  and ``crondepot import`` loads NDJSON files with bad lines (invalid JSON, a bad cron
  field, an unknown zone, a payload over 16 KiB as PostgreSQL stores it), one of them when
  PostgreSQL restarts, and one again to show it is idempotent. Every action retries through
  the restart (re-reading the job's version: an attempt that failed may have committed) and
  is logged with its time and the database time it took effect;
- stops injecting at 80 % of the window, keeps the load until the cut-off, then waits
  (bounded) until every expected run is final, runs ``crondepot verify`` (a real process)
  over the window, stops every process with SIGTERM and computes the report: expected,
  delivered, missed, duplicate effects, raw duplicates with their cause, wrongly skipped,
  dead letters, lateness, recovery after each fault; the operator's actions, the touched
  jobs' fires by row status, verify's figures, and the ledger checked against the script's
  own model of every job's timetable (its edits and pauses included).

The expected runs come from that model: each job's first run, then its timetable, changed at
the database time of each edit (the fires up to it keep the old timetable and spread), with
the fires of a pause recorded ``skipped``/``paused`` at its resume, and those after a pause
that was never resumed pending (no row: ``verify`` counts them as pending).

The report is printed and written to ``docs/reliability.md`` (its figures section for this
mode is replaced; the prose around it is kept). Exit status 1 when missed > 0, duplicate
effects > 0, a run_late run was skipped, ``verify`` is not clean (or its pending fires are
not the still-paused jobs'), the rows or the gateways' requests differ from the model, an
edited payload did not reach a later fire, or an import lost a good line; 2 on a setup
failure.

    python bench/chaos.py --ci             # 3 minutes, smaller load (CI; about 5 min wall)
    python bench/chaos.py --minutes 10     # the full run recorded in docs/reliability.md
    python bench/chaos.py --ci --no-operator   # the faults alone
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import math
import os
import platform
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

import patroni_cluster
from crondepot.db import connect, migrate
from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.job.spec import JobSpec
from crondepot.job.store import (
    JobFilter,
    StoredJob,
    VersionMismatch,
    create_jobs,
    get_job,
    list_jobs,
    pause_job,
    resume_job,
    update_job,
)
from crondepot.limits.buckets import set_limit
from crondepot.tenancy import connections
from crondepot.tenancy.calendars import set_calendar
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant
from crondepot.timetable import run_id
from crondepot_testkit.brokers import PrivateStream, StoredMessage
from crondepot_testkit.chaos_model import (
    TARGET_ALLOWLIST,
    Change,
    Expected,
    Fault,
    Job,
    attribute,
    calls_before,
    clock,
    expected_runs,
    job_fires,
    overlapping_calls,
)
from crondepot_testkit.cluster import PrivateCluster
from crondepot_testkit.deploy import process_env
from crondepot_testkit.pgbouncer import PgBouncer, make_pooled_role, pgbouncer_binary
from gateway import Gateway, Request

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
FAILOVER_DOC = ROOT / "docs" / "availability.md"
# The failover run's events, in this order (bench/patroni_cluster.py), and how long the
# partition and the etcd outage last.
FAILOVER_EVENTS = ("kill-postmaster", "switchover", "kill-patroni", "partition",
                   "etcd-outage")
FAILOVER_HOLD_S = 20.0
# A supervisor (systemd Restart=always) starts Patroni again, after its leader key (ttl
# 10 s) has expired: the replica is promoted while the old postmaster still runs.
PATRONI_RESTART_S = 20.0
# Back to work (issue 36): from the moment the primary of an event's end first commits a
# write (its own node asked directly, every WRITE_PROBE_S) to the first 200 at a gateway
# after it. The goal is 5 s; the CI run fails above this.
BACK_TO_WORK_LIMIT_S = 10.0
WRITE_PROBE_S = 0.2
TENANT = "chaos"
FINAL = ("succeeded", "failed", "dead", "skipped", "cancelled")
SPREAD_SECONDS = 50
LIMIT_NAME = "sms-gateway"
SKEW = "+2h"
# The schedule rules' jobs (issue 31; chaos_model's docstring): a few of each, every minute.
RULE_JOBS = 3
RULE_CALENDAR = "chaos-today"
CALENDAR_ZONES = ("Asia/Kolkata", "UTC", "America/New_York")
# The window opens at the first whole minute this long after the jobs are created: before
# the CI run's cut-off (services start ~10 s after, the window is 180 s), so its deferred
# fires are expected runs, not only drained ones.
WINDOW_LEAD_S = 90
SLOW_S = 70.0                # the overlap jobs' gateway answer: longer than their minute
SLOW_TIMEOUT_S = 85.0        # their target timeout, and lease (> the answer)
SLOW_LEASE_S = 100
CLAIM_GRACE_S = 5.0   # a worker's poll interval (1 s) and a claim under load, with room
NATS_URL = os.environ.get("CRONDEPOT_CHAOS_NATS", "nats://127.0.0.1:4222")


@dataclass(frozen=True, slots=True)
class Plan:
    mode: str                   # "ci" or "full": which figures section of the doc
    minutes: float
    every_minute_jobs: int
    spike_jobs: int
    spike_lead_s: float         # the spike minute is the first whole minute after this
    schedulers: int = 3
    workers: int = 3
    concurrency: int = 15
    lease_s: int = 15
    timeout_s: float = 3.0
    gateway_rate: float = 150.0  # each gateway's own limit (429 beyond)
    limit_rate: float = 130.0    # crondepot's shared limit, a little under it
    kill_every_s: float = 6.0
    storm_s: float = 30.0
    outage_s: float = 60.0
    drain_s: float = 180.0
    operator: bool = True        # edits, pauses and imports while the faults run
    edit_share: float = 0.01     # of the every-minute jobs edited per minute
    pause_every_s: float = 10.0  # one job paused this often (on average)
    pause_hold_s: tuple[float, float] = (20.0, 90.0)   # resumed after this long
    left_paused: int = 2         # the last pauses are never resumed: pending fires
    import_good: int = 40        # good lines per import file (plus the bad ones)
    failover: bool = False       # a Patroni cluster and its events instead of the faults
    synchronous: bool = True     # Patroni's synchronous_mode (failover runs)
    strict: bool = True          # and synchronous_mode_strict
    broker_jobs: int = 0         # every-minute jobs publishing to NATS JetStream
    ttl: int = patroni_cluster.DEFAULT_TTL   # Patroni's leader-key ttl (failover runs)
    pgbouncer: bool = True       # the first scheduler and worker through a private PgBouncer

    @property
    def window_s(self) -> float:
        return self.minutes * 60


def plan_for(args: argparse.Namespace) -> Plan:
    if args.failover:
        # docs/availability.md's deployment: two PostgreSQL nodes under Patroni, 2 schedulers and
        # 2 workers on the multi-host URL; one event at a time, the cluster healthy before
        # each. --ci: 4 minutes (5 with a ttl over 10 s: the partition then lasts ttl + 15 s,
        # and the etcd outage must still end before the cut-off); otherwise --minutes (at
        # least 5).
        minutes = (4.0 if args.ttl <= patroni_cluster.DEFAULT_TTL else 5.0) if args.ci \
            else max(5.0, args.minutes)
        mode = ("failover" + ("" if args.sync else "-async")
                + ("" if args.strict or not args.sync else "-not-strict")
                + ("" if args.ttl == patroni_cluster.DEFAULT_TTL else f"-ttl{args.ttl}")
                + ("-ci" if args.ci else ""))
        return Plan(mode=mode, minutes=minutes, every_minute_jobs=600, spike_jobs=1000,
                    spike_lead_s=60, schedulers=2, workers=2, drain_s=60,
                    operator=not args.no_operator, pause_every_s=15.0,
                    pause_hold_s=(15.0, 45.0), import_good=20, failover=True,
                    synchronous=args.sync, strict=args.strict, ttl=args.ttl)
    if args.ci:
        return Plan(mode="ci", minutes=3, every_minute_jobs=1200, spike_jobs=1000,
                    spike_lead_s=60, kill_every_s=8, storm_s=20, outage_s=20, drain_s=40,
                    operator=not args.no_operator, pause_every_s=8.0,
                    pause_hold_s=(15.0, 45.0), import_good=20, broker_jobs=60,
                    pgbouncer=not args.no_pgbouncer)
    return Plan(mode="full", minutes=args.minutes, every_minute_jobs=args.jobs,
                spike_jobs=args.spike, spike_lead_s=min(150.0, args.minutes * 20),
                operator=not args.no_operator, broker_jobs=200,
                pgbouncer=not args.no_pgbouncer)


# -- processes ---------------------------------------------------------------------------


class Service:
    """One crondepot process (its own process group, so a faketime wrapper dies with it)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.logs = logs
        self.generation = 0
        self.popen: subprocess.Popen[bytes] | None = None
        self.log_paths: list[Path] = []
        self.started_at = 0.0

    def start(self) -> None:
        self.generation += 1
        path = self.logs / f"{self.name}.{self.generation}.log"
        self.log_paths.append(path)
        argv = [a.replace("{gen}", str(self.generation)) for a in self.argv]
        with path.open("wb") as log:
            self.popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                          env=self.env, start_new_session=True)
        self.started_at = time.time()

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: int) -> None:
        # The whole group, even when its leader has exited: a faketime wrapper dies of
        # SIGTERM at once, and the scheduler it started is still in the group, shutting down.
        # (The group's id cannot be reused while any member is alive.)
        if self.popen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def _group_alive(self) -> bool:
        if self.popen is None:
            return False
        try:
            os.killpg(self.popen.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)

    def terminate(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int | None:
        """Wait for the exit after ``terminate`` (of the whole group: the process a faketime
        wrapper started outlives the wrapper); kill -9 past ``timeout`` (None then)."""
        if self.popen is None:
            return None
        until = time.monotonic() + timeout
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            return None
        while self._group_alive():
            if time.monotonic() >= until:
                self.signal(signal.SIGKILL)
                return None
            time.sleep(0.05)
        return code

    def log_lines(self) -> Iterator[dict[str, Any]]:
        for path in self.log_paths:
            with contextlib.suppress(OSError):
                for line in path.read_text(errors="replace").splitlines():
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        entry = {"msg": line}
                    if isinstance(entry, dict):
                        entry["_file"] = path.name
                        yield entry


@dataclass
class Run:
    """Everything the chaos run owns, so that ``close`` can always undo it."""

    plan: Plan
    logs: Path
    cluster: PrivateCluster | patroni_cluster.PatroniCluster | None = None
    gateways: dict[str, RecordingGateway] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)   # processes that exited by themselves
    actions: list[Action] = field(default_factory=list)  # the operator's, in order
    imports: list[ImportFile] = field(default_factory=list)
    imported: list[Job] = field(default_factory=list)     # jobs the imports created
    env: dict[str, str] = field(default_factory=dict)     # for crondepot processes
    stopped_at: float | None = None   # when the services were told to stop
    plan_url: str = ""                # the database URL every process is given
    bouncer: PgBouncer | None = None  # the pooler of the first scheduler and worker
    pooled: str = "none"              # which processes go through it (the report says)
    stream: PrivateStream | None = None   # the broker jobs' NATS stream
    # failover runs: each event, and when the primary of its end first took writes
    writes_back: list[tuple[Fault, float | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _stored: list[StoredMessage] | None = None

    def stored(self) -> list[StoredMessage]:
        """The broker jobs' messages in their stream (read once, after the workers stop)."""
        if self.stream is None:
            return []
        if self._stored is None:
            self._stored = self.stream.messages()
        return self._stored

    def fault(self, kind: str, target: str = "", detail: str = "") -> Fault:
        entry = Fault(kind=kind, at=time.time(), target=target, detail=detail)
        with self.lock:
            self.faults.append(entry)
        print(f"  [{clock(entry.at)}] fault: {kind} {target} {detail}".rstrip(), flush=True)
        return entry

    def close(self) -> None:
        for service in self.services:
            service.signal(signal.SIGCONT)
            service.signal(signal.SIGKILL)
        for service in self.services:
            if service.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    service.popen.wait(timeout=5)
        for gateway in self.gateways.values():
            with contextlib.suppress(Exception):
                gateway.stop()
        if self.bouncer is not None:
            self.bouncer.close()
            self.bouncer = None
        if self.cluster is not None:
            self.cluster.destroy()
            self.cluster = None
        if self.stream is not None:
            self.stream.delete()
            self.stream = None


class RecordingGateway(Gateway):
    """The gateway, also recording the payload version (``"v"``, 0 when absent) each request
    carried, so that the report can tell whether an edited payload reached later fires."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.versions: dict[str, list[int]] = defaultdict(list)
        # every request's (arrival, end of its answer): the overlap jobs' calls in flight
        self.spans: dict[str, list[tuple[float, float]]] = defaultdict(list)

    def answer(self, key: str, attempt: int, payload: dict[str, Any]) -> tuple[int, float]:
        status, delay = super().answer(key, attempt, payload)
        slow = payload.get("slow_s")
        if status == 200 and isinstance(slow, (int, float)):
            delay = max(delay, float(slow))    # the overlap jobs' slow answer
        version = payload.get("v", 0)
        arrived = time.time()
        with self._lock:
            self.versions[key].append(version if isinstance(version, int) else -1)
            self.spans[key].append((arrived, arrived + delay))
        return status, delay


# -- setup -------------------------------------------------------------------------------


def create_load(conn: psycopg.Connection[Any], plan: Plan, tenant_id: int,
                urls: dict[str, str]) -> tuple[list[Job], datetime]:
    """Create the jobs; return them with their first nominal instant, and the spike."""
    now = conn.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
    spike = (now + timedelta(seconds=plan.spike_lead_s)).replace(second=0, microsecond=0)
    spike += timedelta(minutes=1)
    documents: list[tuple[dict[str, Any], str, str]] = []
    for i in range(plan.every_minute_jobs + plan.spike_jobs):
        every = i < plan.every_minute_jobs
        gateway = "dedupe" if i % 2 == 0 else "plain"
        doc: dict[str, Any] = {
            "key": f"{'em' if every else 'spike'}-{i}",
            "cron": "* * * * *" if every else f"{spike.minute} {spike.hour} * * *",
            "tz": "UTC",
            "target": {"type": "http", "url": urls[gateway], "timeout_s": plan.timeout_s,
                       "dedupes": gateway == "dedupe"},
            "payload": {"to": f"+4479{i:08d}", "text": "chaos"},
            "misfire": {"policy": "run_late"},
            "catchup": "all",
            "lease_seconds": plan.lease_s,
            "rate_limit": LIMIT_NAME,
        }
        if every:
            doc["spread"] = {"seconds": SPREAD_SECONDS}
        documents.append((doc, "every-minute" if every else "spike", gateway))
    jobs: list[Job] = []
    jobs += create_rule_jobs(conn, plan, tenant_id, urls, now)
    for start in range(0, len(documents), 1000):
        chunk = documents[start:start + 1000]
        specs = [JobSpec.from_document(doc) for doc, _, _ in chunk]
        created = create_jobs(conn, tenant_id, specs)
        for made, spec, (_, kind, gateway) in zip(created, specs, chunk, strict=True):
            if made.next_nominal_at is None:
                raise SystemExit(f"job {made.id} has no first run")
            jobs.append(Job(made.id, spec, kind, gateway, made.next_nominal_at))
    return jobs, spike


def create_rule_jobs(conn: psycopg.Connection[Any], plan: Plan, tenant_id: int,
                     urls: dict[str, str], now: datetime) -> list[Job]:
    """A few every-minute jobs under each schedule rule (chaos_model's docstring): a
    calendar that holds the run's local dates (the UTC date, the day before and the two
    after: any zone's date for the whole run), a delivery window opening a couple of
    minutes in, and ``overlap: skip`` with a gateway answer slower than the minute."""
    today = now.astimezone(UTC).date()
    holidays = frozenset(today + timedelta(days=d) for d in (-1, 0, 1, 2))
    set_calendar(conn, tenant_id, RULE_CALENDAR, sorted(holidays))
    opening = (now + timedelta(seconds=WINDOW_LEAD_S)).replace(second=0, microsecond=0)
    opening += timedelta(minutes=1)
    window = {"from": f"{opening:%H:%M}", "to": f"{opening + timedelta(hours=3):%H:%M}",
              "outside": "defer"}
    made: list[Job] = []
    for rule in ("calendar", "window", "overlap"):
        for i in range(RULE_JOBS):
            gateway = "dedupe" if i % 2 == 0 else "plain"
            target: dict[str, Any] = {"type": "http", "url": urls[gateway],
                                      "timeout_s": plan.timeout_s,
                                      "dedupes": gateway == "dedupe"}
            doc: dict[str, Any] = {
                "key": f"{rule}-{i}", "cron": "* * * * *", "tz": "UTC", "target": target,
                "payload": {"to": f"+4478{i:08d}", "text": f"chaos {rule}"},
                "misfire": {"policy": "run_late"}, "catchup": "all",
                "lease_seconds": plan.lease_s, "rate_limit": LIMIT_NAME}
            if rule == "calendar":
                doc["tz"] = CALENDAR_ZONES[i % len(CALENDAR_ZONES)]
                doc["calendar"] = {"exclude": RULE_CALENDAR, "on_excluded": "skip"}
            elif rule == "window":
                doc["delivery_window"] = window
            else:
                doc["overlap"] = "skip"
                doc["payload"]["slow_s"] = SLOW_S
                target["timeout_s"] = SLOW_TIMEOUT_S
                doc["lease_seconds"] = SLOW_LEASE_S
            spec = JobSpec.from_document(doc)
            (job,) = create_jobs(conn, tenant_id, [spec])
            if job.next_nominal_at is None:
                raise SystemExit(f"job {job.id} has no first run")
            made.append(Job(job.id, spec, rule, gateway, job.next_nominal_at, rule=rule,
                            holidays=holidays if rule == "calendar" else frozenset(),
                            opening=opening if rule == "window" else None))
    return made


def create_broker_jobs(conn: psycopg.Connection[Any], run: Run,
                       tenant_id: int) -> list[Job]:
    """Every-minute jobs (spread, run_late) publishing to a NATS JetStream stream of the
    run's own, through the connection ``bus`` granted to the tenant; none when the machine
    has no NATS (a note says so)."""
    plan = run.plan
    if not plan.broker_jobs:
        return []
    stream = PrivateStream(NATS_URL, prefix="crondepot-chaos")
    try:
        stream.create()
    except Exception as exc:   # no server, no JetStream: the run goes on without them
        run.notes.append(f"no NATS JetStream at {NATS_URL} ({type(exc).__name__}: {exc}): "
                         "the broker jobs were SKIPPED")
        return []
    run.stream = stream
    connections.add(conn, "bus", NATS_URL)
    grant(conn, tenant_id, connections=["bus"])
    specs = [JobSpec.from_document({
        "key": f"nats-{i}", "cron": "* * * * *", "tz": "UTC",
        "target": {"type": "nats", "connection": "bus",
                   "subject": stream.subject("reminders.sms"), "timeout_s": plan.timeout_s},
        "payload": {"to": f"+4477{i:08d}", "text": "chaos nats"},
        "misfire": {"policy": "run_late"}, "catchup": "all", "spread": {"seconds": SPREAD_SECONDS},
        "lease_seconds": plan.lease_s}) for i in range(plan.broker_jobs)]
    jobs = []
    for made, spec in zip(create_jobs(conn, tenant_id, specs), specs, strict=True):
        if made.next_nominal_at is None:
            raise SystemExit(f"job {made.id} has no first run")
        jobs.append(Job(made.id, spec, "broker", "nats", made.next_nominal_at))
    return jobs


def broker_check(run: Run, url: str) -> dict[str, Any]:
    """The broker jobs' stream: messages stored per run id (``Nats-Msg-Id``), repeats the
    stream dropped (publishes acknowledged as duplicates), and when each run's message was
    first stored (its delivery)."""
    stored = run.stored()
    per_run = Counter(m.msg_id for m in stored)
    first: dict[str, float] = {}
    for m in stored:
        first[m.msg_id] = min(first.get(m.msg_id, math.inf), m.stored)
    with connect(url, application_name="chaos-report") as conn:
        row = conn.execute("SELECT count(*) FROM runs r JOIN jobs j ON j.id = r.job_id "
                           "WHERE j.target->>'type' = 'nats' "
                           "AND (r.result->>'duplicate')::boolean").fetchone()
    return {"stream": run.stream.name if run.stream else None, "messages": len(stored),
            "runs": len(per_run),
            "duplicate_effects": sum(n - 1 for n in per_run.values()),
            "repeats_dropped": row[0] if row else 0, "first_stored": first}
def deployed_env(kind: str, url: str) -> dict[str, str]:
    """The environment the reference unit of ``kind`` gets (deploy/env: crondepot.env, then
    its own file), with this machine's values put in: the database, the gateways' loopback
    addresses allowed, and no metrics port (several copies share one host). The plan's
    flags (slots for the gateways' rate, runs kept for the analysis, a shorter grace) are
    given on the command line, over the files."""
    env = {**os.environ, **process_env(kind), "PYTHONUNBUFFERED": "1",
           "CRONDEPOT_DATABASE_URL": url, ALLOWLIST_ENV: TARGET_ALLOWLIST,
           "CRONDEPOT_METRICS_PORT": "0"}
    for name in ("CRONDEPOT_DATA_DIR", "CRONDEPOT_TENANT"):
        env.pop(name, None)
    return env


def start_services(run: Run, url: str) -> None:
    plan = run.plan
    env = deployed_env("worker", url)
    run.env = env
    crondepot = [sys.executable, "-m", "crondepot"]
    faketime = shutil.which("faketime")
    if faketime is None:
        run.notes.append("faketime is not installed (apt-get install -y faketime): the "
                         "skewed-clock scheduler fault was SKIPPED; all schedulers ran on the "
                         "host clock.")
    # The skewed host's wall clock is wrong, its monotonic clock is not. libfaketime skews
    # both by default, and Python's timed waits (a lock's acquire with a timeout, a thread's
    # join) then wait out the offset in real time: the skewed scheduler hung for two hours
    # in its shutdown, and outlived the run as an orphan of the wrapper; its tick loop's
    # waits were as long, so it ticked about once per generation. With the monotonic clock
    # left alone it ticks every second on a wall clock two hours ahead. One cost, from
    # libfaketime 0.9.10: time.sleep fails there (EINVAL), and the scheduler sleeps only
    # while it waits for the database at start, so a skewed scheduler started while the
    # database is down exits 1 and is restarted like any crashed process (the report says).
    scheduler_env = deployed_env("scheduler", url)
    skewed_env = {**scheduler_env, "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    # The first scheduler and worker through the pooler (restarts keep their command line).
    pooled = ["--pooled-db", run.bouncer.url(url)] if run.bouncer is not None else []
    for i in range(1, plan.schedulers + 1):
        skewed = i == plan.schedulers and faketime is not None
        prefix = [faketime, "-f", SKEW] if skewed and faketime else []
        name = f"scheduler-{i}" + ("-skewed" if skewed else "")
        run.services.append(Service(name, [
            *prefix, *crondepot, "scheduler", "--db", url, *(pooled if i == 1 else []),
            "--log-json", "--name", f"{name}.g{{gen}}"],
            skewed_env if skewed else scheduler_env, run.logs))
    for i in range(1, plan.workers + 1):
        name = f"worker-{i}"
        run.services.append(Service(name, [
            *crondepot, "worker", "--db", url, *(pooled if i == 1 else []),
            "--concurrency", str(plan.concurrency),
            "--urgent-only", "0", "--retention-days", "0", "--grace", "10", "--log-json",
            "--name", f"{name}.g{{gen}}"], env, run.logs))
    for service in run.services:
        service.start()


def skew_evidence(run: Run) -> str:
    """How far ahead the skewed scheduler's own clock ran (from its 'scheduler started' log)."""
    for service in run.services:
        if not service.name.endswith("-skewed"):
            continue
        for entry in service.log_lines():
            if entry.get("msg") == "scheduler started" and "ts" in entry:
                logged = datetime.fromisoformat(entry["ts"]).timestamp()
                return (f"{service.name} logged its start at {entry['ts']} "
                        f"({(logged - service.started_at) / 3600:+.2f} h from the host clock)")
        return f"{service.name}: no 'scheduler started' line found"
    return "no skewed scheduler"


# -- chaos -------------------------------------------------------------------------------


def schedule(plan: Plan) -> list[tuple[float, str]]:
    """(seconds after the start, action), proportional to the window."""
    w = plan.window_s
    if plan.failover:
        last = len(FAILOVER_EVENTS) - 1
        return [(w * (0.08 + 0.68 * i / last), event)
                for i, event in enumerate(FAILOVER_EVENTS)]
    events: list[tuple[float, str]] = []
    t = plan.kill_every_s
    while t < 0.8 * w:
        events.append((t, "kill"))
        t += plan.kill_every_s * random.uniform(0.6, 1.4)
    events += [(0.20 * w, "storm"), (0.42 * w, "outage"), (0.55 * w, "pg-restart"),
               (0.62 * w, "pause")]
    return sorted(events)


def inject(run: Run, started: float, stop: threading.Event) -> None:
    plan = run.plan
    paused: Service | None = None
    resume_at = storm_end = outage_end = math.inf
    storm: Fault | None = None
    outage: Fault | None = None
    pause_fault: Fault | None = None
    restarts: list[tuple[float, Service]] = []
    for offset, action in schedule(plan):
        while not stop.is_set():
            now = time.time()
            for due, service in list(restarts):
                if now >= due:
                    service.start()
                    restarts.remove((due, service))
            if paused is not None and now >= resume_at:
                paused.signal(signal.SIGCONT)
                assert pause_fault is not None
                pause_fault.end = now
                print(f"  [{clock(now)}] SIGCONT {paused.name}", flush=True)
                paused = None
            if storm is not None and now >= storm_end:
                for gateway in run.gateways.values():
                    gateway.faults.share_503 = 0.0
                storm.end, storm = now, None
            if outage is not None and now >= outage_end:
                outage.end, outage = now, None
            if now >= started + offset:
                break
            stop.wait(0.1)
        if stop.is_set():
            return
        if action == "kill":
            candidates = [s for s in run.services if s is not paused and s.alive]
            victim = random.choice(candidates)
            kind = "kill-worker" if victim.name.startswith("worker") else "kill-scheduler"
            run.fault(kind, f"{victim.name}.g{victim.generation}")
            victim.kill9()
            restarts.append((time.time() + 1.0, victim))
        elif action == "storm":
            storm = run.fault("storm", "both gateways", f"share_503=0.5 for {plan.storm_s:g}s")
            for gateway in run.gateways.values():
                gateway.faults.share_503 = 0.5
            storm_end = time.time() + plan.storm_s
        elif action == "outage":
            outage = run.fault("outage", "both gateways", f"every request 503 for "
                               f"{plan.outage_s:g}s")
            for gateway in run.gateways.values():
                gateway.faults.outage(plan.outage_s)
            outage_end = time.time() + plan.outage_s
        elif action == "pg-restart":
            fault = run.fault("pg-restart", "private cluster", "pg_ctl stop -m immediate; start")
            assert isinstance(run.cluster, PrivateCluster)
            run.cluster.restart("immediate")
            fault.end = time.time()
            print(f"  [{clock(fault.end)}] PostgreSQL is back "
                  f"({fault.end - fault.at:.1f}s)", flush=True)
        elif action == "pause":
            candidates = [s for s in run.services if s.name.startswith("worker") and s.alive]
            paused = random.choice(candidates)
            hold = plan.lease_s + 10
            pause_fault = run.fault("pause", f"{paused.name}.g{paused.generation}",
                                    f"SIGSTOP for {hold}s (lease {plan.lease_s}s)")
            paused.signal(signal.SIGSTOP)
            resume_at = time.time() + hold
    # Finish what is still open: restarts, the pause, the gateway faults.
    while not stop.is_set() and (restarts or paused is not None or storm or outage):
        now = time.time()
        for due, service in list(restarts):
            if now >= due:
                service.start()
                restarts.remove((due, service))
        if paused is not None and now >= resume_at:
            paused.signal(signal.SIGCONT)
            assert pause_fault is not None
            pause_fault.end, paused = now, None
        if storm is not None and now >= storm_end:
            for gateway in run.gateways.values():
                gateway.faults.share_503 = 0.0
            storm.end, storm = now, None
        if outage is not None and now >= outage_end:
            outage.end, outage = now, None
        stop.wait(0.1)


def progress(run: Run, url: str, started: float, stop: threading.Event) -> None:
    while not stop.wait(15):
        counts = {name: g.stats() for name, g in run.gateways.items()}
        depth = "?"
        with contextlib.suppress(psycopg.Error), connect(
                url, application_name="chaos-progress") as conn:
            row = conn.execute("SELECT count(*) FILTER (WHERE status = 'queued'), "
                               "count(*) FILTER (WHERE status = 'running'), "
                               "count(*) FILTER (WHERE status = 'succeeded') FROM runs"
                               ).fetchone()
            depth = f"queued {row[0]}, running {row[1]}, succeeded {row[2]}" if row else "?"
        delivered = sum(c["keys_delivered"] for c in counts.values())
        print(f"  [{clock(time.time())}] t+{time.time() - started:5.0f}s delivered {delivered}"
              f" · requests {sum(c['requests'] for c in counts.values())} · {depth}", flush=True)


# -- the operator ------------------------------------------------------------------------


@dataclass
class Action:
    """One thing the operator did, logged like a fault."""

    kind: str                   # edit-payload, edit-cron, edit-spread, pause, resume, import,
    at: float                   # re-import; time.time() when it began
    target: str                 # "job 123", or the file
    detail: str = ""
    outcome: str = ""           # "done", or "failed: ..."
    attempts: int = 0
    committed_on_error: int = 0  # an attempt raised, yet had committed (seen on re-reading)
    errors: list[str] = field(default_factory=list)   # what the failed attempts raised
    end: float | None = None
    db_at: datetime | None = None   # the database time the change took effect

    @property
    def done(self) -> bool:
        return self.outcome.startswith("done")


@dataclass
class ImportFile:
    """An NDJSON file of job documents with bad lines among the good ones."""

    name: str
    path: Path
    prefix: str                 # the key prefix of its good lines' jobs
    good: int
    bad: dict[int, str]         # line number -> the field its error must name
    results: list[dict[str, Any]] = field(default_factory=list)   # completed CLI runs
    stored: int | None = None   # good lines found as jobs after the import


def write_import(logs: Path, number: int, plan: Plan, urls: dict[str, str]) -> ImportFile:
    """Good every-minute jobs (spread, run_late, half to each gateway) and four bad lines:
    not JSON, a bad cron field, an unknown zone, a payload PostgreSQL stores in over 16 KiB
    (1e300 written out in full: 477 bytes of JSON, 18 KB as jsonb text)."""
    prefix = f"imp{number}-"

    def document(i: int, **changes: Any) -> dict[str, Any]:
        gateway = "dedupe" if i % 2 == 0 else "plain"
        doc: dict[str, Any] = {
            "key": f"{prefix}{i}", "cron": "* * * * *", "tz": "UTC",
            "target": {"type": "http", "url": urls[gateway], "timeout_s": plan.timeout_s,
                       "dedupes": gateway == "dedupe"},
            "payload": {"to": f"+4478{number:02d}{i:06d}", "text": "imported"},
            "misfire": {"policy": "run_late"}, "catchup": "all",
            "lease_seconds": plan.lease_s, "rate_limit": LIMIT_NAME,
            "spread": {"seconds": SPREAD_SECONDS},
        }
        return {**doc, **changes}

    lines = [json.dumps(document(i)) for i in range(plan.import_good)]
    bad = [("line", '{"key": "bad-json", "cron": "* * * * *", "tz": '),
           ("cron", json.dumps(document(900, key=f"{prefix}bad-cron", cron="61 * * * *"))),
           ("tz", json.dumps(document(901, key=f"{prefix}bad-tz", tz="Mars/Olympus"))),
           ("payload", json.dumps(document(902, key=f"{prefix}bad-payload",
                                           payload={"a": [1e300] * 60})))]
    spots = [1, 1 + plan.import_good // 3, 2 + 2 * plan.import_good // 3, len(lines) + 3]
    bad_at: dict[int, str] = {}
    for spot, (what, text) in zip(spots, bad, strict=True):
        lines.insert(spot, text)
        bad_at[spot + 1] = what
    path = logs / f"import-{number}.ndjson"
    path.write_text("\n".join(lines) + "\n")
    return ImportFile(f"import-{number}", path, prefix, plan.import_good, bad_at)


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class Operator:
    """What people do every day, while the faults run: edit about ``edit_share`` of the
    every-minute jobs a minute (payload, cron, spread), pause some and resume them a little
    later, import files with bad lines. Each change is recorded on its job (``Job.changes``)
    with the database time it took effect, which the model of expected fires follows."""

    def __init__(self, run: Run, url: str, tenant_id: int, jobs: Sequence[Job],
                 started: float, rng: random.Random) -> None:
        self.run = run
        self.url = url
        self.tenant_id = tenant_id
        self.started = started
        self.rng = rng
        self.every = [job for job in jobs if job.kind == "every-minute"]
        self.paused: set[int] = set()
        self.payload_version = 0
        self.conn: psycopg.Connection[Any] | None = None

    def schedule(self) -> list[tuple[float, str, Any]]:
        """(seconds after the start, action, argument), proportional to the window."""
        plan = self.run.plan
        w = plan.window_s
        events: list[tuple[float, str, Any]] = []
        rate = plan.edit_share * len(self.every) / 60       # edits per second
        t = 0.04 * w
        while rate > 0 and t < 0.8 * w:
            events.append((t, "edit", None))
            t += self.rng.uniform(0.5, 1.5) / rate
        pauses: list[float] = []
        t = 0.05 * w
        while t < 0.75 * w:
            pauses.append(t)
            t += plan.pause_every_s * self.rng.uniform(0.6, 1.4)
        for i, t in enumerate(pauses):       # the argument: resume it later
            events.append((t, "pause", i < len(pauses) - plan.left_paused))
        first, second = self.run.imports
        # the second import starts with the PostgreSQL restart (0.55 W)
        events += [(0.3 * w, "import", first), (0.55 * w, "import", second),
                   (0.7 * w, "re-import", first)]
        return sorted(events, key=lambda e: e[0])

    def work(self, stop: threading.Event) -> None:
        plan = self.run.plan
        heap = [(self.started + t, i, kind, arg)
                for i, (t, kind, arg) in enumerate(self.schedule())]
        heapq.heapify(heap)
        order = len(heap)
        try:
            while heap and not stop.is_set():
                due, _, kind, arg = heap[0]
                if time.time() < due:
                    stop.wait(min(0.2, due - time.time()))
                    continue
                heapq.heappop(heap)
                if kind == "edit":
                    self.edit()
                elif kind == "pause":
                    job = self.pause()
                    if job is not None and arg:
                        at = min(time.time() + self.rng.uniform(*plan.pause_hold_s),
                                 self.started + 0.9 * plan.window_s)
                        heapq.heappush(heap, (at, order, "resume", job))
                        order += 1
                elif kind == "resume":
                    self.resume(arg)
                else:
                    self.load(arg, again=kind == "re-import")
        finally:
            self.drop()

    # -- job changes ---------------------------------------------------------------------

    def edit(self) -> None:
        job = self.rng.choice(self.every)
        what = self.rng.choice(("payload", "cron", "spread"))
        spec = job.changes[-1].spec if job.changes else job.spec
        patch: dict[str, Any]
        if what == "payload":
            self.payload_version += 1
            version = self.payload_version
            patch = {"payload": {**spec.payload, "text": f"chaos, edited (v{version})",
                                 "v": version}}
            detail = f"payload v{spec.payload.get('v', 0)} -> v{version}"
        elif what == "cron":
            cron = "*/2 * * * *" if spec.cron == "* * * * *" else "* * * * *"
            patch = {"cron": cron}
            detail = f"cron '{spec.cron}' -> '{cron}'"
        else:
            seconds = self.rng.choice([s for s in (10, 25, 50) if s != spec.spread_seconds])
            patch = {"spread": {"seconds": seconds}}
            detail = f"spread {spec.spread_seconds} s -> {seconds} s"
        self.change(f"edit-{what}", job, detail, lambda conn, current: update_job(
            conn, self.tenant_id, job.id, patch, version=current.version))

    def pause(self) -> Job | None:
        job = self.rng.choice([j for j in self.every if j.id not in self.paused])
        after = self.change("pause", job, "", lambda conn, _: pause_job(
            conn, self.tenant_id, job.id))
        if after is None or not after.paused:
            return None
        self.paused.add(job.id)
        return job

    def resume(self, job: Job) -> None:
        after = self.change("resume", job, "", lambda conn, _: resume_job(
            conn, self.tenant_id, job.id))
        if after is not None and not after.paused:
            self.paused.discard(job.id)

    def change(self, kind: str, job: Job, detail: str,
               do: Callable[[psycopg.Connection[Any], StoredJob], StoredJob]
               ) -> StoredJob | None:
        """Apply one change, retrying through database errors for up to 90 s. An attempt that
        raised may still have committed (the connection died at the commit): the job's
        version, re-read before each attempt, tells (nobody else changes these jobs)."""
        action = Action(kind, time.time(), f"job {job.id}", detail)
        give_up = action.at + 90
        base: int | None = None
        after: StoredJob | None = None
        fresh = False       # read in the change's own transaction (else re-read later)
        while after is None and time.time() < give_up:
            try:
                conn = self.connection()
                current = get_job(conn, self.tenant_id, job.id)
                if base is None:
                    base = current.version
                elif current.version != base:
                    action.committed_on_error += 1
                    after = current
                    break
                action.attempts += 1
                after = do(conn, current)
                fresh = True
            except (psycopg.Error, VersionMismatch) as exc:
                action.errors.append(f"{type(exc).__name__}: {str(exc).strip()[:120]}")
                self.drop()
                time.sleep(0.5)
        if after is None:
            action.outcome = f"failed: {action.errors[-1] if action.errors else 'no attempt'}"
        else:
            # The instant the change took effect: a cron edit starts the new timetable then;
            # for the others, the first fire it left to come marks it (the scheduler may
            # have moved that on since, unless the job is paused, if it was read later).
            at = after.timetable_since if kind == "edit-cron" else after.updated_at
            known = fresh or after.paused
            job.changes.append(Change(kind, at, after.spec, after.paused, after.version,
                                      after.next_nominal_at if known else None))
            action.outcome = "done"
            action.db_at = at
            if base is not None and after.version != base + 1:
                action.outcome = f"done, but the version went {base} -> {after.version}"
        self.record(action)
        return after

    # -- imports -------------------------------------------------------------------------

    def load(self, file: ImportFile, *, again: bool) -> None:
        """``crondepot import FILE --json`` as a real process, run again while it fails
        short of a report (the database restarting); a key already stored is counted
        ``existing``, so a second run after one that did commit changes nothing."""
        action = Action("re-import" if again else "import", time.time(), file.path.name,
                        f"{file.good} good lines, bad lines {sorted(file.bad)}")
        give_up = action.at + 120
        result: dict[str, Any] | None = None
        while result is None and time.time() < give_up:
            action.attempts += 1
            try:
                proc = subprocess.run(
                    [sys.executable, "-m", "crondepot", "import", str(file.path), "--tenant",
                     TENANT, "--json", "--db", self.url],
                    capture_output=True, text=True, env=self.run.env, timeout=120)
            except subprocess.TimeoutExpired:
                action.errors.append("timed out")
                continue
            doc = _json_object(proc.stdout)
            if proc.returncode in (0, 1) and doc is not None and "lines" in doc:
                result = {"exit": proc.returncode, "again": again, **doc}
                file.results.append(result)
                break
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            action.errors.append(f"exit {proc.returncode}: {last[:150]}")
            time.sleep(1.0)
        if result is None:
            action.outcome = f"failed: {action.errors[-1] if action.errors else 'not run'}"
        else:
            action.outcome = "done"
            action.detail += (f"; exit {result['exit']}: {result['created']} created, "
                              f"{result['existing']} existing, {result['invalid']} invalid")
            if not again:
                self.collect(file, action)
        self.record(action)

    def collect(self, file: ImportFile, action: Action) -> None:
        """The file's good lines as stored jobs, added to the model (their first fire is the
        first after their creation, as create_jobs plans it)."""
        stored: list[StoredJob] | None = None
        give_up = time.time() + 60
        while stored is None and time.time() < give_up:
            try:
                stored = list_jobs(self.connection(), self.tenant_id,
                                   JobFilter(key_prefix=file.prefix), limit=1000)
            except psycopg.Error as exc:
                action.errors.append(f"{type(exc).__name__} reading the jobs back")
                self.drop()
                time.sleep(0.5)
        if stored is None:
            return
        file.stored = len(stored)
        action.detail += f"; {len(stored)} of its {file.good} good lines stored"
        for job in stored:
            first = job.spec.timetable(job.id).next_fires(job.created_at, 1)[0]
            gateway = "dedupe" if job.spec.target.get("dedupes") else "plain"
            self.run.imported.append(Job(job.id, job.spec, "imported", gateway, first))

    # -- plumbing ------------------------------------------------------------------------

    def connection(self) -> psycopg.Connection[Any]:
        if self.conn is None or self.conn.closed:
            self.conn = connect(self.url, application_name="chaos-operator")
        return self.conn

    def drop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
        self.conn = None

    def record(self, action: Action) -> None:
        action.end = time.time()
        with self.run.lock:
            self.run.actions.append(action)
        retried = (f" ({action.attempts} attempts; {', '.join(action.errors[:3])})"
                   if action.errors else "")
        if action.committed_on_error:
            retried += " (an attempt that raised had committed)"
        when = f" at db {action.db_at:%H:%M:%S.%f}"[:-3] if action.db_at else ""
        print(f"  [{clock(action.at)}] operator: {action.kind} {action.target} "
              f"{action.detail} -> {action.outcome}{when}{retried}".replace("  ->", " ->"),
              flush=True)


def drain(url: str, expected: Sequence[Expected], timeout: float) -> tuple[float, int]:
    """Wait until every expected run is final; (seconds waited, runs not final)."""
    ids = [e.run_id for e in expected]
    began = time.time()
    left = waiting = len(ids)
    while True:
        with contextlib.suppress(psycopg.Error), connect(
                url, application_name="chaos-drain") as conn:
            row = conn.execute(
                "SELECT count(*) FILTER (WHERE status = ANY(%(final)s)), count(*) FILTER ("
                "  WHERE status = 'queued' AND available_at > to_timestamp(%(end)s)) "
                "FROM runs WHERE run_id = ANY(%(ids)s)",
                {"final": list(FINAL), "end": began + timeout, "ids": ids}).fetchone()
            if row:
                left = len(ids) - row[0]
                waiting = left - row[1]   # not worth waiting for: retries after the bound
        if waiting == 0 or time.time() - began >= timeout:
            return time.time() - began, left
        time.sleep(2)


# -- analysis ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Row:
    run_id: str
    job_id: int
    status: str
    attempt: int
    skip_reason: str | None
    last_error: str | None
    error_class: str | None
    due: float
    created: float
    finished: float | None
    available: float


def fetch_rows(url: str, expected: Sequence[Expected]) -> dict[str, Row]:
    with connect(url, application_name="chaos-report") as conn:
        rows = conn.execute(
            "SELECT run_id, job_id, status, attempt, skip_reason, last_error, error_class, "
            "extract(epoch FROM due_at)::float8, extract(epoch FROM created_at)::float8, "
            "extract(epoch FROM finished_at)::float8, extract(epoch FROM available_at)::float8 "
            "FROM runs "
            "WHERE run_id = ANY(%s) OR status IN ('failed', 'dead', 'skipped')",
            [[e.run_id for e in expected]]).fetchall()
    return {r[0]: Row(*r) for r in rows}


# The write the probes commit. It must write WAL: a transaction that only takes an xid
# (txid_current()) commits without waiting for the sync standby, so it succeeds on a new
# primary whose every real commit waits (strict synchronous mode, no standby yet).
PROBE_TABLE = ("CREATE TABLE IF NOT EXISTS chaos_write_probe "
               "(name text PRIMARY KEY, at timestamptz NOT NULL)")
PROBE_WRITE = ("INSERT INTO chaos_write_probe VALUES (%s, now()) "
               "ON CONFLICT (name) DO UPDATE SET at = now() RETURNING NOT pg_is_in_recovery()")


def _commits(conn: psycopg.Connection[Any], name: str) -> bool:
    """Whether a primary on ``conn`` commits the probe's row within 0.9 s. A commit still
    waiting then (for a sync standby that is gone) is cancelled from here: statement_timeout
    does not end a commit's wait, and a cancelled wait is reported committed (locally, with
    a WARNING only), so the time is what tells, not the answer."""
    timer = threading.Timer(0.9, lambda: conn.cancel_safe(timeout=2.0))
    began = time.monotonic()
    timer.start()
    try:
        row = conn.execute(PROBE_WRITE, [name]).fetchone()
    finally:
        timer.cancel()
    return bool(row and row[0]) and time.monotonic() - began < 0.9


def _writable(url: str) -> bool:
    """A primary answers on the multi-host URL and commits a row (through its sync standby)
    within 0.9 s (``_commits``)."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=2,
                             application_name="chaos-probe") as conn:
            return _commits(conn, "url")
    except psycopg.Error:
        return False


class WriteProbe:
    """Asks every node directly, every ``WRITE_PROBE_S``, whether it commits a row (which
    waits for the sync standby: ``PROBE_WRITE``) within 0.9 s; keeps each answer.

    The multi-host URL answers for whichever node libpq reaches first; asking each node
    alone tells when the *new* primary took writes, to the probe's interval."""

    def __init__(self, cluster: patroni_cluster.PatroniCluster) -> None:
        self.samples: dict[str, list[tuple[float, bool]]] = {n.name: [] for n in cluster.nodes}
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._watch, args=(node,), daemon=True)
                         for node in cluster.nodes]
        for thread in self._threads:
            thread.start()

    def _watch(self, node: patroni_cluster.Node) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self._stop.is_set():
            began = time.time()
            ok = False
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(node.url, autocommit=True, connect_timeout=2,
                                           tcp_user_timeout=1000,
                                           application_name="chaos-write-probe")
                ok = _commits(conn, node.name)
            except psycopg.Error:
                if conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
                conn = None
            self.samples[node.name].append((began, ok))
            self._stop.wait(max(0.0, WRITE_PROBE_S - (time.time() - began)))
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)

    def writes_from(self, node: str, since: float) -> float | None:
        """When ``node`` took writes for good after ``since``: its first write after its last
        failed one (``since`` itself if none failed), None if its last answer failed."""
        back: float | None = since
        for at, ok in self.samples.get(node, []):
            if at < since:
                continue
            if not ok:
                back = None
            elif back is None:
                back = at
        return back


def _end_fault(cluster: Any, action: str, leader: Any) -> None:
    """Undo a failover event's fault: the killed Patroni started again, the partition
    healed, etcd resumed (the other events end by themselves)."""
    if action == "kill-patroni":
        cluster.start_patroni(leader)
    elif action == "partition":
        cluster.heal()
    elif action == "etcd-outage":
        cluster.etcd_resume()


def inject_failover(run: Run, started: float, stop: threading.Event) -> None:
    """One Patroni event at a time, on the primary of the moment; each fault's detail says
    when a primary took writes again after the event began (``primary after``)."""
    cluster = run.cluster
    assert isinstance(cluster, patroni_cluster.PatroniCluster)
    for offset, action in schedule(run.plan):
        if stop.wait(max(0.0, started + offset - time.time())):
            return
        try:
            cluster.wait_for(cluster.replicating, 90, "a healthy cluster")
        except TimeoutError:
            run.notes.append(f"{clock(time.time())}: the cluster was not healthy (no sync "
                             f"standby streaming) 90 s before {action}; injected anyway")
        leader = cluster.leader()
        if leader is None:
            run.notes.append(f"{clock(time.time())}: no primary before {action}; skipped")
            continue
        other = next(n for n in cluster.nodes if n is not leader)
        # With a longer ttl the partition must outlast it for the standby to be promoted,
        # and a restarted Patroni must come back after its key expired, as with ttl 10 s.
        ttl = run.plan.ttl
        hold = {"partition": max(FAILOVER_HOLD_S, ttl + 15.0),
                "etcd-outage": FAILOVER_HOLD_S,
                "kill-patroni": max(PATRONI_RESTART_S, ttl + 10.0)}.get(action, 0.0)
        probe = WriteProbe(cluster)
        fault = run.fault(action, leader.name, f"{hold:g} s" if hold else "")
        began = time.time()
        if action == "kill-postmaster":
            cluster.kill_postmaster(leader)
        elif action == "switchover":
            try:
                cluster.switchover(leader, other)
            except (RuntimeError, subprocess.SubprocessError) as exc:
                run.notes.append(f"switchover at {clock(began)} failed: {exc}")
        elif action == "kill-patroni":
            cluster.kill_patroni(leader)
        elif action == "partition":
            cluster.partition(leader)
        elif action == "etcd-outage":
            cluster.etcd_pause()
        # Watch the multi-host URL while the event lasts and after it: the outage is from
        # the first failed write to the first write that succeeds after the last failure
        # (and stays good for 5 s once the event has ended).
        first_fail: float | None = None
        back_at: float | None = None
        ended = hold == 0.0
        while not stop.is_set() and time.time() - began < 180:
            now = time.time()
            if not ended and now - began >= hold:
                _end_fault(cluster, action, leader)
                fault.end, ended = now, True
            if _writable(run.plan_url):
                if back_at is None:
                    back_at = time.time()
            else:
                first_fail = first_fail or now
                back_at = None
            settled = max(began + 10, fault.end or began) + 5
            if ended and back_at is not None and time.time() >= settled:
                break
            time.sleep(0.25)
        if not ended:       # stopped early: never leave the cluster cut off or paused
            _end_fault(cluster, action, leader)
        if fault.end is None:
            fault.end = time.time()
        probe.close()
        primary = cluster.leader()
        writes_at = probe.writes_from(primary.name, began) if primary else None
        with run.lock:
            run.writes_back.append((fault, writes_at))
        if first_fail is None:
            writes = "writes never failed"
        elif back_at is None:
            writes = f"writes failing from {first_fail - began:.1f} s, not back"
        else:
            writes = (f"writes failed from {first_fail - began:.1f} s to "
                      f"{back_at - began:.1f} s")
        fault.detail = "; ".join(part for part in (
            fault.detail, writes, f"primary {primary.name}" if primary else "no primary",
            f"{primary.name} took writes at {writes_at - began:.1f} s"
            if primary and writes_at is not None else "") if part)
        print(f"  [{clock(time.time())}] {action}: {fault.detail}", flush=True)


def db_checks(url: str, restart_ready: float | None) -> dict[str, Any]:
    with connect(url, application_name="chaos-report") as conn:
        early, ahead, total = conn.execute(
            "SELECT count(*) FILTER (WHERE created_at < due_at - interval '1 second'), "
            "count(*) FILTER (WHERE due_at > now() + interval '10 minutes'), count(*) "
            "FROM runs").fetchone() or (0, 0, 0)
        out: dict[str, Any] = {"runs_written_early": early, "runs_due_far_ahead": ahead,
                               "runs_total": total}
        if restart_ready is not None:
            first_written, first_finished = conn.execute(
                "SELECT (SELECT extract(epoch FROM min(created_at))::float8 FROM runs "
                "        WHERE created_at > to_timestamp(%(t)s)), "
                "       (SELECT extract(epoch FROM min(finished_at))::float8 FROM runs "
                "        WHERE status = 'succeeded' AND finished_at > to_timestamp(%(t)s))",
                {"t": restart_ready}).fetchone() or (None, None)
            out["first_run_written_after_restart"] = first_written
            out["first_run_finished_after_restart"] = first_finished
    return out


def log_evidence(run: Run) -> dict[str, dict[str, str]]:
    """run id → {log message kind: which process}, from the workers' JSON logs."""
    kinds = {"outcome not recorded: the run's lease was lost": "lost-lease",
             "slot failed": "slot-failed",
             "lease deadline passed before the call; not calling": "not-called"}
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for service in run.services:
        for entry in service.log_lines():
            kind = kinds.get(str(entry.get("msg", "")))
            if kind and entry.get("run_id"):
                found[str(entry["run_id"])][kind] = entry["_file"]
    return found


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).isoformat()


def run_verify(run: Run, url: str, since: float, until: float) -> dict[str, Any]:
    """``crondepot verify --json`` as a real process over the run's window (nominal times
    from ``since`` to ``until``), once every fire up to ``until`` is due and written: the
    longest spread is 50 s, and the schedulers get 10 s more."""
    wait = until + SPREAD_SECONDS + 10 - time.time()
    if wait > 0:
        print(f"  waiting {wait:.0f} s until every fire up to the cut-off is due, then "
              "crondepot verify", flush=True)
        time.sleep(wait)
    args = ["verify", "--json", "--since", _iso(since), "--until", _iso(until)]
    began = time.time()
    proc = subprocess.run([sys.executable, "-m", "crondepot", *args, "--db", url],
                          capture_output=True, text=True, env=run.env, timeout=600)
    doc = _json_object(proc.stdout) or {}
    figures = {k: doc.get(k) for k in ("fires", "pending", "unaccounted_count",
                                       "duplicated_count", "seconds")}
    print(f"  [{clock(began)}] crondepot verify: exit {proc.returncode}, {figures}",
          flush=True)
    return {"command": "python -m crondepot " + shlex.join(args) + " --db URL",
            "exit": proc.returncode, "doc": doc, "wall_s": round(time.time() - began, 2),
            "stderr": (proc.stderr.strip().splitlines() or [""])[-1][:300]}


def ledger_check(run: Run, url: str, jobs: Sequence[Job], since: float, cutoff: float,
                 versions0: dict[int, int]) -> dict[str, Any]:
    """The ledger and the gateways' records against the model of every job's fires
    (``job_fires``), independently of ``crondepot verify``."""
    end = datetime.fromtimestamp(cutoff, UTC)
    start = datetime.fromtimestamp(since, UTC)
    with connect(url, application_name="chaos-report") as conn:
        by_run: dict[str, tuple[int, str, str | None]] = {
            r[0]: (r[1], r[2], r[3]) for r in conn.execute(
                "SELECT run_id, job_id, status, skip_reason FROM runs WHERE nominal_at <= %s",
                [end]).fetchall()}
        versions = dict(conn.execute("SELECT id, version FROM jobs").fetchall())
        early = [r[0] for r in conn.execute(
            "SELECT run_id FROM runs WHERE created_at < due_at - interval '1 second'")]
    later = datetime.now(UTC) + timedelta(minutes=5)
    problems: dict[str, list[Any]] = defaultdict(list)
    states: Counter[str] = Counter()
    touched_rows: Counter[str] = Counter()
    pending_by_job: Counter[int] = Counter()
    in_window = 0
    runs_known: set[str] = set()     # every run the model owes, any due time
    settled_early: set[str] = set()  # rows a change wrote inside their spread window
    deferred_early: set[str] = set()  # rows due at their delivery window's opening
    payload_timeline: dict[int, list[tuple[datetime, int]]] = {}
    for job in jobs:
        if job.changes:
            payload_timeline[job.id] = [(c.at, c.spec.payload.get("v", 0)) for c in job.changes]
        if versions.get(job.id) != (job.changes[-1].version if job.changes
                                    else versions0.get(job.id, versions.get(job.id))):
            problems["job version differs from the operator's record"].append(job.id)
        for fire in job_fires(job, later):
            rid = run_id(job.id, fire.nominal)
            if fire.state in ("run", "run-or-overlap"):
                runs_known.add(rid)
            if fire.early:
                settled_early.add(rid)
            if fire.deferred:
                deferred_early.add(rid)
            if fire.nominal > end:
                continue
            in_window += fire.nominal >= start
            states[fire.state] += 1
            row = by_run.pop(rid, None)
            status = "no row" if row is None else row[1] + (f"/{row[2]}" if row[2] else "")
            if job.changes:
                touched_rows[f"{fire.state}: {status}"] += 1
            if fire.state == "pending":
                pending_by_job[job.id] += 1
                if row is not None:
                    problems["a row for a fire of a job still paused"].append((rid, status))
            elif row is None:
                problems["a fire without a row"].append(rid)
            elif fire.state == "paused" and status != "skipped/paused":
                problems["a paused fire not recorded skipped/paused"].append((rid, status))
            elif fire.state == "run" and row[1] == "skipped":
                problems["a fire owed a run recorded skipped"].append((rid, status))
            elif fire.state == "calendar" and status != "skipped/calendar":
                problems["a fire on a calendar date not recorded skipped/calendar"].append(
                    (rid, status))
            elif fire.state == "run-or-overlap" and row[1] == "skipped" and \
                    status != "skipped/overlap":
                problems["an overlap-skip fire skipped for another reason"].append(
                    (rid, status))
    for rid, (_, status, reason) in sorted(by_run.items()):
        problems["a row for no fire of the model"].append((rid, status, reason))
    requests: Counter[str] = Counter()
    stale: list[tuple[str, int, int]] = []
    checked = 0
    for name, gateway in run.gateways.items():
        with gateway._lock:
            seen = {key: list(v) for key, v in gateway.versions.items()}
        for key, carried in seen.items():
            requests[name] += len(carried)
            if key not in runs_known:
                problems["requests for no run of the model"].append((name, key, len(carried)))
            job_text, _, seconds = key.partition(":")
            timeline = payload_timeline.get(int(job_text)) if job_text.isdigit() else None
            if not timeline or not seconds.isdigit():
                continue
            # the payload in force 5 s before the fire's nominal time (margin: the edit's
            # transaction commits a little after its now())
            required = 0
            for at, version in timeline:
                if at.timestamp() <= int(seconds) - 5:
                    required = version
            if required:
                checked += len(carried)
                stale += [(key, v, required) for v in carried if v < required]
    if stale:
        problems["requests carrying a payload older than the edit before their fire"] = stale
    strays = Counter(m.msg_id for m in run.stored() if m.msg_id not in runs_known)
    if strays:
        problems["messages at the NATS stream for no run of the model"] = sorted(strays.items())
    rules = rule_check(run, jobs)
    for what, items in rules.pop("problems").items():
        problems[what] = items
    return {"states": states, "fires_in_window": in_window, "touched_rows": touched_rows,
            "pending_by_job": dict(pending_by_job), "problems": dict(problems),
            "payload_checked": checked, "stale_payloads": len(stale),
            "early_unexplained": [r for r in early
                                  if r not in settled_early and r not in deferred_early],
            "early_by_change": sum(1 for r in early if r in settled_early),
            "early_by_window": sum(1 for r in early if r in deferred_early),
            "rules": rules}


def rule_check(run: Run, jobs: Sequence[Job]) -> dict[str, Any]:
    """The rules' own invariants, from the gateways' records: no two calls of an overlap
    ``skip`` job in flight at once, no call of a window job before its window opened (and
    none of a calendar job: ``ledger_check`` finds those as requests for no run)."""
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for gateway in run.gateways.values():
        with gateway._lock:
            for key, seen in gateway.spans.items():
                spans[key] += seen
    by_job: dict[int, list[tuple[str, float, float]]] = defaultdict(list)
    for key, seen in spans.items():
        job_text, _, _ = key.partition(":")
        if job_text.isdigit():
            by_job[int(job_text)] += [(key, start, end) for start, end in seen]
    problems: dict[str, list[Any]] = {}
    overlapping: list[tuple[str, str]] = []
    early: list[str] = []
    calls: Counter[str] = Counter()
    for job in jobs:
        if job.rule is None:
            continue
        made = by_job.get(job.id, [])
        calls[job.rule] += len(made)
        if job.rule == "overlap":
            overlapping += overlapping_calls(made)
        elif job.rule == "window":
            assert job.opening is not None
            early += calls_before([(k, s) for k, s, _ in made], job.opening.timestamp())
    if overlapping:
        problems["two calls of an overlap-skip job in flight at once"] = overlapping
    if early:
        problems["a call of a window job before its window opened"] = early
    return {"calls": dict(calls), "overlapping": len(overlapping), "before_window": len(early),
            "problems": problems}


def import_check(run: Run) -> tuple[list[dict[str, Any]], list[str]]:
    """Each import's figures, and what went wrong: a good line not stored, a bad line not
    reported on its line with its field, a re-run that created anything."""
    summary: list[dict[str, Any]] = []
    wrong: list[str] = []
    for file in run.imports:
        for result in file.results:
            errors = {e["line"]: e["field"] for e in result.get("errors", [])}
            summary.append({"file": file.name, "again": result["again"],
                            "exit": result["exit"], "lines": result["lines"],
                            "created": result["created"], "existing": result["existing"],
                            "invalid": result["invalid"], "errors": errors,
                            "stored": file.stored})
            if errors != file.bad:
                wrong.append(f"{file.name}: bad lines reported {errors}, expected {file.bad}")
            if result["created"] + result["existing"] != file.good or result["exit"] != 1:
                wrong.append(f"{file.name}: exit {result['exit']}, {result['created']} created"
                             f" + {result['existing']} existing of {file.good} good lines")
            if result["again"] and result["created"]:
                wrong.append(f"{file.name}: the re-run created {result['created']} jobs")
        if not file.results:
            wrong.append(f"{file.name}: no import completed")
        elif file.stored is not None and file.stored != file.good:
            wrong.append(f"{file.name}: {file.stored} of {file.good} good lines stored")
    return summary, wrong


def analyse(run: Run, url: str, jobs: Sequence[Job], expected: Sequence[Expected],
            drained: tuple[float, int], started: float, cutoff: float,
            verified: dict[str, Any] | None, versions0: dict[int, int]) -> dict[str, Any]:
    plan = run.plan
    rows = fetch_rows(url, expected)
    ledger = ledger_check(run, url, jobs, started - 60, cutoff, versions0)
    imports, import_problems = import_check(run)
    restart = next((f for f in run.faults if f.kind == "pg-restart"), None)
    checks = db_checks(url, restart.end if restart else None)
    evidence = log_evidence(run)
    by_gateway: dict[str, dict[str, list[Request]]] = {}
    for name, gateway in run.gateways.items():
        keyed: dict[str, list[Request]] = defaultdict(list)
        for request in list(gateway.requests):
            keyed[request.key].append(request)
        by_gateway[name] = keyed
    first_arrival: dict[str, float] = {}
    first_ok: dict[str, float] = {}
    for keyed in by_gateway.values():
        for key, requests in keyed.items():
            first_arrival[key] = min(r.arrived for r in requests)
            ok = [r.arrived for r in requests if r.status == 200]
            if ok:
                first_ok[key] = min(ok)

    broker = broker_check(run, url)
    for key, stored in broker.pop("first_stored").items():
        # stored by the stream: the broker jobs' delivery
        first_arrival[key] = min(first_arrival.get(key, math.inf), stored)
        first_ok[key] = min(first_ok.get(key, math.inf), stored)

    missed: list[dict[str, Any]] = []
    deferred: list[dict[str, Any]] = []
    # A retry counts as missed only if the workers had it in reach: due at least a poll
    # interval and a claim (CLAIM_GRACE_S) before they were stopped. Full-jitter backoff puts
    # a fourth attempt up to 240 s out, so a retry can come due while verify runs, after the
    # drain gave up on it; those are late, not lost.
    reach = (run.stopped_at or time.time()) - CLAIM_GRACE_S
    wrongly_skipped: list[str] = []
    dropped_by_rule: Counter[str] = Counter()
    final_without_delivery: Counter[str] = Counter()
    succeeded_without_delivery: list[str] = []
    for e in expected:
        row = rows.get(e.run_id)
        if row is not None and row.status == "skipped":
            if e.may_skip is not None and row.skip_reason == e.may_skip:
                dropped_by_rule[e.kind] += 1     # an overlap skip job's fire: dropped
                continue
            wrongly_skipped.append(e.run_id)     # every job here is run_late
        if e.run_id in first_ok:
            continue
        if row is not None and row.status == "succeeded":
            succeeded_without_delivery.append(e.run_id)
        if row is not None and row.status in ("failed", "dead", "skipped") and (
                row.last_error or row.skip_reason):
            final_without_delivery[row.status] += 1
            continue
        if (row is not None and row.status == "queued" and row.last_error
                and row.available > reach):
            # Late, not lost: in the queue with its retry time set after the drain's end.
            deferred.append({"run_id": e.run_id, "attempt": row.attempt,
                             "retry_at": clock(row.available),
                             "error_class": row.error_class, "due": clock(e.due)})
            continue
        missed.append({"run_id": e.run_id, "kind": e.kind, "gateway": e.gateway,
                       "due": clock(e.due),
                       "row": None if row is None else {
                           "status": row.status, "attempt": row.attempt,
                           "error_class": row.error_class, "last_error": row.last_error,
                           "skip_reason": row.skip_reason, "retry_at": clock(row.available),
                           "workers_stopped": clock(run.stopped_at or time.time())},
                       "requests": [(r.status, clock(r.arrived)) for g in by_gateway.values()
                                    for r in g.get(e.run_id, [])]})

    dedupe = run.gateways["dedupe"].stats()
    plain = by_gateway["plain"]
    # A fault within a call's time (its job's target timeout) explains its repeat: the
    # overlap jobs' answers take 70 s, so a kill anywhere in them leaves the run to its lease.
    timeouts = {job.id: float(job.spec.target.get("timeout_s", plan.timeout_s)) for job in jobs}

    def call_window(key: str) -> float:
        job_text = key.partition(":")[0]
        return (timeouts.get(int(job_text), plan.timeout_s) if job_text.isdigit()
                else plan.timeout_s) + 5

    duplicates: list[dict[str, Any]] = []
    for key, requests in sorted(plain.items()):
        accepted = sorted(r.arrived for r in requests if r.status == 200)
        if len(accepted) < 2:
            continue
        cause = attribute(accepted[0], run.faults, evidence.get(key, {}), call_window(key))
        row = rows.get(key)
        duplicates.append({"run_id": key, "effects": len(accepted),
                           "first": clock(accepted[0]),
                           "gap_s": round(accepted[1] - accepted[0], 1),
                           "status": row.status if row else "?", "cause": cause})
    causes = Counter(d["cause"].split(":")[0] for d in duplicates)
    dropped: Counter[str] = Counter()
    for key, requests in by_gateway["dedupe"].items():
        accepted = sorted(r.arrived for r in requests if r.status == 200)
        if len(accepted) >= 2:
            dropped[attribute(accepted[0], run.faults, evidence.get(key, {}),
                              call_window(key)).split(":")[0]] += len(accepted) - 1

    dead = [r for r in rows.values() if r.status in ("dead", "failed")]
    dead_why = Counter((r.status, r.error_class or "?", re.sub(r"\d+", "N", (r.last_error or "")
                                                                 )[:90]) for r in dead)
    lateness = {kind: [first_arrival[e.run_id] - e.due for e in expected
                       if e.kind == kind and e.run_id in first_arrival]
                for kind in ("every-minute", "spike", "imported", "broker")
                if any(e.kind == kind for e in expected)}
    delivered_late = [first_ok[e.run_id] - e.due for e in expected if e.run_id in first_ok]
    oks = sorted(t for t in first_ok.values())

    def next_ok(after: float) -> float | None:
        for t in oks:
            if t >= after:
                return t - after
        return None

    # Back to work: from the moment the new primary took writes and a run was due (and not
    # yet delivered) to the first 200 after it. A run due only later (an event in the
    # spread's quiet seconds, or before the first fires) starts the clock at its due time.
    plain_runs = [e for e in expected if e.kind in ("every-minute", "spike", "imported")]
    back_to_work: list[dict[str, Any]] = []
    for f, writes_at in run.writes_back:
        ready = first = None
        if writes_at is not None:
            waiting = [e.due for e in plain_runs
                       if first_ok.get(e.run_id, math.inf) >= writes_at]
            ready = max(writes_at, min(waiting, default=math.inf))
            first = next_ok(ready) if ready < math.inf else None
        back_to_work.append({
            "t": round(f.at - started, 1), "kind": f.kind, "target": f.target,
            "writes_s": _round(None if writes_at is None else writes_at - f.at),
            "due_s": _round(None if ready is None or ready == math.inf else ready - f.at),
            "delivery_s": _round(None if first is None or ready is None
                                 else ready + first - f.at),
            "gap_s": _round(first)})

    recovery: list[dict[str, Any]] = []
    for f in run.faults:
        end = f.end or f.at
        lo, hi = (f.at - 5, f.at) if f.kind.startswith("kill") else (f.at, end)
        window_runs = [e for e in expected if lo <= e.due <= hi]
        done = sorted(first_ok[e.run_id] for e in window_runs if e.run_id in first_ok)
        p99_done = (done[max(0, math.ceil(0.99 * len(window_runs)) - 1)] - end
                    if window_runs and len(done) >= math.ceil(0.99 * len(window_runs))
                    else None)
        entry: dict[str, Any] = {
            "at": clock(f.at), "t": round(f.at - started, 1), "kind": f.kind,
            "target": f.target, "detail": f.detail,
            "lasted_s": round(end - f.at, 1) if f.end else None,
            "next_delivery_s": _round(next_ok(end)),
            "runs_due_in_window": len(window_runs),
            "p99_delivered_s": _round(p99_done),
            "all_delivered_s": _round(max(done) - end) if done and len(done) == len(
                window_runs) else (None if not window_runs else
                                   f"{len(window_runs) - len(done)} not delivered"),
        }
        if f.kind == "pg-restart":
            written = checks.get("first_run_written_after_restart")
            finished = checks.get("first_run_finished_after_restart")
            entry["first_run_written_s"] = _round(written - end) if written else None
            entry["first_run_finished_s"] = _round(finished - end) if finished else None
        recovery.append(entry)

    spike = [e for e in expected if e.kind == "spike"]
    touched = [job for job in jobs if job.changes]
    pending_model = sum(ledger["pending_by_job"].values())
    verify_problems: list[str] = []
    doc = (verified or {}).get("doc") or {}
    if verified is None or not doc:
        verify_problems.append("crondepot verify gave no report: "
                               f"{(verified or {}).get('stderr', 'not run')}")
    else:
        if verified["exit"] != 0 or doc.get("unaccounted_count") or doc.get(
                "duplicated_count"):
            verify_problems.append(f"exit {verified['exit']}: "
                                   f"{doc.get('unaccounted_count')} unaccounted, "
                                   f"{doc.get('duplicated_count')} duplicated")
        if doc.get("pending") != pending_model:
            verify_problems.append(f"{doc.get('pending')} pending, but the jobs still "
                                   f"paused account for {pending_model}")
        if doc.get("fires") != ledger["fires_in_window"]:
            verify_problems.append(f"{doc.get('fires')} fires in the window, the model "
                                   f"has {ledger['fires_in_window']}")
    operator = {
        "actions": Counter((a.kind, "done" if a.done else "failed") for a in run.actions),
        "retried": [a for a in run.actions if a.errors],
        "failed": [a for a in run.actions if not a.done],
        "committed_on_error": sum(a.committed_on_error for a in run.actions),
        "touched": len(touched),
        "edited": sum(1 for job in touched if any(c.kind.startswith("edit")
                                                  for c in job.changes)),
        "paused": sum(1 for job in touched if any(c.kind == "pause" for c in job.changes)),
        "still_paused": sorted(ledger["pending_by_job"]),
        "touched_ids": sorted(job.id for job in touched),
        "imported_jobs": sum(1 for job in jobs if job.kind == "imported"),
    }
    return {
        "ledger": ledger, "imports": imports, "import_problems": import_problems,
        "actions": list(run.actions),
        "verify": verified, "verify_problems": verify_problems, "operator": operator,
        "pending_model": pending_model,
        "plan": plan, "started": started, "cutoff": cutoff,
        "drain_s": round(drained[0], 1), "not_final_at_drain_end": drained[1],
        "expected": len(expected),
        "expected_by_kind": dict(Counter(e.kind for e in expected)),
        "spike_at": clock(spike[0].due) if spike else None,
        "delivered": sum(1 for e in expected if e.run_id in first_ok),
        "final_without_delivery": dict(final_without_delivery),
        "missed": missed, "deferred": deferred, "crashes": run.crashes,
        "dedupe_repeat_causes": dict(dropped),
        "succeeded_without_delivery": succeeded_without_delivery,
        "wrongly_skipped": wrongly_skipped,
        "dropped_by_rule": dict(dropped_by_rule),
        "dedupe_gateway": dedupe,
        "broker": broker,
        "duplicate_effects": dedupe["duplicate_effects"] + broker["duplicate_effects"],
        "plain_gateway": run.gateways["plain"].stats(),
        "raw_duplicates": duplicates, "raw_duplicate_causes": dict(causes),
        "unexplained": [d for d in duplicates if d["cause"] == "UNEXPLAINED"],
        "dead": dead_why, "dead_examples": [(r.run_id, r.status, r.attempt, r.error_class,
                                             (r.last_error or "")[:400]) for r in dead[:10]],
        "lateness": {kind: (len(v), percentile(v, 50), percentile(v, 99), max(v, default=0))
                     for kind, v in lateness.items()},
        "delivery_lateness": (percentile(delivered_late, 50), percentile(delivered_late, 99),
                              max(delivered_late, default=0)),
        "recovery": recovery, "back_to_work": back_to_work, "checks": checks,
        "lost_lease_logged": sum(1 for v in evidence.values() if "lost-lease" in v),
        "not_called_logged": sum(1 for v in evidence.values() if "not-called" in v),
        "slot_failed_logged": sum(1 for v in evidence.values() if "slot-failed" in v),
        "skew": skew_evidence(run), "notes": run.notes, "pooled": run.pooled,
        "faults": Counter(f.kind for f in run.faults),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# -- report ------------------------------------------------------------------------------


def failures(report: dict[str, Any]) -> list[str]:
    """Why the run fails (empty: it passes)."""
    out: list[str] = []
    if report["missed"]:
        out.append(f"{len(report['missed'])} missed")
    if report["duplicate_effects"]:
        out.append(f"{report['duplicate_effects']} duplicate effects")
    if report["wrongly_skipped"]:
        out.append(f"{len(report['wrongly_skipped'])} run_late runs skipped")
    out += [f"verify: {problem}" for problem in report["verify_problems"]]
    out += [f"{len(items)} × {what}" for what, items in report["ledger"]["problems"].items()]
    out += [f"import: {problem}" for problem in report["import_problems"]]
    for event in report["back_to_work"]:
        if event["gap_s"] is None or event["gap_s"] > BACK_TO_WORK_LIMIT_S:
            gap = "no delivery" if event["gap_s"] is None else f"{event['gap_s']} s"
            out.append(f"{event['kind']} at t {event['t']}: first delivery after the new "
                       f"primary took writes: {gap} (limit {BACK_TO_WORK_LIMIT_S:g} s)")
    return out


def _counts(counter: Counter[str] | dict[str, int]) -> str:
    return " · ".join(f"{k} {v:,}" for k, v in sorted(counter.items())) or "-"


def render_operator(report: dict[str, Any], add: Callable[[str], Any]) -> None:
    """The operator's rows of the figures table."""
    op = report["operator"]
    ledger = report["ledger"]
    done: Counter[str] = Counter()
    for (kind, outcome), n in op["actions"].items():
        if outcome == "done":
            done[kind] += n
    failed = len(op["failed"])
    add(f"| operator actions done (failed) | {sum(done.values()):,} ({failed}): "
        f"{_counts(done)}; {len(op['retried'])} needed more than one attempt "
        f"({op['committed_on_error']} of them had committed on an attempt that raised) |")
    still = ", ".join(str(i) for i in op["still_paused"]) or "none"
    add(f"| jobs the operator touched | {op['touched']:,} (edited {op['edited']:,}, paused "
        f"{op['paused']:,}; still paused at the end: {still}) + {op['imported_jobs']} "
        "imported |")
    add(f"| touched jobs' fires up to the cut-off, by row | {_counts(ledger['touched_rows'])} |")
    for entry in report["imports"]:
        errors = ", ".join(f"line {n} `{f}`" for n, f in sorted(entry["errors"].items()))
        what = f"{entry['file']} again" if entry["again"] else entry["file"]
        stored = ("" if entry["again"] or entry["stored"] is None
                  else f"; {entry['stored']} good lines found stored")
        add(f"| `crondepot import` {what} | exit {entry['exit']}: {entry['lines']} lines, "
            f"{entry['created']} created, {entry['existing']} existing, {entry['invalid']} "
            f"invalid ({errors}){stored} |")
    verified = report["verify"] or {}
    doc = verified.get("doc") or {}
    add(f"| **`crondepot verify`** over the window | exit {verified.get('exit', '-')}: "
        f"{doc.get('fires', 0):,} fires (model {ledger['fires_in_window']:,}), "
        f"**{doc.get('unaccounted_count', '?')} unaccounted, {doc.get('duplicated_count', '?')}"
        f" duplicated**, {doc.get('pending', '?')} pending (fires of the jobs still paused: "
        f"{report['pending_model']}); {doc.get('seconds', '?')} s: "
        f"`{verified.get('command', 'not run')}` |")
    problems = ledger["problems"]
    add(f"| ledger against the model (fires up to the cut-off) | {_counts(ledger['states'])}: "
        + ("every one as modelled, no row for any other fire, no request for any other run"
           if not problems else "**" + "; ".join(f"{len(v)} × {k}" for k, v in
                                                  problems.items()) + "**") + " |")
    add(f"| edited payloads | {ledger['payload_checked']:,} requests for fires after a "
        f"payload edit, {ledger['stale_payloads']} carrying an older payload |")


def render(report: dict[str, Any], command: str, wall: float) -> str:
    plan: Plan = report["plan"]
    out: list[str] = []
    add = out.append
    load = os.getloadavg()
    add(f"Command: `{command}` · {datetime.now(UTC):%Y-%m-%d %H:%M} UTC · "
        f"{wall / 60:.1f} min wall")
    add("")
    add(f"Machine: {os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}; load average at the end "
        f"{load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f} (other benchmarks may share the machine).")
    add("")
    add(f"Load: {plan.every_minute_jobs:,} every-minute jobs (spread 50 s) + "
        f"{plan.spike_jobs:,} spike jobs at {report['spike_at']} UTC; {plan.schedulers} "
        f"schedulers, {plan.workers} workers × {plan.concurrency} slots; lease {plan.lease_s} s,"
        f" target timeout {plan.timeout_s:g} s; gateways {plan.gateway_rate:g}/s each, "
        f"crondepot limit `{LIMIT_NAME}` {plan.limit_rate:g}/s; window {plan.window_s:.0f} s, "
        f"drain {report['drain_s']} s (bound {plan.drain_s:g} s, "
        f"{report['not_final_at_drain_end']} runs not final at its end).")
    add("")
    faults = report["faults"]
    add("Faults: " + ", ".join(f"{n} × {k}" for k, n in sorted(faults.items())) + ".")
    add(f"Skewed clock: {report['skew']}.")
    add(f"Through PgBouncer (transaction mode, `--pooled-db`): {report['pooled']}.")
    for note in report["notes"]:
        add(f"**Note:** {note}")
    add("")
    for crash in report["crashes"]:
        add(f"**Process exited by itself (restarted, as a supervisor would):** {crash}")
    failed = failures(report)
    verdict = "FAIL: " + "; ".join(failed) if failed else "PASS"
    late = report["lateness"]
    add("| figure | value |")
    add("|---|---|")
    add(f"| verdict | **{verdict}** |")
    add(f"| expected runs (due before the cut-off) | {report['expected']:,} "
        f"({', '.join(f'{v:,} {k}' for k, v in report['expected_by_kind'].items())}) |")
    add(f"| delivered (a 200 at a gateway, or stored by the NATS stream) | "
        f"{report['delivered']:,} |")
    add(f"| final without delivery, with a reason | {report['final_without_delivery'] or 0} |")
    add(f"| **missed** | **{len(report['missed'])}** |")
    add(f"| late, still queued for a retry due after the workers stopped (not lost) | "
        f"{len(report['deferred'])} |")
    add(f"| processes that exited by themselves | {len(report['crashes'])} |")
    add(f"| **duplicate effects** at the deduping gateway | "
        f"**{report['dedupe_gateway']['duplicate_effects']}** "
        f"({report['dedupe_gateway']['duplicate_requests_accepted']} repeats dropped: "
        f"{', '.join(f'{n} {c}' for c, n in report['dedupe_repeat_causes'].items()) or '-'})"
        " |")
    nats = report["broker"]
    if nats["stream"]:
        add(f"| **duplicate effects** at the NATS stream ({plan.broker_jobs} broker jobs) | "
            f"**{nats['duplicate_effects']}** ({nats['messages']:,} messages for "
            f"{nats['runs']:,} runs; {nats['repeats_dropped']} repeats dropped by the "
            "stream) |")
    add(f"| raw duplicate requests at the non-deduping gateway | "
        f"{len(report['raw_duplicates'])} runs "
        f"({', '.join(f'{n} {c}' for c, n in report['raw_duplicate_causes'].items()) or '-'}) |")
    add(f"| unexplained duplicates | {len(report['unexplained'])} |")
    rules = report["ledger"]["rules"]
    states = report["ledger"]["states"]
    if rules["calls"] or states.get("calendar") or states.get("run-or-overlap"):
        add(f"| schedule rules ({RULE_JOBS} jobs each) | calendar: "
            f"{states.get('calendar', 0)} fires skipped `calendar`, "
            f"{rules['calls'].get('calendar', 0)} calls; window (defer, opening at the first "
            f"whole minute {WINDOW_LEAD_S} s after setup): "
            f"{report['ledger']['early_by_window']} fires deferred to it, "
            f"{rules['calls'].get('window', 0)} calls, **{rules['before_window']} before it**; "
            f"overlap skip ({SLOW_S:g} s answers): {states.get('run-or-overlap', 0)} fires, "
            f"{report['dropped_by_rule'].get('overlap', 0)} skipped `overlap`, "
            f"**{rules['overlapping']} calls in flight at once** |")
    add(f"| runs wrongly skipped (run_late) | {len(report['wrongly_skipped'])} |")
    render_operator(report, add)
    add(f"| dead-lettered / failed | {sum(report['dead'].values())} |")
    for kind, (n, p50, p99, top) in late.items():
        add(f"| lateness {kind} (first request − due, {n:,} runs) | p50 {p50:.1f} s · "
            f"p99 {p99:.1f} s · max {top:.1f} s |")
    p50, p99, top = report["delivery_lateness"]
    add(f"| lateness to the first 200 (all) | p50 {p50:.1f} s · p99 {p99:.1f} s · "
        f"max {top:.1f} s |")
    ledger = report["ledger"]
    add(f"| runs written before due / planned > 10 min ahead | "
        f"{len(ledger['early_unexplained'])} (+ {ledger['early_by_change']} written by an "
        f"operator change inside their spread window, as designed) / "
        f"{report['checks']['runs_due_far_ahead']} |")
    add(f"| worker logs: lease lost on record / call not started (deadline) / slot failed | "
        f"{report['lost_lease_logged']} / {report['not_called_logged']} / "
        f"{report['slot_failed_logged']} |")
    add(f"| requests at gateways (dedupe, plain) by status | "
        f"{report['dedupe_gateway']['by_status']}, {report['plain_gateway']['by_status']} |")
    add("")
    if report["back_to_work"]:
        add(f"Back to work after each event (seconds from the event's start; `writes` = the "
            f"primary of the event's end, asked directly every {WRITE_PROBE_S:g} s, commits "
            f"a write from then on; `run due` = then, or the due time of the first run not "
            f"yet delivered if later; `first delivery` = the first 200 at a gateway after "
            f"that; `gap` = first delivery - run due, goal <= 5 s, the run fails above "
            f"{BACK_TO_WORK_LIMIT_S:g} s; Patroni ttl {plan.ttl} s):")
        add("")
        add("| t | event | on | writes | run due | first delivery | **gap** |")
        add("|---|---|---|---|---|---|---|")
        for b in report["back_to_work"]:
            add(f"| {b['t']} | {b['kind']} | {b['target']} | {b['writes_s']} s | "
                f"{b['due_s']} s | {b['delivery_s']} s | **{b['gap_s']} s** |")
        add("")
    add("Recovery after each fault (t = seconds into the window; `next 200` = from the fault's "
        "end to the next successful delivery; `window delivered` = from the fault's end until "
        "99 % / every run due during it (5 s before, for a kill) had its first 200; faults "
        "overlap, so a window's stragglers may be another fault's):")
    add("")
    add("| t | fault | target | lasted | next 200 | runs due in window | window delivered "
        "99 % / all |")
    add("|---|---|---|---|---|---|---|")
    for r in report["recovery"]:
        extra = ""
        if r["kind"] == "pg-restart":
            extra = (f"; first run written {r['first_run_written_s']} s, first finished "
                     f"{r['first_run_finished_s']} s after it was back")
        lasted = f"{r['lasted_s']} s" if r["lasted_s"] is not None else "-"
        add(f"| {r['t']} | {r['kind']} | {r['target']} | {lasted}{extra} | "
            f"{r['next_delivery_s']} s | {r['runs_due_in_window']} | "
            f"{r['p99_delivered_s']} / {r['all_delivered_s']} |")
    add("")
    op = report["operator"]
    if op["touched_ids"]:
        add(f"Jobs the operator touched ({len(op['touched_ids'])}): "
            + ", ".join(str(i) for i in op["touched_ids"]) + ".")
        add("")
    notable = [a for a in report["actions"] if a.errors or not a.done
               or a.kind in ("import", "re-import")]
    if notable:
        add("Operator actions that were imports, needed more than one attempt, or failed "
            "(t = seconds into the window; the others are in the run's output):")
        add("")
        add("| t | action | target | detail | outcome | attempts | errors on the way |")
        add("|---|---|---|---|---|---|---|")
        for a in notable:
            note = "; ".join(a.errors[:3]) + (" …" if len(a.errors) > 3 else "")
            if a.committed_on_error:
                note += " (an attempt that raised had committed: found on re-reading)"
            add(f"| {a.at - report['started']:.1f} | {a.kind} | {a.target} | {a.detail} | "
                f"{a.outcome} | {a.attempts} | {note or '-'} |")
        add("")
    if ledger["problems"] or ledger["early_unexplained"]:
        add("**Against the model** (first 20 of each):")
        add("")
        for what, items in ledger["problems"].items():
            add(f"- {len(items)} × {what}: `{json.dumps(items[:20], default=str)}`")
        if ledger["early_unexplained"]:
            add(f"- {len(ledger['early_unexplained'])} runs written before due with no change "
                f"to explain it: `{ledger['early_unexplained'][:20]}`")
        add("")
    if report["verify"] and (report["verify"].get("doc") or {}).get("unaccounted"):
        add("`crondepot verify`: fires without a row (first 20): "
            f"`{json.dumps(report['verify']['doc']['unaccounted'][:20])}`")
        add("")
    if report["verify"] and (report["verify"].get("doc") or {}).get("duplicated"):
        add("`crondepot verify`: fires with more than one row (first 20): "
            f"`{json.dumps(report['verify']['doc']['duplicated'][:20])}`")
        add("")
    if report["raw_duplicates"]:
        add("Raw duplicates at the non-deduping gateway, each with its cause:")
        add("")
        add("| run id | effects | first 200 | gap | status | cause |")
        add("|---|---|---|---|---|---|")
        for d in report["raw_duplicates"]:
            add(f"| {d['run_id']} | {d['effects']} | {d['first']} | {d['gap_s']} s | "
                f"{d['status']} | {d['cause']} |")
        add("")
    if report["dead"]:
        add("Dead-lettered and failed runs, by reason:")
        add("")
        for (status, cls, error), n in report["dead"].most_common():
            add(f"- {n} × {status} `{cls}`: {error}")
        add("")
        add("First of them in full (run id, status, attempt, class, last_error):")
        add("")
        for example in report["dead_examples"]:
            add(f"- `{json.dumps(example)}`")
        add("")
    if report["deferred"]:
        add("Late runs still queued when the workers stopped, each with its retry time (not "
            "lost: the queue holds them; they count as neither delivered nor missed):")
        add("")
        for d in report["deferred"][:20]:
            add(f"- `{json.dumps(d)}`")
        add("")
    if report["missed"]:
        add(f"**Missed runs** ({len(report['missed'])}; first 20):")
        add("")
        for m in report["missed"][:20]:
            add(f"- `{json.dumps(m)}`")
        add("")
    if report["succeeded_without_delivery"]:
        add(f"**Succeeded in the database without a 200 at a gateway**: "
            f"{report['succeeded_without_delivery'][:20]}")
    return "\n".join(out)


def write_doc(mode: str, text: str) -> None:
    start, end = f"<!-- figures:{mode}:start -->", f"<!-- figures:{mode}:end -->"
    path = FAILOVER_DOC if mode.startswith("failover") else DOC
    doc = path.read_text() if path.exists() else "# Reliability under faults\n"
    block = f"{start}\n{text}\n{end}"
    if start in doc and end in doc:
        doc = doc[:doc.index(start)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip() + f"\n\n{block}\n"
    path.write_text(doc)


# -- main --------------------------------------------------------------------------------


def execute(run: Run, command: str, wall_start: float) -> int:
    plan = run.plan
    print(f"chaos: {plan.mode} mode, {plan.window_s:.0f} s window; logs in {run.logs}",
          flush=True)
    if plan.failover:
        missing = patroni_cluster.available()
        if missing:
            print(f"chaos: a failover run needs {missing} (apt-get install patroni "
                  "etcd-server iptables postgresql-15)", file=sys.stderr)
            return 2
        run.cluster = patroni_cluster.PatroniCluster(synchronous=plan.synchronous,
                                                     strict=plan.strict, ttl=plan.ttl)
    else:
        run.cluster = PrivateCluster()
    run.cluster.start()
    url = run.plan_url = run.cluster.url
    with connect(url, application_name="chaos-setup") as conn:
        migrate(conn)
    if plan.pgbouncer and not plan.failover:
        if pgbouncer_binary() is None:
            run.notes.append("pgbouncer is not installed (apt-get install -y pgbouncer): "
                             "every process connected directly")
        else:
            make_pooled_role(url)
            run.bouncer = PgBouncer(url)
            run.pooled = "scheduler-1 and worker-1 (their LISTEN and maintenance direct)"
    with connect(url, application_name="chaos-setup") as conn:
        if plan.failover:
            conn.execute(PROBE_TABLE)
        tenant = create_tenant(conn, TENANT)
        set_limit(conn, LIMIT_NAME, plan.limit_rate, 20)
        # The tenant may name the shared bucket (what tenants share is granted).
        grant(conn, tenant.id, limits=[LIMIT_NAME])
        for name in ("dedupe", "plain"):
            gateway = RecordingGateway(dedupe=name == "dedupe", rate=plan.gateway_rate)
            run.gateways[name] = gateway
            gateway.start()
        urls = {n: g.url for n, g in run.gateways.items()}
        jobs, spike = create_load(conn, plan, tenant.id, urls)
        jobs += create_broker_jobs(conn, run, tenant.id)
        versions0: dict[int, int] = dict(conn.execute("SELECT id, version FROM jobs").fetchall())
    print(f"  {len(jobs):,} jobs created; spike at {spike:%H:%M} UTC", flush=True)
    operator_rng = random.Random(random.getrandbits(64))
    if plan.operator:
        run.imports = [write_import(run.logs, n, plan, urls) for n in (1, 2)]
    start_services(run, url)
    started = time.time()
    cutoff = started + plan.window_s
    stop = threading.Event()
    injector = inject_failover if plan.failover else inject
    threads = [threading.Thread(target=injector, args=(run, started, stop), daemon=True),
               threading.Thread(target=progress, args=(run, url, started, stop), daemon=True)]
    if plan.operator:
        operator = Operator(run, url, tenant.id, jobs, started, operator_rng)
        threads.append(threading.Thread(target=operator.work, args=(stop,), daemon=True))
    for thread in threads:
        thread.start()
    try:
        while time.time() < cutoff:
            time.sleep(min(1.0, max(0.0, cutoff - time.time())))
            for service in run.services:
                # a process that died by itself (not by our kill -9) is a finding
                if (service.popen is not None and service.popen.poll() not in (None, -9)
                        and service.started_at < time.time() - 3):
                    last = service.log_paths[-1].read_text(errors="replace").strip()
                    last = last.splitlines()[-1] if last else ""
                    run.crashes.append(
                        f"{clock(time.time())} {service.name}.g{service.generation} exited by "
                        f"itself with {service.popen.returncode}, last line {last[:200]!r}")
                    print(f"  [{clock(time.time())}] {service.name}.g{service.generation} "
                          f"exited by itself ({service.popen.returncode}); restarting it",
                          flush=True)
                    service.start()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=150)    # an operator action may be retrying (90 s at most)
    if any(thread.is_alive() for thread in threads):
        run.notes.append("a fault or operator thread was still running 150 s after the "
                         "cut-off; the model may miss its last action")
    jobs = [*jobs, *run.imported]
    expected = expected_runs(jobs, cutoff)
    print(f"  cut-off reached; {len(expected):,} runs expected; draining (at most "
          f"{plan.drain_s:g} s)", flush=True)
    drained = drain(url, expected, plan.drain_s)
    verified: dict[str, Any] | None = None
    try:
        verified = run_verify(run, url, started - 60, cutoff)
    except (subprocess.SubprocessError, OSError) as exc:
        run.notes.append(f"crondepot verify could not run: {exc!r}")
    run.stopped_at = time.time()
    for service in run.services:
        service.terminate()
    deadline = time.time() + 25
    for service in run.services:
        code = service.wait(timeout=max(1.0, deadline - time.time()))
        stopped = any(e.get("msg") in ("scheduler stopped", "worker stopped")
                      for e in service.log_lines() if e["_file"] == service.log_paths[-1].name)
        if code is None:
            run.notes.append(f"{service.name}.g{service.generation} was still running 25 s "
                             "after SIGTERM; killed")
        elif code != 0 and not (service.name.endswith("-skewed") and stopped):
            # (the faketime wrapper itself dies of SIGTERM; its scheduler logs its stop)
            run.notes.append(f"{service.name}.g{service.generation} exited {code} on "
                             f"SIGTERM (logged its stop: {stopped})")
    report = analyse(run, url, jobs, expected, drained, started, cutoff, verified, versions0)
    text = render(report, command, time.time() - wall_start)
    print("\n" + text, flush=True)
    write_doc(plan.mode, text)
    (run.logs / "report.md").write_text(text + "\n")
    doc = FAILOVER_DOC if plan.failover else DOC
    print(f"\nwritten to {doc.relative_to(ROOT)} ({plan.mode} section) and "
          f"{run.logs / 'report.md'}; process logs in {run.logs}", flush=True)
    print("summary row: " + summary_row(report, command), flush=True)
    for b in report["back_to_work"]:
        print(f"back to work: {b['kind']}: writes at {b['writes_s']} s, a run due at "
              f"{b['due_s']} s, first delivery at {b['delivery_s']} s, gap {b['gap_s']} s",
              flush=True)
    return 1 if failures(report) else 0


def summary_row(report: dict[str, Any], command: str) -> str:
    """One line of the docs' table of consecutive runs."""
    verified = (report["verify"] or {}).get("doc") or {}
    op = report["operator"]
    done: Counter[str] = Counter()
    for (kind, outcome), n in op["actions"].items():
        if outcome == "done":
            done[kind] += n
    kills = report["faults"]
    failed = failures(report)
    return " | ".join([
        "", f"`{command}`", "**FAIL**" if failed else "**PASS**",
        f"{report['expected']:,}", f"{report['delivered']:,}", f"**{len(report['missed'])}**",
        f"**{report['duplicate_effects']}** "
        f"({report['dedupe_gateway']['duplicate_requests_accepted']} repeats dropped)",
        f"{len(report['raw_duplicates'])} ({len(report['unexplained'])} unexplained)",
        f"exit {(report['verify'] or {}).get('exit', '-')}: {verified.get('fires', 0):,} fires, "
        f"**{verified.get('unaccounted_count', '?')} / {verified.get('duplicated_count', '?')}**"
        f", {verified.get('pending', '?')} pending (paused: {report['pending_model']})",
        f"{sum(done.values())} ({done['edit-payload']} payload, {done['edit-cron']} cron, "
        f"{done['edit-spread']} spread, {done['pause']} pauses, {done['resume']} resumes, "
        f"{done['import'] + done['re-import']} imports); {len(op['failed'])} failed, "
        f"{len(op['retried'])} retried",
        f"{kills['kill-scheduler']} / {kills['kill-worker']}",
        f"{sum(report['dead'].values())}", ""]).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="window (default 10)")
    parser.add_argument("--ci", action="store_true",
                        help="3-minute window, smaller load (about 5 minutes wall)")
    parser.add_argument("--jobs", type=int, default=3000, help="every-minute jobs")
    parser.add_argument("--spike", type=int, default=3000, help="jobs of the spike minute")
    parser.add_argument("--seed", type=int, default=None,
                        help="random seed for the faults and the operator's choices")
    parser.add_argument("--failover", action="store_true",
                        help="a Patroni cluster (2 nodes, etcd) and its events: kill -9 of "
                             "the primary's postmaster, a switchover, kill -9 of the leader's "
                             "Patroni, a partition of the primary, an etcd outage")
    parser.add_argument("--async", dest="sync", action="store_false",
                        help="with --failover: asynchronous replication")
    parser.add_argument("--not-strict", dest="strict", action="store_false",
                        help="with --failover: synchronous_mode without "
                             "synchronous_mode_strict")
    parser.add_argument("--ttl", type=int, default=patroni_cluster.DEFAULT_TTL,
                        help="with --failover: Patroni's leader-key ttl in seconds (default "
                             f"{patroni_cluster.DEFAULT_TTL}; at least 9); the partition "
                             "lasts max(20, ttl + 15) s")
    parser.add_argument("--no-operator", action="store_true",
                        help="no edits, pauses or imports: the faults alone")
    parser.add_argument("--no-pgbouncer", action="store_true",
                        help="every process connects directly (by default the first "
                             "scheduler and worker go through a private PgBouncer; not with "
                             "--failover)")
    args = parser.parse_args(argv)
    if args.ttl < 9:
        parser.error("--ttl: at least 9 (loop_wait 1 s + 2 x retry_timeout 4 s)")
    if args.seed is not None:
        random.seed(args.seed)
    plan = plan_for(args)
    # the gateways listen on 127.0.0.1: the jobs this process creates name them, and a
    # literal loopback address is refused at create as at call time unless allow-listed
    os.environ[ALLOWLIST_ENV] = TARGET_ALLOWLIST
    command = "python bench/chaos.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    run = Run(plan, Path(tempfile.mkdtemp(prefix="crondepot-chaos-")))

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    wall_start = time.time()
    try:
        return execute(run, command.strip(), wall_start)
    except KeyboardInterrupt:
        print("chaos: interrupted; cleaning up", file=sys.stderr)
        return 130
    except (psycopg.Error, subprocess.SubprocessError, OSError) as exc:
        print(f"chaos: setup or run failed: {exc!r}", file=sys.stderr)
        return 2
    finally:
        run.close()


if __name__ == "__main__":
    sys.exit(main())
