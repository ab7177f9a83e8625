"""Full-day benchmark: the seed's database at full size, then its 9:00 burst through real processes.

**Build** (timed apart from the run), in a fresh database ``crondepot_fullday`` on the
machine's PostgreSQL (migrated with ``crondepot.db.migrate``, dropped afterwards):

- Tenant ``bank42``: 2.7 M × scale jobs in the seed's mix (``MIX``): 480 k × scale daily
  reminders at 09:00 Asia/Kolkata naming the shared bucket ``sms-gateway`` (450/s, burst 50;
  misfire ``skip_after`` 1 h); EMI, card and renewal reminders on their day of the month;
  customers abroad (Dubai, New York with its DST, London); an hourly sync. About 1.2 M fires a
  day. One ``INSERT … SELECT generate_series`` per kind, an http target on the gateway below.
- 31 days × about 1.2 M × scale runs of history (36 M for the 30 days kept, plus the day
  the pruner deletes), one ``INSERT … SELECT`` per past fire in time order (so ``created_at``
  follows the heap, as a table filled day by day does), each fire's rows in realistic
  states: 97 % succeeded at the first attempt, 2 % at the second (a ``run_attempts`` row),
  0.4 % failed, 0.3 % skipped past their deadline, 0.1 % dead after 6 attempts (kept by the
  pruner); the 09:00 reminders' start times paced at 450/s as the bucket paced them. The
  indexes of ``runs`` that hold its history are dropped for the load and built after it
  (their definitions read from the catalogue and checked identical afterwards), then
  ``VACUUM (ANALYZE)`` and a ``CHECKPOINT``.
- Tenant ``alerts``: max(60, 600 × scale) urgent jobs every 60 s, anchored at each second
  of the minute (so each second has runs due; urgent runs are never spread), created with
  ``crondepot.job.create_jobs`` just before the run (no history).

**9:00 now.** The reminders' cron is rewritten to the local wall time of the first whole
minute at least ``LEAD_SECONDS`` away, and their next fire set to it (``timetable_since``
too, so ``crondepot verify`` judges the new timetable); one UPDATE, with
``session_replication_role = replica`` so that this staging step writes no audit row.

**Run**: ``bench/gateway.py`` in its own process (dedupes, answers every request 0.3–1.5 s
late, 1 % 503s), 3 ``crondepot scheduler``, 2 ``crondepot worker --concurrency 480``
(urgent-only slots sized for the alerts tenant), ``crondepot api``. Their maintenance
leader neither prunes nor verifies (``--retention-days 0 --verify-every 0``): a few seconds
into the burst, ``crondepot prune --retention-days 30`` deletes the oldest day, timed; then
``VACUUM runs``, timed, because this server runs with ``autovacuum=off`` (its configuration
file), so the pass autovacuum would make is made by hand. Meanwhile, from this process:

- a claim probe: ``claim_runs`` for 20 normal runs every 0.25 s on its own connection, in a
  transaction rolled back (pg_stat_statements is not preloaded on this server, so the
  claim is timed by the client: round trip included);
- an API probe: ``GET /v1/runs?limit=100`` for bank42, 1 s between calls (httpx).

When every reminder has ended: ``crondepot verify`` over the hour before, timed.

**Printed**: the build's steps and sizes; drain rate at the gateway against the bucket
(attempts a second from the 5th second of the burst to the last reminder's first call);
runs skipped; alerts' start lag (``first_claimed_at − due_at``, database clock) p50/p99
before the burst, during it, during the prune and the VACUUM; the claim's and the API's
p50/p99 by phase; the prune's and VACUUM's durations; autovacuum passes
(``pg_stat_user_tables``); table and index sizes; WAL of the build and of the run; CPU;
verify's result and time; load average. Figures are printed, never asserted.

    python bench/fullday.py                 # full size: ~16 GB of runs, ~40 min, a quiet machine
    python bench/fullday.py --scale 0.1     # the same shape at a tenth, under 10 minutes
    python bench/fullday.py --scale 0.01    # a smoke check
    python bench/fullday.py --write-only    # the build, then only the 3 schedulers writing
                                            # the burst's runs over the history, timed
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import psycopg

from common import (
    DEFAULT_ADMIN_URL,
    admin_connect,
    compile_crondepot,
    fresh_database,
    run_interruptibly,
    server_cpu,
    server_lines,
    wal_lsn,
)
from crondepot.db import ALL_TENANTS, Q, connect
from crondepot.job import JobSpec, create_jobs
from crondepot.job.guard import ALLOWLIST_ENV
from crondepot.limits.buckets import set_limit
from crondepot.queue.claim import claim_runs
from crondepot.runs import partitions
from crondepot.runs.reads import listed_statuses
from crondepot.runs.retention import PRUNE_BATCH, prune_cutoff
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant
from crondepot.timetable import Timetable
from crondepot_testkit.processes import free_port
from workers import Children, cpu_since, load_line, pct, wal_since

DB_NAME = "crondepot_fullday"
RATE = 450.0                       # the bucket: 450/s, a little under the gateway's 500/s
BURST_TOKENS = 50
LIMIT = "sms-gateway"
MISFIRE_SECONDS = 3600             # a reminder may go out up to an hour late
HISTORY_DAYS = 31                  # 30 kept + the day the pruner deletes
RETENTION_DAYS = 30
LEAD_SECONDS = 20                  # processes start at least this long before the burst
PROBE_SECONDS = 0.25               # the claim probe's pause between calls
API_PROBE_SECONDS = 1.0            # the API probe's: its list reads the tenant's history
SCHEDULERS = 3
WORKERS = 2
MB = 1024 * 1024


@dataclass(frozen=True)
class Kind:
    name: str
    cron: str
    tz: str
    full: int                      # jobs at scale 1
    priority: str = "normal"


# The seed's bank: 2.7 M jobs, about 1.2 M fires a day, 480 k of them at 09:00 IST.
MIX = [
    Kind("bill", "0 9 * * *", "Asia/Kolkata", 480_000),        # the 9:00 burst
    Kind("emi", "0 9 5 * *", "Asia/Kolkata", 540_000),         # EMI due on the 5th
    Kind("renewal", "0 10 1 * *", "Asia/Kolkata", 697_000, "bulk"),
    Kind("card", "0 9 20 * *", "Asia/Kolkata", 518_000),       # card statement
    Kind("abroad", "0 9 * * *", "Asia/Dubai", 200_000),
    Kind("us", "30 8 * * *", "America/New_York", 100_000),     # across DST
    Kind("uk", "0 8 1 * *", "Europe/London", 150_000),
    Kind("sync", "0 * * * *", "UTC", 15_000, "bulk"),          # hourly
]
BURST = MIX[0]

PAYLOAD = """jsonb_build_object(
    'phone', '+91' || (9800000000 + (g * 7919) %% 199999999), 'template', %(kind)s::text,
    'amount', 1000 + (g * 37) %% 90000, 'currency', 'INR',
    'account', 'XXXX' || lpad((g %% 10000)::text, 4, '0'))"""
INSERT_JOBS = f"""
    INSERT INTO jobs (tenant_id, key, cron, tz, priority, next_run_at, next_nominal_at, target,
                      payload, rate_limit, misfire_policy, misfire_seconds, created_at,
                      updated_at, timetable_since)
    SELECT %(tenant)s, 'bank42:' || g || ':' || %(kind)s, %(cron)s, %(tz)s, %(priority)s,
           %(first)s, %(first)s, %(target)s::jsonb, {PAYLOAD}, %(limit)s,
           CASE WHEN %(limit)s::text IS NULL THEN 'run_late' ELSE 'skip_after' END,
           CASE WHEN %(limit)s::text IS NULL THEN NULL ELSE {MISFIRE_SECONDS} END,
           %(created)s, %(created)s, %(created)s
    FROM generate_series(1, %(count)s::bigint) AS g
    RETURNING id
