"""schemathesis against a real ``crondepot api``: a seeded database, the API process, the run.

Shared by tests/api/test_schemathesis.py (a bounded run, fixed seed) and
bench/schemathesis_run.py (a long one). The database holds what the operations read: jobs
(active, paused, cancelled; http and python targets), runs in every state a job's history
shows, dead letters, an own rate limit and a granted one, an admin and a read token.

The seeded tokens get ids far from 1 (the sequence is moved first), and the hooks send a
``DELETE /v1/tokens/{token_id}`` aimed at one of them to id 1 instead: the admin's run issues
tokens, and revoking the run's own token (once another admin exists) would leave the rest of
the run answering 401.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

from crondepot.db import connect
from crondepot.job import JobSpec, create_jobs
from crondepot.job.store import cancel_job, pause_job, trigger_job
from crondepot.limits.buckets import put_own_limit, set_limit
from crondepot.tenancy.grants import grant
from crondepot.tenancy.tenants import create_tenant
from crondepot.tenancy.tokens import create_token
from crondepot_testkit.schemathesis_hooks import KEEP_ENV

TOKEN_IDS_FROM = 4_000_000_000_000
HANDLERS = ("sms.send", "reports.nightly", "crondepot.log")
SCHEMATHESIS = str(Path(sys.executable).with_name("schemathesis"))
CONFIG = Path(__file__).with_name("schemathesis.toml")
SRC = Path(__file__).resolve().parents[1]   # the folder holding crondepot_testkit


@dataclass(frozen=True, slots=True)
class Seeded:
    admin: str
    read: str
    token_ids: tuple[int, ...]
    job_ids: tuple[int, ...]
    dead_run_ids: tuple[str, ...]


def _jobs() -> list[dict[str, Any]]:
    http = {"type": "http", "url": "https://hooks.example.com/emi", "timeout_s": 10,
            "dedupes": True}
    return [
        {"key": "bank42:48213:emi", "cron": "0 9 5 * *", "tz": "Asia/Kolkata",
         "target": http, "payload": {"loan": 48213},
         "misfire": {"policy": "skip_after_local_time", "until": "20:00"},
         "spread": {"seconds": 1800, "key": "48213"}, "rate_limit": "sms-gateway"},
        {"key": "ops:nightly-report", "cron": "30 2 * * *", "tz": "Europe/Berlin",
         "priority": "bulk", "target": {"type": "python", "handler": "reports.nightly"}},
        {"key": "ops:urgent", "cron": "*/5 * * * *", "tz": "UTC", "priority": "urgent",
         "target": {"type": "python", "handler": "sms.send"}, "rate_limit": "own-limit",
         "misfire": {"policy": "skip_after", "seconds": 600}},
        {"key": "ops:paused", "cron": "H H * * *", "tz": "America/New_York",
         "target": {"type": "python", "handler": "crondepot.log"}},
        {"key": "ops:cancelled", "cron": "@daily", "tz": "UTC",
         "target": {"type": "python", "handler": "crondepot.log"}},
        {"cron": "0 0 1 1 *", "tz": "UTC", "catchup": "latest",
         "target": {"type": "python", "handler": "crondepot.log"}},
    ]


def seed(url: str, tenant: str = "bank42") -> Seeded:
    """Fill the migrated database at ``url``; the tenant's tokens and what was made."""
    with connect(url) as conn:
        conn.execute("SELECT setval(pg_get_serial_sequence('api_tokens', 'id'), %s)",
                     (TOKEN_IDS_FROM,))
        made = create_tenant(conn, tenant)
        set_limit(conn, "sms-gateway", 450, 50)
        grant(conn, made.id, handlers=HANDLERS, limits=["sms-gateway"])
        put_own_limit(conn, made.id, "own-limit", 10, 10)
        read = create_token(conn, made.id, role="read", label="schemathesis read").token
        jobs = create_jobs(conn, made.id, [JobSpec.from_document(d) for d in _jobs()])
        ids = tuple(job.id for job in jobs)
        for job_id in ids:
            trigger_job(conn, made.id, job_id)
        pause_job(conn, made.id, ids[3])
        cancel_job(conn, made.id, ids[4])
        dead = _runs_of_every_status(conn, made.id, ids[0])
        tokens = tuple(row[0] for row in conn.execute(
            "SELECT id FROM api_tokens WHERE tenant_id = %s ORDER BY id", (made.id,)))
    return Seeded(admin=made.token, read=read, token_ids=tokens, job_ids=ids,
                  dead_run_ids=dead)


