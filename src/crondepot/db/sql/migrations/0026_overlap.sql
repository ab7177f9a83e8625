-- What happens when a fire comes while the job's previous run is still running (issue 31,
-- item 1): the job's overlap policy, `allow` (every run goes, today's behaviour), `skip`,
-- `buffer_one` or `replace`. The claim enforces it (functions/claim_overlap.sql), so any
-- number of workers agree; docs/worker.md, "Overlap rules in the claim".
--
-- jobs.overlap is the job document's field. runs.overlap is a copy made when the run is
-- written (as priority is): the claim reads it from the run row, so a run of an `allow` job
-- never costs a read of its job, and the two indexes below can name it. Constant defaults:
-- adding the columns rewrites neither table, and every job and run of the previous release
-- is `allow`, as it behaved.
ALTER TABLE jobs ADD COLUMN overlap text NOT NULL DEFAULT 'allow'
    CHECK (overlap IN ('allow', 'skip', 'buffer_one', 'replace'));
-- (No CHECK on runs: the column is only ever copied from jobs, and a CHECK would read every
-- run under the table's exclusive lock to validate.)
ALTER TABLE runs ADD COLUMN overlap text NOT NULL DEFAULT 'allow';

-- The database's own guarantee: at most one leased run per job whose policy is not `allow`.
-- The claim never trips it (it serialises the decisions per job and looks with a fresh
-- snapshot); if it ever did, the claim would fail, never lease a second run. It is also
-- the index the claim asks "is a run of this job running?".
CREATE UNIQUE INDEX runs_overlap_running ON runs (job_id)
    WHERE status = 'running' AND overlap <> 'allow';
-- The queued runs with a rule, by job: the claim's "is there any?" (one descent; none: the
-- claim is today's), and buffer_one's "is one already waiting?".
CREATE INDEX runs_overlap_queued ON runs (job_id, available_at)
    WHERE status = 'queued' AND overlap <> 'allow';

-- stored_jobs (migration 0023) gains overlap last.
CREATE OR REPLACE VIEW stored_jobs WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures, retry_base_s, retry_cap_s, pause_note, paused_at, paused_by,
       pause_after_failures, crons, every_s, anchor_at, calendar, overlap
FROM jobs;

-- job_writes_6: job_writes_5 (migration 0025) and overlap, creation instant last. The
-- previous release goes on inserting through job_writes_5 (its jobs `allow`).
CREATE VIEW job_writes_6 WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       at, start_at, end_at, max_runs, labels, alert_after_failures, retry_base_s,
       retry_cap_s, pause_after_failures, crons, every_s, anchor_at, calendar, overlap,
       created_at
FROM jobs;
