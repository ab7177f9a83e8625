-- Schedules beyond cron (issue 17, design §7): a job fires at one instant (at) instead of
-- on a cron, only inside a window (start_at, end_at), or at most max_runs times; and then it
-- ends by itself, readable with its history like a cancelled job.

-- An at job has no cron: exactly one of the two names its timetable. NOT VALID then VALIDATE:
-- the check scans the table under a lock that does not block reads or writes.
ALTER TABLE jobs ALTER COLUMN cron DROP NOT NULL;
ALTER TABLE jobs
    ADD COLUMN at timestamptz,
    ADD COLUMN start_at timestamptz,
    ADD COLUMN end_at timestamptz,
    ADD COLUMN max_runs integer CHECK (max_runs BETWEEN 1 AND 1000000),
    -- The job's fires written so far (runs and skipped rows; not manual triggers), counted
    -- by whoever writes them (the tick, a change settling owed fires): max_runs compares
    -- with it. A counter, not count(*) over runs: the retention pruner removes old runs.
    ADD COLUMN fire_count integer NOT NULL DEFAULT 0,
    -- When and why a job ended by its schedule: the nominal instant of its last fire (the
    -- ledger owes no fire after it, as after cancelled_at), and completed (its at run was
    -- written), end_at (its window closed) or max_runs.
    ADD COLUMN ended_at timestamptz,
    ADD COLUMN ended_reason text CHECK (ended_reason IN ('completed', 'end_at', 'max_runs')),
    ADD CONSTRAINT jobs_cron_or_at CHECK ((cron IS NULL) <> (at IS NULL)) NOT VALID,
    ADD CONSTRAINT jobs_window_order CHECK (end_at > start_at) NOT VALID;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_cron_or_at;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_window_order;

-- A window change is a timetable change for the ledger: the fires owed before it are judged
-- by the window then in force, those after by the new one. So a past timetable keeps its own
-- window (NULL: no bound; the rows written before this migration had none).
ALTER TABLE job_timetables
    ADD COLUMN start_at timestamptz,
    ADD COLUMN end_at timestamptz;

-- stored_jobs (migration 0013) gains the new columns at its end. job_inserts is left as it
-- is: the previous release inserts through it (new columns take their defaults); this
-- release writes through job_writes (migration 0017).
CREATE OR REPLACE VIEW stored_jobs AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason
FROM jobs;

-- The jobs audit trigger's functions now live in functions/audit_jobs.sql (revision 1):
-- an end by the schedule is 'job.end', and fire_count is left out like next_run_at.

-- `crondepot verify` finds the at jobs whose one fire is in its window here: few rows (only
-- at jobs), and no scan of the other millions.
CREATE INDEX jobs_at ON jobs (at) WHERE at IS NOT NULL;