"""
# One past fire of one kind: a row per job in a state drawn from a hash of (job, day), and
# a run_attempts row for each earlier attempt of a run that needed more than one.
INSERT_HISTORY = """
    WITH r AS (
        INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at, status,
                          attempt, available_at, first_claimed_at, started_at, finished_at,
                          skip_reason, last_error, error_class, created_at, updated_at, worker)
        SELECT j.id || ':' || %(epoch)s, j.id, j.tenant_id, j.priority, %(at)s, %(at)s,
               o.status, o.attempt, %(at)s, o.started - (o.attempt - 1) * interval '30 s',
               o.started, o.finished,
               CASE WHEN o.status = 'skipped' THEN 'deadline_passed' END,
               CASE o.status WHEN 'dead' THEN 'HTTP 503 from the SMS gateway'
                             WHEN 'failed' THEN 'HTTP 400: invalid number' END,
               CASE o.status WHEN 'dead' THEN 'http_5xx' WHEN 'failed' THEN 'http_4xx' END,
               %(at)s, o.finished, CASE WHEN o.attempt > 0 THEN 'w' || (j.id %% 2 + 1) END
        FROM jobs j,
             LATERAL (SELECT (j.id * 7919 + %(day)s) %% 1000 AS h,
                             %(at)s::timestamptz + make_interval(secs => CASE
                                 WHEN %(paced)s THEN (j.id - %(low)s) / %(rate)s::float8
                                 ELSE (j.id %% 20) * 0.1 END) AS sent) AS k,
             LATERAL (SELECT s.status, s.attempt,
                             CASE WHEN s.attempt > 0
                                  THEN k.sent + (s.attempt - 1) * interval '40 s' END AS started,
                             CASE WHEN s.attempt > 0
                                  THEN k.sent + (s.attempt - 1) * interval '40 s'
                                       + make_interval(secs => 0.3 + (j.id %% 13) * 0.1)
                                  ELSE k.sent END AS finished
                      FROM (SELECT CASE WHEN k.h = 0 THEN 'dead' WHEN k.h < 5 THEN 'failed'
                                        WHEN k.h BETWEEN 25 AND 27 THEN 'skipped'
                                        ELSE 'succeeded' END AS status,
                                   CASE WHEN k.h = 0 THEN 6 WHEN k.h BETWEEN 5 AND 24 THEN 2
                                        WHEN k.h BETWEEN 25 AND 27 THEN 0 ELSE 1 END AS attempt
                           ) AS s) AS o
        WHERE j.id BETWEEN %(low)s AND %(high)s
        RETURNING run_id, attempt, started_at
    )
    INSERT INTO run_attempts (run_id, attempt, started_at, ended_at, outcome, error, error_class,
                              worker)
    SELECT r.run_id, a, r.started_at - (r.attempt - a) * interval '40 s',
           r.started_at - (r.attempt - a) * interval '40 s' + interval '1 s', 'retried',
           'HTTP 503 from the SMS gateway', 'http_5xx', 'w1'
    FROM r, generate_series(1, r.attempt - 1) AS a
    WHERE r.attempt > 1
"""
# The indexes of runs that its history fills: built after the load, as a restore does.
LOADED_INDEXES = """
    SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid), c.conname,
           pg_get_constraintdef(c.oid)
    FROM pg_index i
    LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid
    WHERE i.indrelid = 'runs'::regclass
      AND (i.indpred IS NULL
           OR i.indexrelid IN ('runs_dead'::regclass, 'runs_finished_created'::regclass))
    ORDER BY 1
"""
RUNS_INDEXES = """
    SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index
    WHERE indrelid = 'runs'::regclass ORDER BY 1
"""
RETIME = """
    UPDATE jobs SET cron = %(cron)s, next_run_at = %(at)s, next_nominal_at = %(at)s,
                    timetable_since = now()
    WHERE id BETWEEN %(low)s AND %(high)s
"""
# runs is partitioned (migration 0040): its partitions are counted as one table "runs",
# and each index of the parent as one ("runs_*_pkey": every partition's own key).
RUNS_TREE = "(SELECT relid FROM pg_partition_tree('runs') WHERE isleaf)"
TABLE_STATS = f"""
    SELECT CASE WHEN s.relid IN {RUNS_TREE} THEN 'runs' ELSE s.relname END,
           sum(n_live_tup), sum(n_dead_tup), sum(vacuum_count), sum(autovacuum_count),
           sum(analyze_count), sum(autoanalyze_count), sum(n_tup_upd)
    FROM pg_stat_user_tables AS s
    WHERE s.relname IN ('jobs', 'run_attempts', 'rate_limits') OR s.relid IN {RUNS_TREE}
    GROUP BY 1
