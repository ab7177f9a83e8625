-- Attempt history and per-job health (issue 17, items 4 and 6).
--
-- Attempts. The run row stays the record of its latest attempt (started_at, finished_at,
-- status, last_error, attempt) and now also names the worker that made it (`worker`: the
-- lease owner, kept when the outcome clears the lease). An attempt that did NOT end the run
-- (a failure retried, a lease that expired and was reaped back to the queue, a failed or
-- dead run queued again by `runs retry` / `dlq replay`) is copied into run_attempts by the
-- same statement that writes its outcome, before the run row is overwritten by the next
-- attempt. So a run that succeeds on its first attempt, the common case and the hottest
-- write in the system, writes nothing here.
ALTER TABLE runs ADD COLUMN worker text;

-- No foreign key to runs, like runs has none to jobs: the key's triggers would run for every
-- update of runs (the success path). Retention deletes a run's attempts in the statement
-- that deletes the run (queries/retention.sql).
CREATE TABLE run_attempts (
    run_id       text NOT NULL,
    attempt      integer NOT NULL,
    started_at   timestamptz,
    ended_at     timestamptz NOT NULL,
    -- retried: a failure, queued again with a backoff; lease_expired: the worker was lost
    -- and the reaper queued the run again; failed / dead: the run's end, until a person
    -- queued it again (runs retry, dlq replay).
    outcome      text NOT NULL CHECK (outcome IN ('retried', 'lease_expired', 'failed',
                                                  'dead')),
    error        text,
    error_class  text,
    worker       text
);
-- A run's attempts in order; also what retention's delete probes.
CREATE INDEX run_attempts_run ON run_attempts (run_id, ended_at);

-- Health. failing_fires counts the job's latest fires that ended without success (failed,
-- dead, or skipped because their misfire deadline passed), in the order they ended; a
-- success sets it back to 0. Maintained by the outcome statements that end the job's runs:
-- the failure paths add to it; the success path writes the job row only when it is not 0
-- already (a healthy job's success reads one index entry of jobs and writes nothing).
ALTER TABLE jobs ADD COLUMN failing_fires integer NOT NULL DEFAULT 0;
-- The job's alert threshold; NULL = the tenant's.
ALTER TABLE jobs ADD COLUMN alert_after_failures integer
    CHECK (alert_after_failures BETWEEN 1 AND 10000);
-- The tenant's default threshold for its jobs.
ALTER TABLE tenants ADD COLUMN alert_after_failures integer NOT NULL DEFAULT 3
    CHECK (alert_after_failures BETWEEN 1 AND 10000);
-- Failing jobs only: `jobs list --unhealthy`, the console's marks and the per-tenant gauge
-- read this small index, never the 2.7 M healthy jobs.
CREATE INDEX jobs_failing ON jobs (tenant_id, id) WHERE failing_fires > 0;

-- alert_after_failures is a field of the job document: the store reads it through
-- stored_jobs (appended last) and writes it through job_writes, below.
CREATE OR REPLACE VIEW stored_jobs AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures
FROM jobs;

-- job_writes: the columns every insert of this release writes, in the order insert_jobs and
-- the import's COPY send them (creation instant last). A new view rather than job_inserts
-- made again: a process of the previous release still inserts through job_inserts (its 22
-- columns, created_at last) while this one migrates, and its import stages rows shaped like
-- that view; the columns added since take their defaults there (expand, then contract:
-- docs/architecture.md, "Changing the schema").
CREATE VIEW job_writes AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       at, start_at, end_at, max_runs, labels, alert_after_failures, created_at
FROM jobs;
