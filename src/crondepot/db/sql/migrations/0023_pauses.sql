-- A pause says why, and who paused when: the note an operator gives ("gateway migration
-- until Monday"), shown wherever the job is (API, CLI, console) and kept in the audit
-- entry of the change (the row's after image). paused_by is the session's actor, as the
-- audit log names it; 'crondepot:pause_after_failures' when the job paused itself. All
-- three are cleared by the resume. Expand only: a previous release's pause leaves them
-- null, and its reads of stored_jobs name their columns.
--
-- pause_after_failures, a field of the job document: the job pauses itself once this many
-- of its latest fires in a row failed (jobs.failing_fires, migration 0017); the maintenance
-- leader's rescuer turn finds such jobs on the jobs_failing index.
ALTER TABLE jobs ADD COLUMN pause_note text CHECK (char_length(pause_note) BETWEEN 1 AND 500),
                 ADD COLUMN paused_at timestamptz,
                 ADD COLUMN paused_by text,
                 ADD COLUMN pause_after_failures integer
                     CHECK (pause_after_failures BETWEEN 1 AND 10000);

-- stored_jobs gains them last (migrations 0013, 0015-0017 and 0022 made it).
CREATE OR REPLACE VIEW stored_jobs WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures, retry_base_s, retry_cap_s, pause_note, paused_at, paused_by,
       pause_after_failures
FROM jobs;

-- job_writes_3: job_writes_2 (migration 0022) and pause_after_failures, creation instant
-- last. The previous release goes on inserting through job_writes_2 (the field null there).
CREATE VIEW job_writes_3 WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       at, start_at, end_at, max_runs, labels, alert_after_failures, retry_base_s,
       retry_cap_s, pause_after_failures, created_at
FROM jobs;