"""
SIZES = f"""
    SELECT CASE WHEN c.oid IN {RUNS_TREE} THEN 'runs' ELSE c.relname END,
           sum(pg_relation_size(c.oid)), sum(pg_indexes_size(c.oid)),
           sum(pg_total_relation_size(c.oid))
    FROM pg_class c
    WHERE (c.relname IN ('jobs', 'run_attempts', 'audit_log') AND c.relkind = 'r')
       OR c.oid IN {RUNS_TREE}
    GROUP BY 1 ORDER BY 4 DESC
"""
INDEX_SIZES = f"""
    SELECT regexp_replace(coalesce(pg_partition_root(indexrelid), indexrelid)::regclass::text,
                          '^runs_(p[0-9]{{8}}|default|history)_', 'runs_*_'),
           sum(pg_relation_size(indexrelid))
    FROM pg_stat_user_indexes WHERE relid IN {RUNS_TREE} GROUP BY 1 ORDER BY 2 DESC
"""
# A reminder whose run is not written yet (a job's run and its next fire commit together).
BURST_UNWRITTEN = """EXISTS (SELECT 1 FROM jobs WHERE id BETWEEN %(low)s AND %(high)s
                            AND active AND NOT paused AND next_run_at <= %(at)s)"""
BURST_LEFT = f"""
    SELECT {BURST_UNWRITTEN}
        OR EXISTS (SELECT 1 FROM runs WHERE status = 'queued' AND priority = 'normal'
                   AND tenant_id = %(tenant)s AND nominal_at = %(at)s)
        OR EXISTS (SELECT 1 FROM runs WHERE status = 'running' AND tenant_id = %(tenant)s
                   AND nominal_at = %(at)s)
"""
BURST_DUE = f"SELECT now(), {BURST_UNWRITTEN}"
QUEUED = """
    SELECT count(*) FROM runs WHERE status = 'queued' AND priority = 'normal'
      AND tenant_id = %(tenant)s
"""
# created_at is the writing tick's transaction start.
BURST_OUTCOMES = """
    SELECT status, count(*), min(first_claimed_at), max(finished_at), max(attempt),
           max(created_at), min(created_at)
    FROM runs WHERE job_id BETWEEN %(low)s AND %(high)s AND nominal_at = %(at)s
    GROUP BY status
"""
RUN_OUTCOMES = """
    SELECT t.name, r.status, coalesce(r.skip_reason, ''), count(*)
    FROM runs r JOIN tenants t ON t.id = r.tenant_id
    WHERE r.created_at >= %(since)s GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
"""
ALERT_LAGS = """
    SELECT extract(epoch FROM due_at)::float8,
           extract(epoch FROM coalesce(first_claimed_at, %(end)s) - due_at)::float8 * 1000
    FROM runs WHERE tenant_id = %(tenant)s AND due_at >= %(since)s AND due_at <= %(until)s
