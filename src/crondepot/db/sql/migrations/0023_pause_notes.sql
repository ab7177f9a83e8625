-- A pause says why, and who paused when: the note an operator gives ("gateway migration
-- until Monday"), shown wherever the job is (API, CLI, console) and kept in the audit
-- entry of the change (the row's after image). paused_by is the session's actor, as the
-- audit log names it; 'crondepot:pause_after_failures' when the job paused itself. All
-- three are cleared by the resume. Expand only: a previous release's pause leaves them
-- null, and its reads of stored_jobs name their columns.
ALTER TABLE jobs ADD COLUMN pause_note text CHECK (char_length(pause_note) BETWEEN 1 AND 500),
                 ADD COLUMN paused_at timestamptz,
                 ADD COLUMN paused_by text;

-- stored_jobs gains them last (migrations 0013, 0015-0017 and 0022 made it).
CREATE OR REPLACE VIEW stored_jobs WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures, retry_base_s, retry_cap_s, pause_note, paused_at, paused_by
FROM jobs;
