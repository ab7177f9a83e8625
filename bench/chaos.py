"""Fault-injection run: the whole system under crashes, restarts and a misbehaving gateway.

Proves the promise of issue 7 with figures: a crash causes a late run, never a lost one,
and a repeat never reaches a target that drops repeated keys.

What it does (everything on loopback, nothing on the machine's shared PostgreSQL):

- starts a private PostgreSQL (``tests/support/cluster.py``: pgserver's binaries, a free
  port), migrates it, creates a tenant and a shared rate limit ``sms-gateway`` a little under
  the gateways' own limit;
- starts two in-process gateways (``bench/gateway.py``): one drops repeated idempotency keys
  (jobs with ``"dedupes": true``), one does not (``"dedupes": false``);
- creates thousands of every-minute jobs (spread over 50 s of the minute, ``run_late``,
  catch-up ``all``, lease 15 s, target timeout 3 s), half to each gateway, plus a 9 a.m.-style
  spike: thousands of jobs due at one fixed UTC minute a little into the run, unspread;
- runs 3 ``crondepot scheduler`` copies (one under ``faketime -f +2h``: a skewed host clock)
  and 3 ``crondepot worker`` processes as real processes, each in its own process group;
- injects faults on a schedule proportional to the duration: ``kill -9`` of a random
  scheduler or worker every few seconds (restarted a second later); one PostgreSQL restart
  (``pg_ctl stop -m immediate`` + start); one worker ``SIGSTOP``-ed for lease + 10 s, then
  ``SIGCONT``-ed; a 503 storm (half of all requests) and an outage (every request 503) at
  both gateways. Every fault is logged with its time;
- stops injecting at 80 % of the window, keeps the load until the cut-off, then waits
  (bounded) until every expected run is final, stops every process with SIGTERM and
  computes the report: expected, delivered, missed, duplicate effects, raw duplicates with
  their cause, wrongly skipped, dead letters, lateness, recovery after each fault.

The report is printed and written to ``docs/reliability.md`` (its figures section for this
mode is replaced; the prose around it is kept). Exit status 1 when missed > 0, duplicate
effects > 0 or a run_late run was skipped; 2 on a setup failure.

    python bench/chaos.py --ci             # 3 minutes, smaller load (CI; about 4 min wall)
    python bench/chaos.py --minutes 10     # the full run recorded in docs/reliability.md
"""

from __future__ import annotations

import argparse
import contextlib
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from tests.support.cluster import PrivateCluster  # noqa: E402

from crondepot.db import connect, migrate  # noqa: E402
from crondepot.job.spec import JobSpec  # noqa: E402
from crondepot.job.store import create_jobs  # noqa: E402
from crondepot.ratelimit import set_limit  # noqa: E402
from crondepot.tenants import create_tenant  # noqa: E402
from crondepot.timetable import run_id, spread_offset  # noqa: E402
from gateway import Gateway, Request  # noqa: E402

DOC = ROOT / "docs" / "reliability.md"
FINAL = ("succeeded", "failed", "dead", "skipped", "cancelled")
SPREAD_SECONDS = 50
LIMIT_NAME = "sms-gateway"
SKEW = "+2h"


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

    @property
    def window_s(self) -> float:
        return self.minutes * 60


def plan_for(args: argparse.Namespace) -> Plan:
    if args.ci:
        return Plan(mode="ci", minutes=3, every_minute_jobs=1200, spike_jobs=1000,
                    spike_lead_s=60, kill_every_s=8, storm_s=20, outage_s=20, drain_s=40)
    return Plan(mode="full", minutes=args.minutes, every_minute_jobs=args.jobs,
                spike_jobs=args.spike, spike_lead_s=min(150.0, args.minutes * 20))


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
        if self.popen is not None and self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=10)

    def terminate(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int | None:
        """Wait for the exit after ``terminate``; kill -9 past ``timeout`` (None then)."""
        if self.popen is None:
            return None
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
            return None

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
class Fault:
    kind: str                   # kill-worker, kill-scheduler, pg-restart, pause, storm, outage
    at: float                   # time.time() when it began
    target: str = ""
    end: float | None = None    # when it ended (interval faults), or when the restart was ready
    detail: str = ""


@dataclass
class Run:
    """Everything the chaos run owns, so that ``close`` can always undo it."""

    plan: Plan
    logs: Path
    cluster: PrivateCluster | None = None
    gateways: dict[str, Gateway] = field(default_factory=dict)
    services: list[Service] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)   # processes that exited by themselves
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fault(self, kind: str, target: str = "", detail: str = "") -> Fault:
        entry = Fault(kind=kind, at=time.time(), target=target, detail=detail)
        with self.lock:
            self.faults.append(entry)
        print(f"  [{_clock(entry.at)}] fault: {kind} {target} {detail}".rstrip(), flush=True)
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
        if self.cluster is not None:
            self.cluster.destroy()
            self.cluster = None