"""


# --------------------------------------------------------------------------- build

@dataclass
class Built:
    url: str
    t0: datetime = field(default_factory=lambda: datetime.now(UTC))
    bank: int = 0
    bank_token: str = ""
    alerts: int = 0
    ids: dict[str, range] = field(default_factory=dict)
    jobs: int = 0
    runs: int = 0
    attempts: int = 0
    alert_jobs: int = 0
    steps: list[tuple[str, float]] = field(default_factory=list)
    wal_bytes: int = 0
    limited: bool = True           # the reminders name the bucket (--no-limit: they do not)

    @contextlib.contextmanager
    def step(self, name: str) -> Iterator[None]:
        print(f"  {name} ...", end=" ", flush=True)
        started = time.monotonic()
        yield
        elapsed = time.monotonic() - started
        self.steps.append((name, elapsed))
        print(f"{elapsed:.1f}s", flush=True)

    @property
    def seconds(self) -> float:
        return sum(s for _, s in self.steps)


def scaled(full: int, scale: float) -> int:
    return max(1, round(full * scale))


def target(gateway: str, path: str) -> str:
    return json.dumps({"type": "http", "url": f"{gateway}/{path}", "timeout_s": 10,
                       "dedupes": True})


def history_fires(t0: datetime) -> list[tuple[datetime, Kind]]:
    """Every fire of every kind in the HISTORY_DAYS before ``t0``, in time order."""
    start = t0 - timedelta(days=HISTORY_DAYS)
    fires = []
    for kind in MIX:
        table = Timetable(kind.cron, kind.tz)
        fires += [(at, kind) for at in table.next_fires(start, 24 * HISTORY_DAYS + 1)
                  if at < t0]
    return sorted(fires, key=lambda f: (f[0], f[1].name))


def build(url: str, scale: float, gateway: str, *, limited: bool = True) -> Built:
    built = Built(url=url, limited=limited)
    with admin_connect(url) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        row = conn.execute("SELECT now()").fetchone()
        assert row is not None
        built.t0 = row[0]
        with built.step("tenants, the sms-gateway bucket"):
            bank = create_tenant(conn, "bank42")
            built.bank, built.bank_token = bank.id, bank.token
            set_limit(conn, LIMIT, RATE, BURST_TOKENS)
            grant(conn, bank.id, limits=[LIMIT])
            built.alerts = create_tenant(conn, "alerts").id
        total = sum(scaled(k.full, scale) for k in MIX)
        with built.step(f"{total:,} jobs of bank42 (INSERT ... SELECT)"):
            for kind in MIX:
                built.ids[kind.name] = _insert_kind(conn, built, kind, scale, gateway)
            built.jobs = total
        fires = history_fires(built.t0)
        with built.step("day partitions of runs, for the history and the burst"):
            partitions.make_ahead(conn, days=HISTORY_DAYS + 3,
                                  now=built.t0 - timedelta(days=HISTORY_DAYS + 1))
        loaded = [(name, definition, con, condef)
                  for name, definition, con, condef in conn.execute(LOADED_INDEXES)]
        before = conn.execute(RUNS_INDEXES).fetchall()
        for name, _, con, _ in loaded:
            conn.execute(f"ALTER TABLE runs DROP CONSTRAINT {con}" if con
                         else f"DROP INDEX {name}")
        with built.step(f"{HISTORY_DAYS} days of runs: {len(fires):,} past fires"):
            _insert_history(conn, built, fires)
        with built.step(f"{len(loaded)} indexes of runs built after the load"):
            for _, definition, con, condef in loaded:
                # (A partitioned index's definition says ON ONLY: as written it would make
                # the parent's alone, invalid, and none of the partitions'.)
                conn.execute(f"ALTER TABLE runs ADD CONSTRAINT {con} {condef}" if con
                             else definition.replace(" ON ONLY ", " ON "))
            if conn.execute(RUNS_INDEXES).fetchall() != before:
                raise RuntimeError("the indexes of runs differ from the migrated schema's")
        with built.step("VACUUM (ANALYZE), CHECKPOINT"):
            conn.execute("VACUUM (ANALYZE) runs")
            conn.execute("VACUUM (ANALYZE) jobs")
            conn.execute("VACUUM (ANALYZE) run_attempts")
            conn.execute("CHECKPOINT")
    return built


def _insert_kind(conn: psycopg.Connection[Any], built: Built, kind: Kind, scale: float,
                 gateway: str) -> range:
    (first,) = Timetable(kind.cron, kind.tz).next_fires(built.t0, 1)
    created = built.t0 - timedelta(days=HISTORY_DAYS + 1)
    ids = [r[0] for r in conn.execute(INSERT_JOBS, {
        "tenant": built.bank, "kind": kind.name, "cron": kind.cron, "tz": kind.tz,
        "priority": kind.priority, "first": first, "target": target(gateway, "sms"),
        "limit": LIMIT if kind is BURST and built.limited else None, "created": created,
        "count": scaled(kind.full, scale)})]
    if ids != list(range(ids[0], ids[-1] + 1)):
        raise RuntimeError(f"{kind.name}: job ids are not consecutive")
    return range(ids[0], ids[-1] + 1)


def _insert_history(conn: psycopg.Connection[Any], built: Built,
                    fires: list[tuple[datetime, Kind]]) -> None:
    for at, kind in fires:
        ids = built.ids[kind.name]
        cur = conn.execute(INSERT_HISTORY, {
            "at": at, "epoch": int(at.timestamp()), "day": at.toordinal(),
            "low": ids.start, "high": ids.stop - 1, "paced": kind is BURST, "rate": RATE})
        built.attempts += max(0, cur.rowcount)
        built.runs += len(ids)


def create_alerts(conn: psycopg.Connection[Any], tenant: int, count: int, gateway: str) -> None:
    """The second tenant's every-minute urgent jobs, due at every second of it. Created as
    of a minute ago, so that they fire every second from the processes' start (their first
    fires are written late, at the start, and are not measured)."""
    url = json.loads(target(gateway, "alerts"))
    # Urgent runs are never spread: each job's minute is anchored at its own second.
    specs = [JobSpec.from_document({"key": f"alert-{i}", "every": "60s", "tz": "UTC",
                                    "anchor": f"2026-01-01T00:00:{i % 60:02d}Z",
                                    "priority": "urgent", "target": url,
                                    "payload": {"alert": i}})
             for i in range(count)]
    row = conn.execute("SELECT now() - interval '1 minute'").fetchone()
    assert row is not None
    create_jobs(conn, tenant, specs, now=row[0])


def retime_burst(conn: psycopg.Connection[Any], built: Built) -> datetime:
    """The reminders' 09:00 moved to the first whole minute LEAD_SECONDS away: their cron
    names its local wall time, their next fire is it."""
    row = conn.execute("SELECT now()").fetchone()
    assert row is not None
    now: datetime = row[0]
    at = (now + timedelta(seconds=LEAD_SECONDS + 59)).replace(second=0, microsecond=0)
    local = at.astimezone(ZoneInfo(BURST.tz))
    ids = built.ids[BURST.name]
    with conn.transaction():
        # Staging, not a user's edit: no audit row for each of the reminders.
        conn.execute("SET LOCAL session_replication_role = replica")
        conn.execute(RETIME, {"cron": f"{local.minute} {local.hour} * * *", "at": at,
                              "low": ids.start, "high": ids.stop - 1})
    return at.astimezone(UTC)


# --------------------------------------------------------------------------- probes

@dataclass
class Probe:
    """A call repeated on a thread, ``pause`` s between calls: (wall time, ms, ok) each."""

    name: str
    pause: float
    samples: list[tuple[float, float, bool]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self, call: Any) -> None:
        self._thread = threading.Thread(target=self._loop, args=(call,), daemon=True)
        self._thread.start()

    def _loop(self, call: Any) -> None:
        while not self._stop.wait(self.pause):
            started = time.perf_counter()
            at = time.time()
            try:
                ok = bool(call())
            except Exception as exc:   # a failed probe is a figure, not the end
                self.errors[type(exc).__name__] += 1
                ok = False
            self.samples.append((at, (time.perf_counter() - started) * 1000, ok))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


class _Rollback(Exception):
    """Raised inside the probe's transaction: the claim it timed is undone."""


def claim_probe(url: str) -> tuple[Probe, psycopg.Connection[Any]]:
    conn = connect(url, application_name="fullday-claim-probe", tenants=ALL_TENANTS)
    conn.execute("SET TimeZone = 'UTC'")
    probe = Probe("claim", PROBE_SECONDS)

    def claim() -> bool:
        with contextlib.suppress(_Rollback), conn.transaction():
            claim_runs(conn, owner="fullday-probe", shares={"normal": 20}, lend=False)
            raise _Rollback
        return True

    probe.start(claim)
    return probe, conn


def api_probe(base: str, token: str) -> tuple[Probe, httpx.Client]:
    client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"},
                          timeout=30)
    probe = Probe("api", API_PROBE_SECONDS)
    probe.start(lambda: client.get("/v1/runs", params={"limit": 100}).status_code == 200)
    return probe, client


# --------------------------------------------------------------------------- processes


def start_gateway(record: str, share_503: float, delay: str) -> tuple[Children, str]:
    gateway = Children()
    port = free_port()
    gateway.start([sys.executable, str(Path(__file__).with_name("gateway.py")), "--port",
                   str(port), "--dedupe", "--share-503", str(share_503), "--delay", delay,
                   "--quiet", "--record", record], "gateway")
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: _answers(base), 30, "the gateway", gateway)
    return gateway, base


