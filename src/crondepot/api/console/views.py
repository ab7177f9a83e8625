"""What the console's pages show, read through the same store functions as the API and CLI.

Each function takes a connection and the caller's tenant and returns plain data for a
template; the only SQL of its own is in ``db/sql/queries/stats.sql`` (runs by state and the
per-minute buckets of the last hour).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from psycopg.rows import dict_row

from crondepot.api.console import charts
from crondepot.base.vocab import RUN_STATES
from crondepot.db import Q
from crondepot.job import targets
from crondepot.job.health import job_health, list_unhealthy_jobs, unhealthy_among
from crondepot.job.store import JobFilter, StoredJob, get_job, list_jobs, tenant_window
from crondepot.limits.buckets import HOLD_SECONDS, SLACK_SECONDS
from crondepot.limits.holds import list_holds
from crondepot.runs import reads
from crondepot.runs.deadletter import DeadFilter, DeadRun, list_dead
from crondepot.scheduler.ledger import latest_check
from crondepot.timetable import Fire
from crondepot.timetable.delivery import DeliveryWindow, resolve

NOTES = {
    "moved": "moved: its local time was skipped by a clock change; fires at the change",
    "merged": "merged: several skipped local times fire once, at the clock change",
    "repeated-once": "repeated time: the clock goes back; fires on the first pass only",
    "second-pass": "second pass: the clock went back and this local time happens again",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FireView:
    at: datetime
    local: datetime
    note: str | None

    @property
    def note_text(self) -> str:
        return NOTES.get(self.note or "", self.note or "")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRow:
    job: StoredJob
    fires: list[FireView]
    last: dict[str, Any] | None
    unhealthy: bool = False

    @property
    def state(self) -> str:
        if not self.job.active:
            return "ended" if self.job.ended_reason else "cancelled"
        return "paused" if self.job.paused else "active"


def fires(job: StoredJob, count: int, *, now: datetime | None = None) -> list[FireView]:
    """The job's next ``count`` fires after now (the timetable's nominal instants)."""
    after = now or datetime.now(UTC)
    if not job.active:
        return []
    stream = job.spec.timetable(job.id).fires_after(after)
    return [_fire(f) for f in islice(stream, count)]


def _fire(fire: Fire) -> FireView:
    return FireView(at=fire.at, local=fire.local, note=fire.note)


def _states(conn: psycopg.Connection[Any], tenant_id: int,
            stats: dict[str, Any]) -> dict[str, int]:
    states: dict[str, int] = dict.fromkeys(RUN_STATES, 0)
    for status, count in conn.execute(Q.console_runs_by_state, {"tenant_id": tenant_id}):
        states[status] = states.get(status, 0) + count
    # the outcomes as `crondepot status` counts them, so that each count's link to the runs
    # page (status, since an hour ago) lists exactly the runs counted
    states.update(stats["finished_last_hour"])
    return states


def overview_tiles(conn: psycopg.Connection[Any], tenant_id: int) -> dict[str, Any]:
    """What the overview's tiles show, without the charts (the live refresh's read)."""
    stats = reads.stats(conn, tenant_id)
    states = _states(conn, tenant_id, stats)
    workers = conn.cursor(row_factory=dict_row).execute(Q.live_workers).fetchall()
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    return {"stats": stats, "states": states, "workers": workers, "hour_ago": hour_ago,
            "finished_last_hour": _finished(stats)}


def _finished(stats: dict[str, Any]) -> int:
    """Runs that ended succeeded, failed or dead in the last hour (the tile's count)."""
    return sum(n for s, n in stats["finished_last_hour"].items()
               if s in ("succeeded", "failed", "dead"))


def tenants_side_by_side(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """The operator's view: each tenant's queue, oldest ready run, start lag, running runs
    and dead letter, and the queued runs its holds keep (a connection that sees every
    tenant, console/operator.py)."""
    held: dict[str, int] = {}
    for h in list_holds(conn, None):
        held[h.tenant] = held.get(h.tenant, 0) + h.queued
    rows = []
    for tenant_id, name in conn.execute(Q.console_tenants).fetchall():
        stats = reads.stats(conn, tenant_id)
        states = _states(conn, tenant_id, stats)
        oldest = [q["oldest_ready_seconds"] for q in stats["queue"].values()
                  if q["oldest_ready_seconds"] is not None]
        rows.append({"id": tenant_id, "name": name, "stats": stats, "running": states["running"],
                     "ready": sum(q["ready"] for q in stats["queue"].values()),
                     "held": held.get(name, 0),
                     "waiting": sum(q["waiting"] for q in stats["queue"].values()),
                     "oldest_ready_seconds": max(oldest) if oldest else None})
    return rows


def overview(conn: psycopg.Connection[Any], tenant_id: int) -> dict[str, Any]:
    stats = reads.stats(conn, tenant_id)
    states = _states(conn, tenant_id, stats)
    minutes = conn.execute(Q.console_minutes, {"tenant_id": tenant_id}).fetchall()
    labels = [row[0].astimezone(UTC).strftime("%H:%M") for row in minutes]
    throughput = charts.stacked_bars(
        "Throughput", "runs/min", labels,
        [("succeeded", "ok", [row[1] for row in minutes]),
         ("failed or dead", "bad", [row[2] for row in minutes])])
    lag = charts.lines(
        "Start lag", "s", labels,
        [("average", "avg", [row[3] for row in minutes]),
         ("max", "max", [row[4] for row in minutes])])
    workers = conn.cursor(row_factory=dict_row).execute(Q.live_workers).fetchall()
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat(timespec="seconds")
    return {"stats": stats, "states": states, "throughput": throughput, "lag": lag,
            "hour_ago": hour_ago,
            "workers": workers,
            "finished_last_hour": _finished(stats)}


def jobs_page(conn: psycopg.Connection[Any], tenant_id: int, where: JobFilter, *,
              after: int, limit: int, unhealthy: bool = False) -> tuple[list[JobRow], int | None]:
    """A page of jobs with their next 3 fires, their newest run and whether they are
    unhealthy; and the next cursor. ``unhealthy``: only the unhealthy ones."""
    listed = list_unhealthy_jobs if unhealthy else list_jobs
    found = listed(conn, tenant_id, where, after=after, limit=limit + 1)
    page = found[:limit]
    last = {row["job_id"]: row for row in conn.cursor(row_factory=dict_row).execute(
        Q.console_last_runs, {"tenant_id": tenant_id, "job_ids": [j.id for j in page]})}
    now = datetime.now(UTC)
    failing = unhealthy_among(conn, tenant_id, [j.id for j in page])
    rows = [JobRow(job=j, fires=fires(j, 3, now=now) if j.active else [], last=last.get(j.id),
                   unhealthy=j.id in failing) for j in page]
    return rows, (page[-1].id if len(found) > limit else None)


def job_detail(conn: psycopg.Connection[Any], tenant_id: int, job_id: int,
               runs: int) -> dict[str, Any]:
    job = get_job(conn, tenant_id, job_id)
    history = reads.job_runs(conn, tenant_id, job_id, before=None, limit=runs)
    for run in history:
        run["lateness"] = lateness(run)
    default = tenant_window(conn, tenant_id) if job.spec.delivery_window is None else None
    window = resolve(job.spec.delivery_window, default)
    upcoming = fires(job, 10) if job.active else []
    return {"job": job, "fires": upcoming, "runs": history,
            "target": target_summary(job.spec.target),
            "health": job_health(conn, tenant_id, job_id),
            "tenant_window": None if default is None else resolve(default, None),
            "window": window,
            "sent": [delivery_note(window, f.at, job.spec.tz) for f in upcoming]}


def delivery_note(window: DeliveryWindow | None, at: datetime, tz: str) -> str:
    """Where a fire's delivery window puts it: "", "deferred to <local opening>" or
    "skipped (delivery_window)"."""
    opening = None if window is None else window.opening(at, tz)
    if window is None or opening is None:
        return ""
    if window.outside == "skip":
        return "skipped (delivery_window)"
    return f"deferred to {opening.astimezone(ZoneInfo(tz)):%Y-%m-%d %H:%M %Z}"


def lateness(run: dict[str, Any]) -> timedelta | None:
    """first_claimed_at - due_at: how late the first attempt started."""
    claimed, due = run.get("first_claimed_at"), run.get("due_at")
    if claimed is None or due is None:
        return None
    late: timedelta = claimed - due
    return late


def target_summary(target: dict[str, Any]) -> str:
    """Where a job calls: "http https://…" or "python sms.send" (nothing else of it)."""
    return targets.summary(target)


def dead_letter(conn: psycopg.Connection[Any], where: DeadFilter) -> list[DeadRun]:
    return list_dead(conn, where)


# ----- the 9:00 panels: rate limits, the schedulers and the maintenance leader --------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitRow:
    """One rate limit a tenant's jobs use, as the panel shows it."""

    tenant: str
    tenant_id: int
    name: str
    rate_per_second: float | None     # None: no bucket of that name (its runs fail)
    burst: int | None
    tokens: float | None
    shared: bool
    waiting: int                      # queued runs of the limit that are due (held or not)
    held: bool                        # a hold (limits pause) names it: none are claimed

    @property
    def drain_seconds(self) -> float | None:
        """waiting / rate: an estimate (it assumes the workers keep up and the bucket is
        this tenant's alone); None when held or when there is no bucket."""
        if self.held or not self.rate_per_second:
            return None
        return self.waiting / self.rate_per_second

    def document(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "name": self.name, "rate_per_second": self.rate_per_second,
                "burst": self.burst, "tokens": None if self.tokens is None
                else round(self.tokens, 2), "shared": self.shared, "waiting": self.waiting,
                "held": self.held, "drain_estimate_seconds": self.drain_seconds}


def limit_panel(conn: psycopg.Connection[Any], tenant_id: int | None) -> list[LimitRow]:
    """The rate limits a tenant may use or its queued runs name (every tenant's for None),
    with the bucket's tokens now (read, never taken) and the runs waiting behind each."""
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(Q.console_limit_panel, {
            "tenant_id": tenant_id, "hold": HOLD_SECONDS + SLACK_SECONDS}).fetchall()
    return [LimitRow(**row) for row in rows]


@dataclass(frozen=True, slots=True, kw_only=True)
class Process:
    kind: str                          # "scheduler" or "maintenance leader"
    name: str
    sessions: int
    last_active_seconds: float | None


def system_status(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The schedulers, the maintenance leader and the workers alive, and the latest ledger
    check: what ``crondepot status`` and the metrics read, for the console."""
    with conn.cursor(row_factory=dict_row) as cur:
        processes = [Process(**row) for row in cur.execute(Q.console_processes)]
        workers = cur.execute(Q.live_workers).fetchall()
    return {"schedulers": [p for p in processes if p.kind == "scheduler"],
            "leader": next((p for p in processes if p.kind == "maintenance leader"), None),
            "workers": workers, "ledger": latest_check(conn)}