def _clock(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S.%f")[:-3]


# -- setup -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    spec: JobSpec
    kind: str                   # "every-minute" or "spike"
    gateway: str                # "dedupe" or "plain"
    first: datetime             # the first nominal instant, as create_jobs planned it


@dataclass(frozen=True, slots=True)
class Expected:
    run_id: str
    job_id: int
    kind: str                   # "every-minute" or "spike"
    gateway: str                # "dedupe" or "plain"
    due: float                  # unix seconds


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
    for start in range(0, len(documents), 1000):
        chunk = documents[start:start + 1000]
        specs = [JobSpec.from_document(doc) for doc, _, _ in chunk]
        created = create_jobs(conn, tenant_id, specs)
        for made, spec, (_, kind, gateway) in zip(created, specs, chunk, strict=True):
            if made.next_nominal_at is None:
                raise SystemExit(f"job {made.id} has no first run")
            jobs.append(Job(made.id, spec, kind, gateway, made.next_nominal_at))
    return jobs, spike


def expected_runs(jobs: Sequence[Job], cutoff: float) -> list[Expected]:
    """Every run due before the cut-off: the first run the job was created with, then its
    timetable (the same computation as the scheduler's, done independently here)."""
    end = datetime.fromtimestamp(cutoff, UTC)
    out: list[Expected] = []
    for job in jobs:
        spec = job.spec
        offset = spread_offset(spec.spread_key or spec.hash_key(job.id), spec.spread_seconds)
        fires = [job.first] + [f.at for f in spec.timetable(job.id).fires_between(
            job.first, end, 10_000)]
        for at in fires:
            due = (at + timedelta(seconds=offset)).timestamp()
            if due < cutoff:
                out.append(Expected(run_id(job.id, at), job.id, job.kind, job.gateway, due))
    return out


def start_services(run: Run, url: str) -> None:
    plan = run.plan
    env = {**os.environ, "CRONDEPOT_LOG_FORMAT": "json", "PYTHONUNBUFFERED": "1",
           "CRONDEPOT_TARGET_ALLOWLIST": "127.0.0.1/32"}
    for name in ("CRONDEPOT_DATABASE_URL", "CRONDEPOT_DATA_DIR"):
        env.pop(name, None)
    crondepot = [sys.executable, "-m", "crondepot"]
    faketime = shutil.which("faketime")
    if faketime is None:
        run.notes.append("faketime is not installed (apt-get install -y faketime): the "
                         "skewed-clock scheduler fault was SKIPPED; all schedulers ran on the "
                         "host clock.")
    for i in range(1, plan.schedulers + 1):
        skewed = i == plan.schedulers and faketime is not None
        prefix = [faketime, "-f", SKEW] if skewed and faketime else []
        name = f"scheduler-{i}" + ("-skewed" if skewed else "")
        run.services.append(Service(name, [
            *prefix, *crondepot, "scheduler", "--db", url, "--tick", "1s", "--log-json",
            "--name", f"{name}.g{{gen}}"], env, run.logs))
    for i in range(1, plan.workers + 1):
        name = f"worker-{i}"
        run.services.append(Service(name, [
            *crondepot, "worker", "--db", url, "--concurrency", str(plan.concurrency),
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
                print(f"  [{_clock(now)}] SIGCONT {paused.name}", flush=True)
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
            assert run.cluster is not None
            run.cluster.restart("immediate")
            fault.end = time.time()
            print(f"  [{_clock(fault.end)}] PostgreSQL is back "
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
        print(f"  [{_clock(time.time())}] t+{time.time() - started:5.0f}s delivered {delivered}"
              f" · requests {sum(c['requests'] for c in counts.values())} · {depth}", flush=True)


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


def attribute(first: float, faults: Sequence[Fault], evidence: dict[str, str],
              window: float) -> str:
    """The cause of a repeat whose first accepted request arrived at ``first``."""
    if "lost-lease" in evidence:
        return (f"pause past the lease: {evidence['lost-lease']} logged 'lease was lost' "
                "for this run when it resumed")
    if "slot-failed" in evidence:
        restarts = [f for f in faults if f.kind == "pg-restart"
                    and f.at - 1 <= first + window and (f.end or f.at) >= first - 1]
        where = " during the PostgreSQL restart" if restarts else ""
        return (f"outcome write failed{where}: {evidence['slot-failed']} logged 'slot failed'"
                " after the call, the lease expired, the run was called again")
    for f in faults:
        if f.kind == "kill-worker" and first - 1 <= f.at <= first + window:
            return (f"worker kill -9 between send and record: {f.target} killed at "
                    f"{_clock(f.at)}, {f.at - first:+.2f}s from the first request")
    for f in faults:
        if f.kind == "pause" and f.at <= first + window and (f.end or math.inf) >= first - 1:
            return f"pause past the lease (by time): {f.target} stopped {_clock(f.at)}"
    for f in faults:
        if f.kind == "pg-restart" and f.at - 1 <= first + window and (f.end or f.at) >= first:
            return f"PostgreSQL restart at {_clock(f.at)} within the call window (by time)"
    return "UNEXPLAINED"


def analyse(run: Run, url: str, expected: Sequence[Expected], drained: tuple[float, int],
            started: float, cutoff: float) -> dict[str, Any]:
    plan = run.plan
    rows = fetch_rows(url, expected)
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

    missed: list[dict[str, Any]] = []
    deferred: list[dict[str, Any]] = []
    now = time.time()
    wrongly_skipped: list[str] = []
    final_without_delivery: Counter[str] = Counter()
    succeeded_without_delivery: list[str] = []
    for e in expected:
        row = rows.get(e.run_id)
        if row is not None and row.status == "skipped":
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
                and row.available > now):
            # Late, not lost: in the queue with its retry time set after the drain's end.
            deferred.append({"run_id": e.run_id, "attempt": row.attempt,
                             "retry_at": _clock(row.available),
                             "error_class": row.error_class, "due": _clock(e.due)})
            continue
        missed.append({"run_id": e.run_id, "kind": e.kind, "gateway": e.gateway,
                       "due": _clock(e.due),
                       "row": None if row is None else {
                           "status": row.status, "attempt": row.attempt,
                           "error_class": row.error_class, "last_error": row.last_error,
                           "skip_reason": row.skip_reason},
                       "requests": [(r.status, _clock(r.arrived)) for g in by_gateway.values()
                                    for r in g.get(e.run_id, [])]})

    dedupe = run.gateways["dedupe"].stats()
    plain = by_gateway["plain"]
    window = plan.timeout_s + 5
    duplicates: list[dict[str, Any]] = []
    for key, requests in sorted(plain.items()):
        accepted = sorted(r.arrived for r in requests if r.status == 200)
        if len(accepted) < 2:
            continue
        cause = attribute(accepted[0], run.faults, evidence.get(key, {}), window)
        row = rows.get(key)
        duplicates.append({"run_id": key, "effects": len(accepted),
                           "first": _clock(accepted[0]),
                           "gap_s": round(accepted[1] - accepted[0], 1),
                           "status": row.status if row else "?", "cause": cause})
    causes = Counter(d["cause"].split(":")[0] for d in duplicates)
    dropped: Counter[str] = Counter()
    for key, requests in by_gateway["dedupe"].items():
        accepted = sorted(r.arrived for r in requests if r.status == 200)
        if len(accepted) >= 2:
            dropped[attribute(accepted[0], run.faults, evidence.get(key, {}), window
                              ).split(":")[0]] += len(accepted) - 1

    dead = [r for r in rows.values() if r.status in ("dead", "failed")]
    dead_why = Counter((r.status, r.error_class or "?", re.sub(r"\d+", "N", (r.last_error or "")
                                                                 )[:90]) for r in dead)
    lateness = {kind: [first_arrival[e.run_id] - e.due for e in expected
                       if e.kind == kind and e.run_id in first_arrival]
                for kind in ("every-minute", "spike")}
    delivered_late = [first_ok[e.run_id] - e.due for e in expected if e.run_id in first_ok]
    oks = sorted(t for t in first_ok.values())

    def next_ok(after: float) -> float | None:
        for t in oks:
            if t >= after:
                return t - after
        return None

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
            "at": _clock(f.at), "t": round(f.at - started, 1), "kind": f.kind,
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
    return {
        "plan": plan, "started": started, "cutoff": cutoff,
        "drain_s": round(drained[0], 1), "not_final_at_drain_end": drained[1],
        "expected": len(expected),
        "expected_by_kind": dict(Counter(e.kind for e in expected)),
        "spike_at": _clock(spike[0].due) if spike else None,
        "delivered": sum(1 for e in expected if e.run_id in first_ok),
        "final_without_delivery": dict(final_without_delivery),
        "missed": missed, "deferred": deferred, "crashes": run.crashes,
        "dedupe_repeat_causes": dict(dropped),
        "succeeded_without_delivery": succeeded_without_delivery,
        "wrongly_skipped": wrongly_skipped,
        "dedupe_gateway": dedupe,
        "duplicate_effects": dedupe["duplicate_effects"],
        "plain_gateway": run.gateways["plain"].stats(),
        "raw_duplicates": duplicates, "raw_duplicate_causes": dict(causes),
        "unexplained": [d for d in duplicates if d["cause"] == "UNEXPLAINED"],
        "dead": dead_why, "dead_examples": [(r.run_id, r.status, r.attempt, r.error_class,
                                             (r.last_error or "")[:400]) for r in dead[:10]],
        "lateness": {kind: (len(v), percentile(v, 50), percentile(v, 99), max(v, default=0))
                     for kind, v in lateness.items()},
        "delivery_lateness": (percentile(delivered_late, 50), percentile(delivered_late, 99),
                              max(delivered_late, default=0)),
        "recovery": recovery, "checks": checks,
        "lost_lease_logged": sum(1 for v in evidence.values() if "lost-lease" in v),
        "not_called_logged": sum(1 for v in evidence.values() if "not-called" in v),
        "slot_failed_logged": sum(1 for v in evidence.values() if "slot-failed" in v),
        "skew": skew_evidence(run), "notes": run.notes,
        "faults": Counter(f.kind for f in run.faults),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# -- report ------------------------------------------------------------------------------


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
    for note in report["notes"]:
        add(f"**Note:** {note}")
    add("")
    for crash in report["crashes"]:
        add(f"**Process exited by itself (restarted, as a supervisor would):** {crash}")
    verdict = ("PASS" if not report["missed"] and not report["duplicate_effects"]
               and not report["wrongly_skipped"] else "FAIL")
    late = report["lateness"]
    add("| figure | value |")
    add("|---|---|")
    add(f"| verdict | **{verdict}** |")
    add(f"| expected runs (due before the cut-off) | {report['expected']:,} "
        f"({', '.join(f'{v:,} {k}' for k, v in report['expected_by_kind'].items())}) |")
    add(f"| delivered (a 200 at a gateway) | {report['delivered']:,} |")
    add(f"| final without delivery, with a reason | {report['final_without_delivery'] or 0} |")
    add(f"| **missed** | **{len(report['missed'])}** |")
    add(f"| late, still queued for a retry after the drain (not lost) | "
        f"{len(report['deferred'])} |")
    add(f"| processes that exited by themselves | {len(report['crashes'])} |")
    add(f"| **duplicate effects** at the deduping gateway | **{report['duplicate_effects']}** "
        f"({report['dedupe_gateway']['duplicate_requests_accepted']} repeats dropped: "
        f"{', '.join(f'{n} {c}' for c, n in report['dedupe_repeat_causes'].items()) or '-'})"
        " |")
    add(f"| raw duplicate requests at the non-deduping gateway | "
        f"{len(report['raw_duplicates'])} runs "
        f"({', '.join(f'{n} {c}' for c, n in report['raw_duplicate_causes'].items()) or '-'}) |")
    add(f"| unexplained duplicates | {len(report['unexplained'])} |")
    add(f"| runs wrongly skipped (run_late) | {len(report['wrongly_skipped'])} |")
    add(f"| dead-lettered / failed | {sum(report['dead'].values())} |")
    for kind, (n, p50, p99, top) in late.items():
        add(f"| lateness {kind} (first request − due, {n:,} runs) | p50 {p50:.1f} s · "
            f"p99 {p99:.1f} s · max {top:.1f} s |")
    p50, p99, top = report["delivery_lateness"]
    add(f"| lateness to the first 200 (all) | p50 {p50:.1f} s · p99 {p99:.1f} s · "
        f"max {top:.1f} s |")
    add(f"| runs written before due / planned > 10 min ahead | "
        f"{report['checks']['runs_written_early']} / {report['checks']['runs_due_far_ahead']} |")
    add(f"| worker logs: lease lost on record / call not started (deadline) / slot failed | "
        f"{report['lost_lease_logged']} / {report['not_called_logged']} / "
        f"{report['slot_failed_logged']} |")
    add(f"| requests at gateways (dedupe, plain) by status | "
        f"{report['dedupe_gateway']['by_status']}, {report['plain_gateway']['by_status']} |")
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
        add("Late runs still queued after the drain, each with its retry time (not lost: the "
            "queue holds them; they count as neither delivered nor missed):")
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
    doc = DOC.read_text() if DOC.exists() else "# Reliability under faults\n"
    block = f"{start}\n{text}\n{end}"
    if start in doc and end in doc:
        doc = doc[:doc.index(start)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip() + f"\n\n{block}\n"
    DOC.write_text(doc)


# -- main --------------------------------------------------------------------------------


def execute(run: Run, command: str, wall_start: float) -> int:
    plan = run.plan
    print(f"chaos: {plan.mode} mode, {plan.window_s:.0f} s window; logs in {run.logs}",
          flush=True)
    run.cluster = PrivateCluster()
    run.cluster.start()
    url = run.cluster.url
    with connect(url, application_name="chaos-setup") as conn:
        migrate(conn)
        tenant = create_tenant(conn, "chaos")
        set_limit(conn, LIMIT_NAME, plan.limit_rate, 20)
        for name in ("dedupe", "plain"):
            run.gateways[name] = Gateway(dedupe=name == "dedupe", rate=plan.gateway_rate).start()
        jobs, spike = create_load(conn, plan, tenant.id,
                                  {n: g.url for n, g in run.gateways.items()})
    print(f"  {len(jobs):,} jobs created; spike at {spike:%H:%M} UTC", flush=True)
    start_services(run, url)
    started = time.time()
    cutoff = started + plan.window_s
    stop = threading.Event()
    threads = [threading.Thread(target=inject, args=(run, started, stop), daemon=True),
               threading.Thread(target=progress, args=(run, url, started, stop), daemon=True)]
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
                        f"{_clock(time.time())} {service.name}.g{service.generation} exited by "
                        f"itself with {service.popen.returncode}, last line {last[:200]!r}")
                    print(f"  [{_clock(time.time())}] {service.name}.g{service.generation} "
                          f"exited by itself ({service.popen.returncode}); restarting it",
                          flush=True)
                    service.start()
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    expected = expected_runs(jobs, cutoff)
    print(f"  cut-off reached; {len(expected):,} runs expected; draining (at most "
          f"{plan.drain_s:g} s)", flush=True)
    drained = drain(url, expected, plan.drain_s)
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
    report = analyse(run, url, expected, drained, started, cutoff)
    text = render(report, command, time.time() - wall_start)
    print("\n" + text, flush=True)
    write_doc(plan.mode, text)
    print(f"\nwritten to {DOC.relative_to(ROOT)} ({plan.mode} section); process logs in "
          f"{run.logs}", flush=True)
    failed = report["missed"] or report["duplicate_effects"] or report["wrongly_skipped"]
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="window (default 10)")
    parser.add_argument("--ci", action="store_true",
                        help="3-minute window, smaller load (about 4 minutes wall)")
    parser.add_argument("--jobs", type=int, default=3000, help="every-minute jobs")
    parser.add_argument("--spike", type=int, default=3000, help="jobs of the spike minute")
    parser.add_argument("--seed", type=int, default=None, help="random seed for the faults")
    args = parser.parse_args(argv)
    if args.seed is not None:
        random.seed(args.seed)
    plan = plan_for(args)
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