def _answers(base: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        httpx.get(base, timeout=2)
        return True
    return False


def wait_for(ready: Any, seconds: float, what: str, children: Children) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        children.check_alive()
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {seconds:.0f}s:\n{children.log_tail()}")
        time.sleep(0.1)


def crondepot(*args: str) -> list[str]:
    return [sys.executable, "-m", "crondepot", *args]


# The maintenance leader neither prunes nor verifies: the run does both itself, timed.
QUIET = ("--retention-days", "0", "--verify-every", "0")


def start_schedulers(url: str) -> Children:
    services = Children()
    for i in range(SCHEDULERS):
        services.start(crondepot("scheduler", "--db", url, "--name", f"s{i + 1}", *QUIET),
                       "scheduler")
    return services


def start_services(url: str, concurrency: int, urgent_only: int) -> tuple[Children, str]:
    services = start_schedulers(url)
    for i in range(WORKERS):
        services.start(crondepot("worker", "--db", url, "--name", f"w{i + 1}", "--concurrency",
                                 str(concurrency), "--urgent-only", str(urgent_only), *QUIET),
                       "worker")
    port = free_port()
    services.start(crondepot("api", "--db", url, "--port", str(port)), "api")
    base = f"http://127.0.0.1:{port}"
    services.sample_rss()

    def ready() -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        return False

    wait_for(ready, 60, "the API", services)
    return services, base


@dataclass
class Timed:
    """A command or statement run on a thread during the burst: when, how long, what."""

    what: str
    started: float = 0.0
    ended: float = 0.0
    output: str = ""
    _thread: threading.Thread | None = None

    @property
    def seconds(self) -> float:
        return self.ended - self.started if self.ended else float("nan")

    def start(self, call: Any) -> None:
        def run() -> None:
            self.started = time.time()
            try:
                self.output = str(call())
            except Exception as exc:
                self.output = f"failed: {exc}"
            self.ended = time.time()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()


def run_command(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{argv[3]} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout.strip()


def vacuum_runs(url: str) -> str:
    with admin_connect(url) as conn:
        conn.execute("VACUUM runs")
    return "done"


# --------------------------------------------------------------------------- the run

@dataclass
class Run:
    burst_at: datetime
    started: float = 0.0               # wall time the processes were started
    drained: float = 0.0               # wall time the last reminder ended
    prune: Timed = field(default_factory=lambda: Timed("prune"))
    vacuum: Timed = field(default_factory=lambda: Timed("vacuum"))
    verify: Timed = field(default_factory=lambda: Timed("verify"))
    claim: Probe | None = None
    api: Probe | None = None
    wal_bytes: int = 0
    postgres_cpu: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)
    rss: dict[str, int] = field(default_factory=dict)
    stats_before: dict[str, tuple[int, ...]] = field(default_factory=dict)
    load: list[str] = field(default_factory=list)
    vacuum_wanted: bool = True


def table_stats(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, ...]]:
    conn.execute("SELECT pg_stat_clear_snapshot()")
    return {r[0]: tuple(int(v) for v in r[1:]) for r in conn.execute(TABLE_STATS)}


def run_burst(built: Built, args: argparse.Namespace, gateway: str) -> Run:
    url = built.url
    burst = len(built.ids[BURST.name])
    with admin_connect(url) as conn:
        create_alerts(conn, built.alerts, built.alert_jobs, gateway)
        conn.execute("VACUUM (ANALYZE) jobs")
        run = Run(burst_at=retime_burst(conn, built), vacuum_wanted=not args.no_vacuum)
        run.stats_before = table_stats(conn)
        lsn, cpu_before = wal_lsn(conn), server_cpu(conn)
    print(f"  the burst: {burst:,} reminders due at {run.burst_at:%H:%M:%S} UTC "
          f"(cron '{run.burst_at.astimezone(ZoneInfo(BURST.tz)):%M %H} * * *' {BURST.tz})",
          flush=True)
    run.load.append(load_line())
    run.started = time.time()
    services, api_base = start_services(url, args.concurrency, args.urgent_only)
    probes: list[Any] = []
    try:
        run.claim, claim_conn = claim_probe(url)
        run.api, client = api_probe(api_base, built.bank_token)
        probes = [claim_conn, client]
        watch(run, built, services, burst)
        since = datetime.fromtimestamp(run.drained, UTC) - timedelta(hours=1)
        until = datetime.fromtimestamp(run.drained, UTC)
        run.verify.start(lambda: run_command(crondepot(
            "verify", "--db", url, "--json", "--since", since.isoformat(),
            "--until", until.isoformat())))
        while not run.verify.done:
            services.check_alive()
            time.sleep(0.5)
        with admin_connect(url) as conn:
            run.wal_bytes = wal_since(conn, lsn)
            run.postgres_cpu = cpu_since(conn, cpu_before)
        run.cpu = {role: services.cpu_seconds(role) for role in ("scheduler", "worker", "api")}
        run.rss = {role: services.peak(role) for role in ("scheduler", "worker", "api")}
        run.load.append(load_line())
    finally:
        for probe in (run.claim, run.api):
            if probe is not None:
                probe.stop()
        for closable in probes:
            with contextlib.suppress(Exception):
                closable.close()
        services.stop()
    return run


def write_burst(built: Built) -> None:
    """--write-only: the schedulers alone turn the 9:00 reminders into runs, over the
    history built; no worker, API or prune beside them. Timed on the database clock from
    the minute they fall due to the first poll (every 20 ms, an index probe) that finds none
    still due: a job's run and its next fire commit together, so then every run is in."""
    ids = built.ids[BURST.name]
    params = {"low": ids.start, "high": ids.stop - 1}
    with admin_connect(built.url) as conn:
        params["at"] = at = retime_burst(conn, built)
        conn.execute("VACUUM (ANALYZE) jobs")
    print(f"  the burst: {len(ids):,} reminders due at {at:%H:%M:%S} UTC; "
          f"{SCHEDULERS} schedulers, nothing else; {load_line()}", flush=True)
    services = start_schedulers(built.url)
    services.sample_rss()

    def poll(conn: psycopg.Connection[Any]) -> tuple[datetime, bool]:
        services.check_alive()
        row = conn.execute(BURST_DUE, params).fetchone()
        assert row is not None
        if row[0] > at + timedelta(minutes=10):
            raise TimeoutError("the burst was not written within 10 minutes")
        return row[0], row[1]

    try:
        with admin_connect(built.url) as conn:
            clock, due = poll(conn)
            while clock < at:                       # the processes start before the minute
                time.sleep(0.02)
                clock, due = poll(conn)
            # CPU and WAL from the minute the burst falls due, not from the processes' start
            lsn, cpu_before = wal_lsn(conn), server_cpu(conn)
            cpu_started = services.cpu_seconds("scheduler")
            while due:
                time.sleep(0.02)
                clock, due = poll(conn)
            outcomes = conn.execute(BURST_OUTCOMES, params).fetchall()
            wal, pg_cpu = wal_since(conn, lsn), cpu_since(conn, cpu_before)
        cpu = services.cpu_seconds("scheduler") - cpu_started
        rss = services.peak("scheduler")
    finally:
        services.stop()
    count = sum(row[1] for row in outcomes)
    first = min((row[6] for row in outcomes), default=None)
    last = max((row[5] for row in outcomes), default=None)
    seconds = (clock - at).total_seconds()
    print(f"\nWritten: {count:,} of {len(ids):,} runs over {built.runs:,} runs of history")
    print(f"  due -> none still due: {seconds:.1f} s ({count / max(seconds, 0.001):,.0f} runs/s;"
          f" goal <= 15 s: {verdict(seconds <= 15)})")
    if first is not None and last is not None:
        print(f"  first tick began {(first - at).total_seconds():.2f} s after due, the last "
              f"{(last - at).total_seconds():.1f} s after")
    print(f"  from due: CPU schedulers {cpu:.1f} s (peak RSS {rss / MB:.0f} MB), PostgreSQL "
          f"{pg_cpu:.1f} s; WAL {wal / MB:,.0f} MB ({wal / max(count, 1):,.0f} B a run); "
          f"{load_line()}")


