-- Local delivery windows (docs/schedules.md, "Delivery windows"): the hours a job's runs may
-- reach their target, in the job's zone. jobs.delivery_window is the job document's field
-- as written: an object {"from", "to", "days", "outside"}, the string "none" (no window,
-- whatever the tenant's default), or null (the tenant's default, tenants.delivery_window,
-- set by `crondepot tenants set-delivery-window`). Checked by the validator
-- (timetable/delivery.py); the CHECKs only keep the shape. Expand only: a previous release
-- ignores both columns and its jobs get null (the tenant's default).
ALTER TABLE jobs ADD COLUMN delivery_window jsonb
    CHECK (jsonb_typeof(delivery_window) = 'object' OR delivery_window = '"none"'::jsonb);
ALTER TABLE tenants ADD COLUMN delivery_window jsonb
    CHECK (jsonb_typeof(delivery_window) = 'object');

-- The jobs with a window of their own, by tenant: a worker asks once every few seconds
-- whether a tenant has any window at all (queue/claim.py WindowedTenants), so claims of
-- the runs of a tenant without one make no window look-up. Small: only windowed jobs.
CREATE INDEX jobs_windowed ON jobs (tenant_id)
    WHERE delivery_window IS NOT NULL AND delivery_window <> '"none"'::jsonb;

-- stored_jobs gains it last (migration 0023 made it).
CREATE OR REPLACE VIEW stored_jobs WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures, retry_base_s, retry_cap_s, pause_note, paused_at, paused_by,
       pause_after_failures, crons, every_s, anchor_at, calendar, overlap, delivery_window
FROM jobs;

-- job_writes_7: job_writes_6 (migration 0026) and delivery_window, creation instant last.
-- The previous release goes on inserting through job_writes_6 (the field null there).
CREATE VIEW job_writes_7 WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       at, start_at, end_at, max_runs, labels, alert_after_failures, retry_base_s,
       retry_cap_s, pause_after_failures, crons, every_s, anchor_at, calendar, overlap,
       delivery_window, created_at
FROM jobs;

-- A tenant's default window is a setting like its alert threshold: its changes are audited
-- (migration 0020 declared the trigger on every column but the counts).
CREATE OR REPLACE TRIGGER tenants_audit_update
    AFTER UPDATE OF id, name, signing_secret, created_at, max_jobs, max_urgent_jobs,
        urgent_allowed, previous_signing_secret, previous_secret_until, claim_weight,
        alert_after_failures, delivery_window
    ON tenants FOR EACH ROW
    WHEN ((to_jsonb(OLD) - 'active_jobs' - 'urgent_jobs')
          IS DISTINCT FROM (to_jsonb(NEW) - 'active_jobs' - 'urgent_jobs'))
    EXECUTE FUNCTION crondepot_audit_tenants();