def _runs_of_every_status(conn: psycopg.Connection[Any], tenant_id: int,
                          job_id: int) -> tuple[str, ...]:
    """A history for ``job_id``: 30 past runs, succeeded, failed, skipped and dead."""
    rows = conn.execute(
        "INSERT INTO runs (run_id, job_id, tenant_id, priority, nominal_at, due_at,"
        " available_at, status, attempt, first_claimed_at, started_at, finished_at,"
        " error_class, last_error, skip_reason)"
        " SELECT %(job)s || ':seed' || g, %(job)s, %(tenant)s, 'normal', t, t, t, s,"
        "  CASE WHEN s IN ('dead', 'failed') THEN 6 ELSE 1 END,"
        "  t + interval '1 second', t + interval '1 second',"
        "  CASE WHEN s <> 'queued' THEN t + interval '2 seconds' END,"
        "  CASE WHEN s IN ('dead', 'failed') THEN 'TimeoutError' END,"
        "  CASE WHEN s IN ('dead', 'failed') THEN 'read timed out' END,"
        "  CASE WHEN s = 'skipped' THEN 'misfire_deadline' END"
        " FROM generate_series(1, 30) g,"
        " LATERAL (SELECT now() - make_interval(days => g) AS t,"
        "  (ARRAY['succeeded', 'dead', 'skipped', 'dead', 'succeeded'])[1 + g %% 5] AS s) x"
        " RETURNING run_id, status",
        {"job": job_id, "tenant": tenant_id}).fetchall()
    return tuple(run_id for run_id, status in rows if status == "dead")


@contextlib.contextmanager
def api_process(url: str, port: int, *, log: Path, extra: Sequence[str] = ()) -> Iterator[str]:
    """``crondepot api`` on ``port`` (a request budget no run spends, and failed logins it
    never reaches: the ignored_auth check sends bad tokens by the hundred), with ``extra``
    options (``--pooled-db URL``); its base URL."""
    env = {**os.environ, "CRONDEPOT_API_RATE": "100000", "CRONDEPOT_API_BURST": "100000",
           "CRONDEPOT_API_AUTH_FAILURES": "1000000", "PYTHONPATH": _pythonpath()}
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "crondepot", "api", "--db", url, "--port", str(port),
             *extra],
            stdout=out, stderr=subprocess.STDOUT, env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_for(base, process, log)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for(base: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"crondepot api did not start:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)


@dataclass
class Outcome:
    """What one schemathesis run found."""

    command: list[str]
    exit_code: int
    output: str
    failures: list[dict[str, Any]] = field(default_factory=list)
    checks: set[str] = field(default_factory=set)

    def summary(self) -> list[str]:
        """One line per distinct failure: operation, check (title) and status."""
        return sorted({f"{f['operation']}: {f['check']} ({f['title']})"
                       for f in self.failures})


def run(base: str, token: str, *, seed: int, keep: Sequence[int] = (),
        extra: Sequence[str] = (), workdir: Path | None = None) -> Outcome:
    """``schemathesis run <base>/openapi.json`` (every check; schemathesis.toml beside this file)
    as ``token``, its own ``keep`` token ids spared (schemathesis_hooks.before_call)."""
    folder = Path(workdir or tempfile.mkdtemp(prefix="schemathesis-"))
    report = folder / "report.ndjson"
    # Every check is on by default (and the report lists each); "--checks all" would also
    # override the per-operation settings of schemathesis.toml.
    command = [SCHEMATHESIS, "--config-file", str(CONFIG), "run", f"{base}/openapi.json",
               "--header", f"Authorization: Bearer {token}", "--seed", str(seed),
               "--report", "ndjson", "--report-ndjson-path", str(report),
               "--generation-database", "none", "--no-color", *extra]
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder,
                          env={**os.environ, "SCHEMATHESIS_TELEMETRY": "false",
                               "PYTHONPATH": _pythonpath(), KEEP_ENV: ",".join(map(str, keep))})
    shown = [part.replace(token, "<token>") for part in command]
    output = (done.stdout + done.stderr).replace(token, "<token>")
    (folder / "output.txt").write_text(output)
    return Outcome(command=shown, exit_code=done.returncode, output=output,
                   failures=failures(report), checks=checks_run(report))


def failures(report: Path) -> list[dict[str, Any]]:
    """The failed checks recorded in an NDJSON events report, one entry per distinct
    (operation, check, message)."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    if not report.exists():
        return []
    with report.open() as lines:
        for line in lines:
            if '"failure_info"' in line:
                for failure in _failed_checks(json.loads(line)):
                    key = (failure["operation"], failure["check"], failure["message"])
                    found.setdefault(key, failure)
    return list(found.values())


def checks_run(report: Path) -> set[str]:
    """The names of the checks the run applied (from the first case that lists them)."""
    if report.exists():
        with report.open() as lines:
            for line in lines:
                if '"checks"' in line:
                    names = set(re.findall(r'"name":"(\w+)","status"', line))
                    if names:
                        return names
    return set()


def _failed_checks(event: Any) -> Iterator[dict[str, Any]]:
    """Walk an event for check results that failed."""
    if isinstance(event, dict):
        if str(event.get("status")).lower() == "failure" and "failure_info" in event:
            failure = (event.get("failure_info") or {}).get("failure") or {}
            yield {"operation": failure.get("operation", "?"), "check": event.get("name", "?"),
                   "title": failure.get("title", ""), "message": failure.get("message", ""),
                   "code": failure.get("code", "")}
        for value in event.values():
            yield from _failed_checks(value)
    elif isinstance(event, list):
        for value in event:
            yield from _failed_checks(value)


def _pythonpath() -> str:
    """The hooks module (crondepot_testkit.schemathesis_hooks) is imported by the schemathesis
    process: the folder holding this package on its path, for when it is not installed."""
    parts = [str(SRC), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(part for part in parts if part)