def watch(run: Run, built: Built, services: Children, burst: int) -> None:
    """Until every reminder has ended: the prune a few seconds into the burst, then the
    VACUUM, with progress every 10 s."""
    expected = burst / RATE
    prune_at = run.burst_at.timestamp() + max(3.0, min(30.0, expected / 10))
    bound = run.burst_at.timestamp() + 3 * expected + 300
    params = {"low": built.ids[BURST.name].start, "high": built.ids[BURST.name].stop - 1,
              "at": run.burst_at, "tenant": built.bank}
    next_report = time.time() + 10
    with admin_connect(built.url) as conn:
        while True:
            now = time.time()
            services.check_alive()
            if now > bound:
                raise TimeoutError(f"the burst did not drain by {bound - run.started:.0f}s")
            if not run.prune.started and now >= prune_at:
                run.prune.start(lambda: run_command(crondepot(
                    "prune", "--db", built.url, "--json",
                    "--retention-days", str(RETENTION_DAYS))))
            if run.prune.done and not run.vacuum.started and run.vacuum_wanted:
                run.vacuum.start(lambda: vacuum_runs(built.url))
            if now > run.burst_at.timestamp() and not run.drained:
                row = conn.execute(BURST_LEFT, params).fetchone()
                if row is not None and not row[0]:
                    run.drained = time.time()
            if run.drained and run.prune.done and (run.vacuum.done or not run.vacuum_wanted):
                return
            if now >= next_report:
                row = conn.execute(QUEUED, params).fetchone()
                print(f"    {now - run.started:5.0f}s: {row[0] if row else '?':,} reminders "
                      f"queued; prune {_state(run.prune)}, vacuum {_state(run.vacuum)}",
                      flush=True)
                next_report = now + 10
            time.sleep(0.5)


def _state(timed: Timed) -> str:
    if not timed.started:
        return "not started"
    return f"{timed.seconds:.0f}s" if timed.done else f"running {time.time() - timed.started:.0f}s"


# --------------------------------------------------------------------------- figures

def phases(run: Run) -> list[tuple[str, float, float]]:
    """(name, from, to) in wall time; the burst less the prune and the VACUUM is its own."""
    burst = run.burst_at.timestamp()
    out = [("before the burst", run.started + 10, burst),
           ("during the burst", burst, run.drained)]
    for timed in (run.prune, run.vacuum):
        if timed.started:
            out.append((f"during the {timed.what}", timed.started, timed.ended or run.drained))
    return out


def in_phase(samples: list[tuple[float, float]], low: float, high: float,
             without: Sequence[tuple[float, float]] = ()) -> list[float]:
    return [v for t, v in samples
            if low <= t < high and not any(a <= t < b for a, b in without)]


def summary(values: list[float]) -> str:
    if not values:
        return "no samples"
    return (f"p50 {pct(values, 0.5):7.1f}  p99 {pct(values, 0.99):7.1f}  "
            f"max {max(values):7.1f} ms  (n={len(values)})")


def print_phases(title: str, samples: list[tuple[float, float]], run: Run) -> dict[str, float]:
    print(f"\n{title}")
    p99: dict[str, float] = {}
    spans = phases(run)
    busy = [(a, b) for name, a, b in spans[2:]]
    rows = [*spans, ("burst, neither prune nor VACUUM", spans[1][1], spans[1][2])]
    for i, (name, low, high) in enumerate(rows):
        values = in_phase(samples, low, high, busy if i == len(rows) - 1 else [])
        print(f"  {name:<32} {summary(values)}")
        if values:
            p99[name] = pct(values, 0.99)
    return p99


@dataclass
class Drain:
    attempts: int = 0
    runs: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    first: float = 0.0
    last_first_call: float = 0.0
    sustained: float = 0.0
    per_second: list[int] = field(default_factory=list)
    repeats_dropped: int = 0


