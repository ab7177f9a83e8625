"""The ledger rule as a model-based test: random sequences of what people and schedulers do,
against a real PostgreSQL, and after every step no fire is unaccounted and none has two rows.

Steps: create jobs (timetables with DST gaps, H fields, steps, lists of crons, intervals;
spread; every misfire policy; both catch-up rules), edit them (payload, timetable, tz,
spread, misfire), pause, resume, cancel
(and then try to change them again), trigger, import a batch with a line the validator
refuses and maybe one only the database refuses, run the schedulers (which must leave
nothing due), and move the clock by seconds, minutes across spread windows, or hours (an
outage: nothing ticks meanwhile). The clock is
injected as the code takes it (``now=``): production passes nothing and gets the database's.

After every step ``verify`` (crondepot.scheduler.ledger) rebuilds every job's fires from the
timetables in force and compares them with runs. The model itself only tracks which jobs exist
and in which state, so the steps it picks are ones people can take (the store refuses the others,
and that refusal is checked too).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from crondepot.base.errors import InvalidJob
from crondepot.job import JobSpec
from crondepot.job.store import (
    JobCancelled,
    cancel_job,
    create_jobs,
    get_job,
    import_batch,
    pause_job,
    resume_job,
    trigger_job,
    update_job,
)
from crondepot.scheduler.ledger import verify
from crondepot.scheduler.tick import tick
from tests.support.jobs import tenant

# Saturday evening before the European change to summer time (Sunday 29 March 2026, 01:00
# UTC): a few hours of steps cross it. New York changed on 8 March.
START = datetime(2026, 3, 28, 21, 50, tzinfo=UTC)
CRONS = ("*/7 * * * *", "0 * * * *", "30 2 * * *", "H/15 * * * *", "0 22 * * 6,0",
         "15 */2 * * *", "59 23 * * *", "0 0 * * *")
ZONES = ("UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata")
MISFIRES = ({"policy": "run_late"}, {"policy": "skip_after", "seconds": 120},
            {"policy": "skip_after_local_time", "until": "02:30"})
SPREADS = (0, 90, 1200)
STEPS = (timedelta(seconds=20), timedelta(minutes=3), timedelta(minutes=17),
         timedelta(hours=1), timedelta(hours=3))
BAD_LINES = ({"cron": "61 * * * *"}, {"tz": "Mars/Olympus"}, {"payload": {"a": [1e300] * 60}})

# A job's timetable: one cron, a list of them (one run per instant: "0 * * * *" and
# "*/20 * * * *" meet every hour), or an interval (absolute time: it crosses the change
# unmoved), anchored at its creation, in the past, or ahead of the clock.
TIMETABLES = st.one_of(
    st.sampled_from(CRONS).map(lambda cron: {"cron": cron}),
    st.sampled_from((["0 * * * *", "*/20 * * * *"], ["30 2 * * *", "0 3 * * *", "H/15 * * * *"],
                     ["59 23 * * *", "0 0 * * *", "*/7 * * * *"])).map(lambda c: {"cron": c}),
    st.sampled_from(({"every": "7m"}, {"every": "45s", "anchor": "2026-03-28T21:00:07Z"},
                     {"every": "1h", "anchor": "2026-03-29T00:30:00Z"})),
)
documents = st.fixed_dictionaries({
    "tz": st.sampled_from(ZONES),
    "misfire": st.sampled_from(MISFIRES), "catchup": st.sampled_from(("all", "latest")),
    "max_catchup": st.sampled_from((1, 3, 1000)),
    "spread": st.sampled_from(SPREADS).map(lambda s: {"seconds": s}),
    "priority": st.sampled_from(("normal", "bulk", "urgent")),
}).flatmap(lambda doc: TIMETABLES.map(lambda timetable: {**doc, **timetable}))


class LedgerMachine(RuleBasedStateMachine):
    jobs = Bundle("jobs")

    def __init__(self, conn: psycopg.Connection[Any], tenant_id: int) -> None:
        super().__init__()
        self.conn = conn
        self.tenant = tenant_id
        self.now = START
        self.keys = 0
        self.cancelled: set[int] = set()
        self.paused: set[int] = set()
        conn.execute("TRUNCATE jobs, runs, job_timetables")

    def _document(self, doc: dict[str, Any]) -> dict[str, Any]:
        self.keys += 1
        return {**doc, "key": f"job-{self.keys}", "payload": {"n": self.keys},
                "target": {"type": "python", "handler": "test.noop"}}

    @initialize(target=jobs, doc=documents)
    def first_job(self, doc: dict[str, Any]) -> int:
        return self.create(doc)

    @rule(target=jobs, doc=documents)
    def create(self, doc: dict[str, Any]) -> int:
        (created,) = create_jobs(self.conn, self.tenant,
                                 [JobSpec.from_document(self._document(doc))], now=self.now)
        return created.id

    @rule(job=jobs, data=st.data())
    def edit(self, job: int, data: st.DataObject) -> None:
        field = data.draw(st.sampled_from(("payload", "timetable", "tz", "spread", "misfire")))
        # a new timetable replaces the old one whole: cron, every and anchor
        patch = {"payload": {"payload": {"edited": self.now.isoformat()}},
                 "timetable": {"cron": None, "every": None, "anchor": None,
                               **data.draw(TIMETABLES)},
                 "tz": {"tz": data.draw(st.sampled_from(ZONES))},
                 "spread": {"spread": {"seconds": data.draw(st.sampled_from(SPREADS))}},
                 "misfire": {"misfire": data.draw(st.sampled_from(MISFIRES))}}[field]
        self._changed(job, lambda: update_job(
            self.conn, self.tenant, job, patch,
            version=get_job(self.conn, self.tenant, job).version, now=self.now))

    @rule(job=jobs)
    def pause(self, job: int) -> None:
        if self._changed(job, lambda: pause_job(self.conn, self.tenant, job, now=self.now)):
            self.paused.add(job)

    @rule(job=jobs)
    def resume(self, job: int) -> None:
        if self._changed(job, lambda: resume_job(self.conn, self.tenant, job, now=self.now)):
            self.paused.discard(job)

    @rule(job=jobs)
    def cancel(self, job: int) -> None:
        # A cancelled job stays in the bundle: later steps must find it refuses changes.
        assert not cancel_job(self.conn, self.tenant, job, now=self.now).active
        self.cancelled.add(job)

    @rule(job=jobs)
    def trigger(self, job: int) -> None:
        self._changed(job, lambda: trigger_job(self.conn, self.tenant, job, now=self.now))

    @rule(target=jobs, docs=st.lists(documents, min_size=1, max_size=4),
          bad=st.sampled_from(BAD_LINES), refused_by_database=st.booleans())
    def import_with_bad_lines(self, docs: list[dict[str, Any]], bad: dict[str, Any],
                              refused_by_database: bool) -> Any:
        """A line the validator refuses, and perhaps one only the database refuses (the
        test's own constraint on keys): every other line is stored."""
        lines = [self._document(d) for d in docs]
        lines.insert(len(lines) // 2, {**self._document(docs[0]), **bad})
        if refused_by_database:
            lines.insert(1, {**self._document(docs[-1]), "key": f"refused-{self.keys}"})
        specs = []
        for line in lines:
            with contextlib.suppress(InvalidJob):
                specs.append(JobSpec.from_document(line))
        stored = import_batch(self.conn, self.tenant, specs, now=self.now)
        assert len(specs) == len(lines) - 1
        refusals = [s for s in stored if isinstance(s, InvalidJob)]
        assert len(refusals) == refused_by_database
        created = [s.id for s in stored if not isinstance(s, InvalidJob)]
        assert len(created) == len(docs)        # every good line stored
        return multiple(*created)

    @rule()
    def schedulers_tick(self) -> None:
        while tick(self.conn, batch=7, now=self.now).full:
            pass
        # The schedulers caught up: no job that is not paused is still due (else verify
        # would count its fires as pending for ever, and a dead scheduler would pass).
        (due,) = self.conn.execute(
            "SELECT count(*) FROM jobs WHERE active AND NOT paused AND next_run_at <= %s",
            (self.now,)).fetchone()  # type: ignore[misc]
        assert due == 0

    @rule(step=st.sampled_from(STEPS), ticking=st.booleans())
    def time_passes(self, step: timedelta, ticking: bool) -> None:
        """The clock moves on; with ``ticking`` the schedulers keep up minute by minute,
        else they are down for the whole step (an outage)."""
        end = self.now + step
        while ticking and self.now + timedelta(minutes=1) < end:
            self.now += timedelta(minutes=1)
            self.schedulers_tick()
        self.now = end

    @rule(job=jobs)
    def into_the_spread_window(self, job: int) -> None:
        """Move to just after the job's next nominal time, before its due time: where an
        edit, a pause or a cancel used to lose the fire."""
        stored = get_job(self.conn, self.tenant, job)
        if stored.next_nominal_at is not None and stored.next_nominal_at > self.now:
            self.now = stored.next_nominal_at + timedelta(seconds=1)

    def _changed(self, job: int, change: Any) -> bool:
        """Make ``change``; a cancelled job must refuse it (and nothing may change)."""
        try:
            change()
        except JobCancelled:
            assert job in self.cancelled
            return False
        assert job not in self.cancelled, "a cancelled job was changed"
        return True

    @invariant()
    def the_store_agrees_with_the_model(self) -> None:
        rows = self.conn.execute("SELECT id, paused, active FROM jobs").fetchall()
        assert {i for i, paused, active in rows if paused and active} == \
            self.paused - self.cancelled
        assert {i for i, _, active in rows if not active} == self.cancelled

    @invariant()
    def every_fire_is_accounted_for_once(self) -> None:
        report = verify(self.conn, since=START - timedelta(minutes=1), now=self.now,
                        listed=5)
        assert report.clean, report.document()


def test_the_ledger_holds_whatever_people_and_schedulers_do(
        conn: psycopg.Connection[Any]) -> None:
    tenant_id = tenant(conn)
    # A constraint the validator does not know, so imports meet a line only the database
    # refuses (an operator's own rule, say).
    conn.execute("ALTER TABLE jobs ADD CONSTRAINT jobs_key_check9 "
                 "CHECK (key NOT LIKE 'refused-%')")
    run_state_machine_as_test(
        lambda: LedgerMachine(conn, tenant_id),
        settings=settings(max_examples=200, stateful_step_count=25, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.function_scoped_fixture]))
