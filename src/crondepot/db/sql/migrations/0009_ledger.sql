-- The ledger rule (design §4, §5): every fire of a job's timetable, from its creation to
-- its end, has exactly one row in runs. `crondepot verify` proves it from the database; it
-- needs to know which timetable was in force when, and a run needs to carry its deadline.

-- A run's misfire deadline as an instant (NULL: run_late, no deadline), written with the
-- run. The claim and the retry check it (functions/claim_runs.sql, queue.sql): a run past it
-- is recorded skipped, reason 'deadline_passed', and never sent; a replay may clear it.
-- Nullable without a default: PostgreSQL adds the column without rewriting the table.
ALTER TABLE runs ADD COLUMN deadline_at timestamptz;
-- The queued runs that have a deadline, by it: the workers' sweep finds the late ones here
-- without walking the queue (most runs are run_late and are not in this index).
CREATE INDEX runs_queued_deadline ON runs (deadline_at)
    WHERE status = 'queued' AND deadline_at IS NOT NULL;

-- The instant from which the job's current cron and tz are in force (fires strictly after
-- it belong to them): its creation, or the last edit that changed cron or tz. NULL for jobs
-- created before this migration, which read as created_at.
ALTER TABLE jobs ADD COLUMN timetable_since timestamptz;

-- The timetables a job had before: one row per edit that changed cron or tz, holding the
-- old pair and the interval (since, until] in which its fires were the job's. The current
-- pair lives on the job row. H fields hash on the job's key or id, which never change.
CREATE TABLE job_timetables (
    job_id     bigint NOT NULL,
    tenant_id  bigint NOT NULL,
    cron       text NOT NULL,
    tz         text NOT NULL,
    since      timestamptz NOT NULL,
    until      timestamptz NOT NULL CHECK (until >= since),
    PRIMARY KEY (job_id, until)
);
-- The ledger check reads the timetables that ended inside its window.
CREATE INDEX job_timetables_until ON job_timetables (until);

-- The results of the ledger checks the schedulers run every few minutes: the metric
-- crondepot_fires_unaccounted is read from the latest row by whichever process serves the
-- database gauges, so every copy reports the same value.
CREATE TABLE ledger_checks (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    checked_at   timestamptz NOT NULL DEFAULT now(),
    since        timestamptz NOT NULL,
    until        timestamptz NOT NULL,
    fires        bigint NOT NULL,
    unaccounted  bigint NOT NULL,
    duplicated   bigint NOT NULL,
    pending      bigint NOT NULL,
    -- The oldest fire found pending: the next check reaches back to it, so a fire pending
    -- for longer than the window (a long spread, an outage) is still judged once written.
    oldest_pending timestamptz,
    seconds      double precision NOT NULL
);