def read_gateway(record: str, ids: range) -> Drain:
    """The reminders' requests as the gateway saw them."""
    drain = Drain()
    arrivals: list[float] = []
    first_call: dict[str, float] = {}
    accepted: Counter[str] = Counter()
    with open(record, encoding="utf-8") as lines:
        for line in lines:
            arrived_text, status_text, key = line.split(" ", 2)
            key = key.strip()
            job = int(key.split(":", 1)[0]) if ":" in key else 0
            if job not in ids:
                continue
            arrived, status = float(arrived_text), int(status_text)
            arrivals.append(arrived)
            drain.statuses[status] += 1
            first_call.setdefault(key, arrived)
            if status == 200:
                accepted[key] += 1
    if not arrivals:
        return drain
    arrivals.sort()
    drain.attempts, drain.runs = len(arrivals), len(first_call)
    drain.repeats_dropped = sum(n - 1 for n in accepted.values() if n > 1)
    drain.first = arrivals[0]
    drain.last_first_call = max(first_call.values())
    low, high = drain.first + 5, drain.last_first_call
    if high - low >= 1:
        inside = [a for a in arrivals if low <= a <= high]
        drain.sustained = len(inside) / (high - low)
        counts = Counter(int(a - low) for a in inside)
        drain.per_second = [counts.get(s, 0) for s in range(int(high - low))]
    return drain


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(built: Built, run: Run, drain: Drain, scale: float) -> None:
    url, ids = built.url, built.ids[BURST.name]
    with admin_connect(url) as conn:
        outcomes = conn.execute(BURST_OUTCOMES, {"low": ids.start, "high": ids.stop - 1,
                                                 "at": run.burst_at}).fetchall()
        all_outcomes = conn.execute(RUN_OUTCOMES, {
            "since": datetime.fromtimestamp(run.started, UTC)}).fetchall()
        lags = [(t, ms) for t, ms in conn.execute(ALERT_LAGS, {
            "tenant": built.alerts, "since": datetime.fromtimestamp(run.started, UTC),
            "until": datetime.fromtimestamp(run.drained, UTC),
            "end": datetime.fromtimestamp(run.drained + 5, UTC)})]
        stats_after = table_stats(conn)
        sizes = conn.execute(SIZES).fetchall()
        index_sizes = conn.execute(INDEX_SIZES).fetchall()
        autovacuum = conn.execute("SHOW autovacuum").fetchone()
        plans = explain_reads(conn, built)
    by_status = {status: (n, first, last, attempts)
                 for status, n, first, last, attempts, _, _ in outcomes}
    last_written = max((row[5] for row in outcomes), default=None)
    ended = max((last for _, _, last, _ in by_status.values() if last), default=None)
    skipped = by_status.get("skipped", (0,))[0]
    print(f"\nThe burst: {len(ids):,} reminders due at {run.burst_at:%H:%M:%S} UTC, "
          + (f"bucket {LIMIT} {RATE:.0f}/s (burst {BURST_TOKENS})" if built.limited
             else "NO bucket (--no-limit)"))
    for status, (n, _, _, attempts) in sorted(by_status.items()):
        print(f"  {status:<10} {n:>9,}  (most attempts {attempts})")
    if last_written is not None:
        written = (last_written - run.burst_at).total_seconds()
        print(f"  written by the schedulers: the last tick began {written:.1f} s after due "
              f"({len(ids) / max(written, 0.001):,.0f} runs/s, over {built.runs:,} runs of "
              "history)")
    if ended is not None:
        span = (ended - run.burst_at).total_seconds()
        print(f"  due -> last ended: {span:.1f} s ({len(ids) / span:.1f} reminders/s; "
              f"{len(ids) / RATE:.1f} s at exactly {RATE:.0f}/s)")
    print(f"  at the gateway: {drain.attempts:,} attempts for {drain.runs:,} reminders, "
          f"answers {dict(sorted(drain.statuses.items()))}, repeats dropped by its "
          f"dedupe {drain.repeats_dropped}")
    rate_ok = drain.sustained >= 0.97 * RATE
    if drain.per_second:
        ordered = sorted(drain.per_second)
        print(f"  sustained (5th s of the burst -> the last reminder's first call, "
              f"{len(drain.per_second)} s): {drain.sustained:.1f} attempts/s = "
              f"{drain.sustained / RATE:.1%} of {RATE:.0f}/s; per second min {ordered[0]}, "
              f"p10 {ordered[len(ordered) // 10]}, median {statistics.median(ordered):.0f}, "
              f"max {ordered[-1]}")
    print(f"  GOAL drain >= 97 % of {RATE:.0f}/s sustained: {verdict(rate_ok)}")
    print(f"  GOAL 0 reminders skipped: {skipped} -> {verdict(skipped == 0)}")
    print("\nEvery run written during the run, by tenant and state:")
    for tenant, status, reason, n in all_outcomes:
        print(f"  {tenant:<8} {status:<10} {reason:<18} {n:>9,}")
    lag = print_phases(f"alerts' start lag ({built.alert_jobs} urgent jobs every minute, "
                       "first_claimed_at - due_at):", lags, run)
    during = lag.get("during the burst", float("inf"))
    print(f"  GOAL p99 <= 1 s during the burst: {during:.0f} ms -> {verdict(during <= 1000)}")
    for probe, title in ((run.claim, "claim of 20 normal runs (client-timed, rolled back; "
                                     "pg_stat_statements is not loaded on this server):"),
                         (run.api, "GET /v1/runs?limit=100 for bank42 (httpx):")):
        if probe is not None:
            print_phases(title, [(t, ms) for t, ms, _ in probe.samples], run)
            failed = sum(1 for *_, ok in probe.samples if not ok)
            print(f"  failed calls: {failed} {dict(probe.errors) if probe.errors else ''}")
    print_maintenance(run, stats_after, autovacuum[0] if autovacuum else "?")
    print("\nSizes after the run:")
    for name, heap, indexes, total in sizes:
        print(f"  {name:<13} {total / MB:>9,.0f} MB  (heap {heap / MB:,.0f}, "
              f"indexes {indexes / MB:,.0f})")
    print("  runs' indexes: " + ", ".join(f"{n} {b / MB:,.0f} MB" for n, b in index_sizes))
    print(f"\nWAL (the whole server's: other databases on it write too): build "
          f"{built.wal_bytes / MB:,.0f} MB; run {run.wal_bytes / MB:,.0f} MB")
    total = (run.drained - run.started) or 1.0
    print(f"CPU over the run ({total:.0f} s to the drain, verify after): PostgreSQL (every "
          f"backend of the server) "
          f"{run.postgres_cpu:.0f} s, " + ", ".join(f"{r} {s:.0f} s" for r, s in run.cpu.items())
          + "; peak RSS " + ", ".join(f"{r} {b / MB:.0f} MB" for r, b in run.rss.items()))
    print("load: " + " -> ".join(run.load))
    print_verify(run)
    for title, plan in plans:
        print(f"\n{title}")
        for line in plan:
            print(f"    {line}")
    print(f"\nscale {scale}: {built.jobs:,} + {built.alert_jobs} jobs, {built.runs:,} runs of "
          f"history, build {built.seconds:.0f} s")


