"""The schedule rules of issue 31 mixed, as a model-based test against a real PostgreSQL:
jobs with overlap policies, a tenant calendar, delivery windows (their own, the tenant's
default, or "none"), lists of crons and intervals; edits (PATCH-like ``update_job``), pauses
and resumes, calendar changes, the tenant's default window set and cleared, scheduler ticks,
clock moves, and a model worker that claims runs through the real claim
(``crondepot_claim_runs`` with the injected clock), holds them to their windows with the
worker's own guard (``claimed_windows``, ``DeliveryWindow.opening``, ``defer_run``) and
finishes them (``record_success`` / ``record_final_failure``).

The clock is injected everywhere it is taken (``now=`` on create, edit, pause, tick, claim,
verify, calendar change); nothing checked depends on the database's clock.

After every step:
- ``verify`` is clean: every fire has one row, none two;
- each run's state agrees with an independent model of the rules (written with the state in
  force when it was written: the job's document before an edit, pause or resume, the
  calendar's dates, the tenant's default window): ``paused`` while paused; ``calendar`` for
  a fire whose local date is in the calendar with ``on_excluded: skip``, else due at the
  same local time on the nearest Monday-to-Friday not in it; ``delivery_window`` for a due
  time outside a ``skip`` window, else due at the window's next opening with ``defer``; any
  other fire must reach the target: it is queued, running, succeeded or failed, or the
  claim dropped it (``overlap``) because its run had a policy other than ``allow``;
- no job has two running runs under a policy other than ``allow``, nor two at all if its
  policy never was ``allow``; after a claim, a ``buffer_one`` job with a run running has at
  most one ready run waiting;
- every run the model worker calls was inside its window at the claim instant, by the
  model's own window arithmetic; the others were given back by the guard, due at the
  opening the model computes.

At the end, the worker drains the queue for four days of clock (no ticks): every fire the
model says must reach the target has then succeeded or failed, or was dropped by ``overlap``.

Cost: ``max_examples=60``, ``stateful_step_count=25``, derandomized (the same cases every
run, no example database): 41 to 61 s on this 2-core machine shared with other work (measured
2026-12-06; 100 x 30 took 84 s). One run of those 60 cases wrote about 1,600 runs: 310
succeeded or failed, 470 skipped ``delivery_window``, 340 ``overlap``, 64 ``paused``, 23
``calendar``, 240 given back by the guard, about 330 due elsewhere than their nominal time
(moved by the calendar or deferred to an opening).

Found on the way: the overlap rule counts only runs leased under a rule as "running"
(``claim_overlap.sql``): a job edited from ``allow`` to ``skip`` while ``allow`` runs are
leased has its next run leased beside them. The check below follows the code (at most one
ruled run running, and at most one run at all for a job never ``allow``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from crondepot.job import JobSpec
from crondepot.job.store import create_jobs, get_job, pause_job, resume_job, update_job
from crondepot.queue.claim import ClaimedRun, claim_runs, claimed_windows
from crondepot.queue.outcome import defer_run, record_final_failure, record_success
from crondepot.scheduler.ledger import verify
from crondepot.scheduler.tick import tick
from crondepot.tenancy.calendars import set_calendar
from crondepot.tenancy.tenants import set_delivery_window
from crondepot.timetable.delivery import parse_window
from tests.support.jobs import tenant

# Monday 2 March 2026: the steps stay within the week and a half after it (New York moves to
# summer time on Sunday the 8th, at 02:00, which no fire of these crons moves onto).
START = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)
DAYS = [START.date() + timedelta(days=d) for d in range(10)]
CALENDAR = "holidays"
ZONES = ("UTC", "Asia/Kolkata", "America/New_York")
TIMETABLES = st.sampled_from((
    {"cron": "*/20 * * * *"}, {"cron": "0 * * * *"}, {"cron": "0 9,21 * * *"},
    {"cron": ["0 * * * *", "*/30 * * * *"]}, {"cron": ["30 5 * * *", "0 9,21 * * 1-5"]},
    {"every": "45m", "anchor": "2026-03-02T00:05:00Z"}, {"every": "2h", "anchor":
                                                          "2026-03-01T23:10:00Z"},
))
CALENDARS = st.one_of(st.none(), st.sampled_from(
    ("skip", "next_business_day", "previous_business_day")).map(
        lambda on: {"exclude": CALENDAR, "on_excluded": on, "business_days": "mon-fri"}))
WINDOW_DOCS = ({"from": "09:00", "to": "17:00", "days": "mon-fri", "outside": "defer"},
               {"from": "09:00", "to": "17:00", "outside": "skip"},
               {"from": "22:00", "to": "06:00", "outside": "defer"},
               {"from": "22:00", "to": "06:00", "days": "fri-mon", "outside": "skip"})
# None: the tenant's default; "none": no window, whatever the tenant's.
WINDOWS = st.sampled_from((None, "none", *WINDOW_DOCS))
OVERLAPS = st.sampled_from(("allow", "skip", "buffer_one"))
documents = st.fixed_dictionaries({
    "tz": st.sampled_from(ZONES), "overlap": OVERLAPS, "calendar": CALENDARS,
    "delivery_window": WINDOWS,
}).flatmap(lambda doc: TIMETABLES.map(lambda timetable: {**doc, **timetable}))
STEPS = (timedelta(minutes=7), timedelta(minutes=40), timedelta(hours=3), timedelta(hours=9))
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DRAIN = timedelta(days=4)


# --- the model's own arithmetic (not the code's) -------------------------------------------

def _days(text: str | None) -> frozenset[int]:
    """'mon-fri', 'fri-mon' (wraps): the weekdays (0 = Monday); None: every day."""
    if text is None:
        return frozenset(range(7))
    first, last = (WEEKDAYS.index(part) for part in text.split("-"))
    return frozenset((first + i) % 7 for i in range((last - first) % 7 + 1))


def _hhmm(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def window_inside(window: dict[str, Any], at: datetime, tz: str) -> bool:
    """Whether ``at`` is inside the window: from inclusive, to exclusive, ``days`` the days
    it opens (an overnight window runs into the next morning)."""
    local = at.astimezone(ZoneInfo(tz))
    start, end, days = _hhmm(window["from"]), _hhmm(window["to"]), _days(window.get("days"))
    now, weekday = local.time(), local.weekday()
    if start < end:
        return weekday in days and start <= now < end
    return (now >= start and weekday in days) or (now < end and (weekday - 1) % 7 in days)


def window_opening(window: dict[str, Any], at: datetime, tz: str) -> datetime:
    """The first opening after ``at`` (``at`` outside the window)."""
    zone = ZoneInfo(tz)
    start, days = _hhmm(window["from"]), _days(window.get("days"))
    day = at.astimezone(zone).date()
    for k in range(9):
        candidate = datetime.combine(day + timedelta(days=k), start, tzinfo=zone)
        if candidate.weekday() in days and candidate > at:
            return candidate.astimezone(UTC)
    raise AssertionError("a window that never opens")


def calendar_due(nominal: datetime, tz: str, on: str, dates: frozenset[date]) -> datetime | None:
    """Where the calendar puts a fire: its own time, None (skipped), or the same local time
    on the nearest Monday-to-Friday not in ``dates``, after or before."""
    zone = ZoneInfo(tz)
    local = nominal.astimezone(zone)
    if local.date() not in dates:
        return nominal
    if on == "skip":
        return None
    step = timedelta(days=1 if on == "next_business_day" else -1)
    day = local.date()
    while True:
        day += step
        if day.weekday() < 5 and day not in dates:
            return datetime.combine(day, local.time(), tzinfo=zone).astimezone(UTC)


@dataclass
class Expected:
    """What the model says of one fire: its skip reason (None: it must reach the target) and
    where it is due."""

    reason: str | None
    due: datetime
    dropped: bool = False          # the claim wrote it skipped 'overlap'


@dataclass
class State:
    """What the rules read when a fire is written."""

    docs: dict[int, dict[str, Any]] = field(default_factory=dict)
    paused: set[int] = field(default_factory=set)
    dates: frozenset[date] = frozenset()
    tenant_window: dict[str, Any] | None = None

    def copy(self) -> State:
        return State({k: dict(v) for k, v in self.docs.items()}, set(self.paused), self.dates,
                     self.tenant_window)

    def window(self, job: int) -> dict[str, Any] | None:
        own = self.docs[job]["delivery_window"]
        if own == "none":
            return None
        return own if own is not None else self.tenant_window

    def expect(self, job: int, nominal: datetime) -> Expected:
        doc = self.docs[job]
        if job in self.paused:
            return Expected("paused", nominal)
        due: datetime | None = nominal
        if doc["calendar"] is not None:
            due = calendar_due(nominal, doc["tz"], doc["calendar"]["on_excluded"], self.dates)
            if due is None:
                return Expected("calendar", nominal)
        assert due is not None
        window = self.window(job)
        if window is not None and not window_inside(window, due, doc["tz"]):
            if window["outside"] == "skip":
                return Expected("delivery_window", due)
            due = window_opening(window, due, doc["tz"])
        return Expected(None, due)


class ScheduleRulesMachine(RuleBasedStateMachine):
    jobs = Bundle("jobs")

    def __init__(self, conn: psycopg.Connection[Any], tenant_id: int) -> None:
        super().__init__()
        self.conn, self.tenant = conn, tenant_id
        self.now = START
        self.keys = 0
        self.state = State()
        self.ever_allowed: set[int] = set()
        self.expected: dict[str, Expected] = {}
        self.in_flight: dict[str, ClaimedRun] = {}
        conn.execute("TRUNCATE jobs, runs, job_timetables")
        set_delivery_window(conn, tenant_id, None)
        # today (Monday), tomorrow and Friday are holidays until a step changes them
        holidays = [DAYS[0], DAYS[1], DAYS[4]]
        set_calendar(conn, tenant_id, CALENDAR, holidays, now=self.now)
        self.state.dates = frozenset(holidays)

    # --- steps ------------------------------------------------------------------------------

    @initialize(target=jobs, doc=documents)
    def first_job(self, doc: dict[str, Any]) -> int:
        return self.create(doc)

    @rule(target=jobs, doc=documents)
    def create(self, doc: dict[str, Any]) -> int:
        self.keys += 1
        full = {**doc, "key": f"job-{self.keys}", "payload": {"n": self.keys},
                "target": {"type": "python", "handler": "test.noop"},
                "misfire": {"policy": "run_late"}, "catchup": "all", "max_catchup": 1000}
        with self._written():
            (created,) = create_jobs(self.conn, self.tenant, [JobSpec.from_document(full)],
                                     now=self.now)
        self.state.docs[created.id] = {"tz": doc["tz"], "overlap": doc["overlap"],
                                       "calendar": doc["calendar"],
                                       "delivery_window": doc["delivery_window"]}
        if doc["overlap"] == "allow":
            self.ever_allowed.add(created.id)
        return created.id

    @rule(job=jobs, data=st.data())
    def edit(self, job: int, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(("overlap", "calendar", "delivery_window",
                                          "timetable", "tz")))
        patch = {"overlap": lambda: {"overlap": data.draw(OVERLAPS)},
                 "calendar": lambda: {"calendar": data.draw(CALENDARS)},
                 "delivery_window": lambda: {"delivery_window": data.draw(WINDOWS)},
                 "timetable": lambda: {"cron": None, "every": None, "anchor": None,
                                       **data.draw(TIMETABLES)},
                 "tz": lambda: {"tz": data.draw(st.sampled_from(ZONES))}}[name]()
        # The fires the edit settles are judged by the document before it.
        with self._written():
            update_job(self.conn, self.tenant, job, patch,
                       version=get_job(self.conn, self.tenant, job).version, now=self.now)
        for key in ("overlap", "calendar", "delivery_window", "tz"):
            if key in patch:
                self.state.docs[job][key] = patch[key]
        if patch.get("overlap") == "allow":
            self.ever_allowed.add(job)

    @rule(job=jobs)
    def pause(self, job: int) -> None:
        with self._written():
            pause_job(self.conn, self.tenant, job, now=self.now)
        self.state.paused.add(job)

    @rule(job=jobs)
    def resume(self, job: int) -> None:
        with self._written():
            resume_job(self.conn, self.tenant, job, now=self.now)
        self.state.paused.discard(job)

    @rule(days=st.sets(st.sampled_from(DAYS), max_size=5))
    def change_calendar(self, days: set[date]) -> None:
        with self._written():
            set_calendar(self.conn, self.tenant, CALENDAR, sorted(days), now=self.now)
        self.state.dates = frozenset(days)

    @rule(window=st.sampled_from((None, *WINDOW_DOCS)))
    def tenant_default_window(self, window: dict[str, Any] | None) -> None:
        with self._written():
            set_delivery_window(self.conn, self.tenant,
                                None if window is None else parse_window(window))
        self.state.tenant_window = window

    @rule()
    def schedulers_tick(self) -> None:
        with self._written():
            while tick(self.conn, batch=7, now=self.now).full:
                pass
        (due,) = self.conn.execute(
            "SELECT count(*) FROM jobs WHERE active AND NOT paused AND next_run_at <= %s",
            (self.now,)).fetchone()  # type: ignore[misc]
        assert due == 0

    @rule(step=st.sampled_from(STEPS), ticking=st.booleans(), working=st.booleans())
    def time_passes(self, step: timedelta, ticking: bool, working: bool) -> None:
        """The clock moves on; with ``ticking`` the schedulers keep up every 20 minutes (else
        they are down for the step), with ``working`` the worker claims as they do."""
        end = self.now + step
        while (ticking or working) and self.now + timedelta(minutes=20) < end:
            self.now += timedelta(minutes=20)
            if ticking:
                self.schedulers_tick()
            if working:
                self.claim()
        self.now = end

    @rule()
    def claim(self) -> None:
        before = dict(self.conn.execute(
            "SELECT run_id, overlap FROM runs WHERE status = 'queued'").fetchall())
        claimed = claim_runs(self.conn, owner="model-worker", shares={"normal": 500},
                             now=self.now)
        windows = claimed_windows(self.conn, claimed)
        for run in claimed:
            assert run.run_id in before, f"{run.run_id} claimed, not queued before"
            if before[run.run_id] != "allow":
                # Only the runs leased under a rule count as running for it: one leased
                # under allow before an edit to skip does not (claim_overlap.sql).
                (running,) = self.conn.execute(
                    "SELECT count(*) FROM runs WHERE job_id = %s AND status = 'running' "
                    "AND overlap <> 'allow'", (run.job_id,)).fetchone()  # type: ignore[misc]
                assert running == 1, f"{run.run_id} leased beside a ruled running run"
            assert run.due_at <= self.now
            # The worker's guard, as worker/execute.py applies it before the call.
            window = self.state.window(run.job_id)
            tz = self.state.docs[run.job_id]["tz"]
            opening = None
            if run.job_id in windows:
                held, held_tz = windows[run.job_id]
                opening = held.opening(self.now, held_tz)
            inside = window is None or window_inside(window, self.now, tz)
            assert (opening is None) == inside, (run.run_id, window, self.now, opening)
            if opening is not None:
                assert window is not None
                assert opening == window_opening(window, self.now, tz)
                defer_run(self.conn, run.run_id, run.lease_token, opening)
                self.expected[run.run_id].due = max(self.expected[run.run_id].due, opening)
            else:
                self.in_flight[run.run_id] = run
        # The claim dropped these: only runs under a rule other than allow.
        for run_id, status, reason in self.conn.execute(
                "SELECT run_id, status, skip_reason FROM runs "
                "WHERE run_id = ANY(%s) AND status <> 'queued'",
                (list(before.keys() - {r.run_id for r in claimed}),)).fetchall():
            assert (status, reason) == ("skipped", "overlap"), (run_id, status, reason)
            assert before[run_id] != "allow", f"{run_id} dropped under allow"
            self.expected[run_id].dropped = True
        # buffer_one: at most one ready run waits behind a running one.
        for job, waiting in self.conn.execute(
                "SELECT q.job_id, count(*) FROM runs AS q WHERE q.status = 'queued' "
                "AND q.overlap = 'buffer_one' AND q.available_at <= %s AND EXISTS ("
                "SELECT FROM runs AS r WHERE r.job_id = q.job_id AND r.status = 'running') "
                "GROUP BY q.job_id", (self.now,)).fetchall():
            assert waiting <= 1, f"job {job}: {waiting} runs wait behind a running one"

    @rule(data=st.data(), succeeds=st.booleans())
    def finish(self, data: st.DataObject, succeeds: bool) -> None:
        if not self.in_flight:
            return
        run_id = data.draw(st.sampled_from(sorted(self.in_flight)))
        self._finish(self.in_flight.pop(run_id), succeeds)

    def _finish(self, run: ClaimedRun, succeeds: bool) -> None:
        if succeeds:
            record_success(self.conn, run.run_id, run.lease_token, run.attempt)
        else:
            record_final_failure(self.conn, run.run_id, run.lease_token, status="failed",
                                 error="the gateway said no", error_class="permanent")

    # --- the model of what is written -------------------------------------------------------

    class _Written:
        def __init__(self, machine: ScheduleRulesMachine) -> None:
            self.machine = machine

        def __enter__(self) -> None:
            self.state = self.machine.state.copy()

        def __exit__(self, *exc: object) -> None:
            if exc[0] is None:
                self.machine._record_new_runs(self.state)

    def _written(self) -> ScheduleRulesMachine._Written:
        """Around a step: the runs it writes are expected by the state before it."""
        return self._Written(self)

    def _record_new_runs(self, state: State) -> None:
        rows = self.conn.execute("SELECT run_id, job_id, nominal_at FROM runs "
                                 "WHERE run_id <> ALL(%s)", (list(self.expected),)).fetchall()
        for run_id, job_id, nominal in rows:
            self.expected[run_id] = state.expect(job_id, nominal)

    # --- invariants -------------------------------------------------------------------------

    @invariant()
    def every_fire_is_accounted_for_once(self) -> None:
        report = verify(self.conn, since=START - timedelta(hours=1), now=self.now, listed=5)
        assert report.clean, report.document()

    @invariant()
    def the_runs_agree_with_the_model(self) -> None:
        rows = self.conn.execute(
            "SELECT run_id, status, skip_reason, due_at FROM runs").fetchall()
        assert len(rows) == len(self.expected), "a run the model did not see written"
        for run_id, status, reason, due in rows:
            want = self.expected[run_id]
            if want.reason is not None:
                assert (status, reason) == ("skipped", want.reason), (run_id, status, reason,
                                                                        want)
                continue
            assert due == want.due, (run_id, due, want)
            if want.dropped:
                assert (status, reason) == ("skipped", "overlap"), (run_id, status, reason)
            else:
                assert status in ("queued", "running", "succeeded", "failed"), (
                    run_id, status, reason, want)

    @invariant()
    def no_ruled_job_runs_twice(self) -> None:
        for job, ruled, running in self.conn.execute(
                "SELECT job_id, count(*) FILTER (WHERE overlap <> 'allow'), count(*) "
                "FROM runs WHERE status = 'running' GROUP BY job_id").fetchall():
            assert ruled <= 1, f"job {job}: {ruled} ruled runs running"
            assert running <= 1 or job in self.ever_allowed, f"job {job}: {running} running"

    def teardown(self) -> None:
        """The worker drains the queue hour by hour (no ticks): every fire that must reach
        the target then has, or the claim dropped it by its overlap rule."""
        end = self.now + DRAIN
        while self.now < end:
            self.now += timedelta(hours=1)
            # a run given back to its window's opening, or deferred there, waits for it
            (latest,) = self.conn.execute(
                "SELECT max(available_at) FROM runs WHERE status = 'queued'").fetchone()  # type: ignore[misc]
            if latest is not None:
                end = min(max(end, latest + timedelta(hours=2)), self.now + DRAIN)
            self.claim()
            for run in list(self.in_flight.values()):
                self._finish(run, True)
            self.in_flight.clear()
        self.the_runs_agree_with_the_model()
        for run_id, status, reason in self.conn.execute(
                "SELECT run_id, status, skip_reason FROM runs").fetchall():
            want = self.expected[run_id]
            reached = status in ("succeeded", "failed")
            if want.reason is None and not want.dropped:
                assert reached, (run_id, status, reason, want)
            else:
                assert not reached and status == "skipped", (run_id, status, reason, want)


def test_overlaps_calendars_windows_edits_and_pauses_keep_the_ledger_and_the_model(
        conn: psycopg.Connection[Any]) -> None:
    tenant_id = tenant(conn)
    run_state_machine_as_test(
        lambda: ScheduleRulesMachine(conn, tenant_id),
        settings=settings(max_examples=60, stateful_step_count=25, deadline=None,
                          derandomize=True, database=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture]))