def explain_reads(conn: psycopg.Connection[Any],
                  built: Built) -> list[tuple[str, list[str]]]:
    """The plans behind two figures, on the table as the run left it: the API's list of a
    tenant's runs, and one pass of the pruner (a day later than the one it pruned, rolled
    back)."""
    listed = {"tenant_id": built.bank, "status": None, "statuses": listed_statuses(None),
              "job_id": None, "error": None,
              "since": None, "until": None, "limit": 101, "before_at": None,
              "before_run_id": None}
    pruned = {"cutoff": prune_cutoff(conn, timedelta(days=RETENTION_DAYS - 1)),
              "limit": PRUNE_BATCH}
    plans = []
    for title, query, params in (
            ("EXPLAIN ANALYZE of GET /v1/runs?limit=100 (Q.list_runs), bank42:", Q.list_runs,
             listed),
            (f"EXPLAIN ANALYZE of one prune pass (Q.prune_finished_runs, keep "
             f"{RETENTION_DAYS - 1} days, rolled back):", Q.prune_finished_runs, pruned)):
        with contextlib.suppress(_Rollback), conn.transaction():
            rows = conn.execute(b"EXPLAIN (ANALYZE, BUFFERS) " + query.encode(), params)
            plans.append((title, [r[0] for r in rows]))
            raise _Rollback
    return plans


def print_maintenance(run: Run, after: dict[str, tuple[int, ...]], autovacuum: str) -> None:
    print(f"\nThe prune (crondepot prune --retention-days {RETENTION_DAYS}, during the burst): "
          f"{run.prune.seconds:.1f} s, {run.prune.output}")
    if run.vacuum.started:
        print(f"VACUUM runs after it (this server: autovacuum={autovacuum}, its configuration "
              f"file; this pass stands in for autovacuum's): {run.vacuum.seconds:.1f} s")
    print("pg_stat_user_tables, during the run (dead rows at the end):")
    names = ("live", "dead", "vacuum", "autovacuum", "analyze", "autoanalyze", "updates")
    for table, values in sorted(after.items()):
        before = run.stats_before.get(table, (0,) * len(values))
        passes = [f"{n} +{a - b}" for n, a, b in zip(names[2:], values[2:], before[2:],
                                                       strict=True)]
        print(f"  {table:<13} live {values[0]:>11,} dead {values[1]:>9,}  " + ", ".join(passes))


def print_verify(run: Run) -> None:
    try:
        found = json.loads(run.verify.output)
    except ValueError:
        print(f"\ncrondepot verify: {run.verify.output[:500]}")
        return
    print(f"\ncrondepot verify over the hour before the drain's end: {run.verify.seconds:.1f} s "
          f"wall (its own figure {found.get('seconds')} s); fires {found.get('fires'):,}, "
          f"pending {found.get('pending')}, unaccounted {found.get('unaccounted_count')}, "
          f"duplicated {found.get('duplicated_count')}, clean {found.get('clean')}")
    print(f"  GOAL verify <= 60 s: {verdict(run.verify.seconds <= 60)}")


# --------------------------------------------------------------------------- main

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--db", default=DEFAULT_ADMIN_URL,
                        help=f"admin URL that may CREATE DATABASE (default {DEFAULT_ADMIN_URL})")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="jobs, history and burst × this; the rate stays 450/s (1)")
    parser.add_argument("--concurrency", type=int, default=480,
                        help="slots per worker: 2 workers have about 450/s × 0.9 s = 405 "
                             "calls in flight, and the spare slots keep runs in hand "
                             "through a slow claim (docs/worker.md, 'Slots for a "
                             "rate-limited burst') (480)")
    parser.add_argument("--urgent-only", type=int, default=None,
                        help="urgent-only slots per worker (default: sized for alerts' runs)")
    parser.add_argument("--share-503", type=float, default=0.01,
                        help="share of gateway answers that are 503 (0.01)")
    parser.add_argument("--delay", default="0.3-1.5", help="gateway answer delay, s (0.3-1.5)")
    parser.add_argument("--no-vacuum", action="store_true",
                        help="no VACUUM of runs after the prune")
    parser.add_argument("--no-limit", action="store_true",
                        help="the reminders name no bucket: what the rest of the pipeline "
                             "drains without the rate limiter (a diagnosis, not the day)")
    parser.add_argument("--write-only", action="store_true",
                        help="after the build, only the schedulers writing the burst's runs "
                             "over the history, timed (goal 15 s): no workers, API or prune")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error(f"--scale: expected a number in (0, 1], got {args.scale}")
    alerts = max(60, round(600 * args.scale))
    if args.urgent_only is None:
        # Each second about alerts/60 runs fall due and hold a slot up to 1.5 s: room for
        # four seconds' worth, split over the workers.
        args.urgent_only = max(4, math.ceil(alerts / 60 * 4 / WORKERS))
    args.alerts = alerts
    return args


def run(args: argparse.Namespace) -> None:
    compile_crondepot()
    os.environ[ALLOWLIST_ENV] = "127.0.0.1/32"      # the gateway is on loopback
    os.environ["CRONDEPOT_API_POOL_SIZE"] = "4"
    for line in server_lines(args.db, ["fsync", "synchronous_commit", "shared_buffers",
                                       "max_wal_size", "wal_compression", "autovacuum",
                                       "max_connections"]):
        print(line)
    print(f"cores: {os.cpu_count()}, python {sys.version.split()[0]}; {load_line()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="crondepot-fullday-") as folder:
        record = str(Path(folder) / "gateway.txt")
        gateway, base = start_gateway(record, args.share_503, args.delay)
        try:
            with fresh_database(args.db, DB_NAME) as url:
                with admin_connect(url) as conn:
                    lsn = wal_lsn(conn)
                print(f"Build (scale {args.scale}):", flush=True)
                built = build(url, args.scale, base, limited=not args.no_limit)
                built.alert_jobs = args.alerts
                with admin_connect(url) as conn:
                    built.wal_bytes = wal_since(conn, lsn)
                print(f"  build: {built.seconds:.0f} s, {built.jobs:,} jobs, {built.runs:,} runs,"
                      f" {built.attempts:,} earlier attempts, WAL {built.wal_bytes / MB:,.0f} MB")
                if args.write_only:
                    print("\nWrite only:", flush=True)
                    write_burst(built)
                    return
                print(f"\nRun: {SCHEDULERS} schedulers, {WORKERS} workers × {args.concurrency} "
                      f"slots ({args.urgent_only} urgent-only each), {args.alerts} alerts jobs",
                      flush=True)
                result = run_burst(built, args, base)
                result.cpu["gateway"] = gateway.cpu_seconds("gateway")
                gateway.stop()
                report(built, result, read_gateway(record, built.ids[BURST.name]), args.scale)
        finally:
            gateway.stop()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    return run_interruptibly(lambda: run(args), load_line)


if __name__ == "__main__":
    sys.exit(main())
