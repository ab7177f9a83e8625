-- A retry curve per job (issue 31, item 6): `retry: {max_attempts, base_s, cap_s}` in the
-- job document. max_attempts keeps its column; the curve's two numbers are new, defaulted to
-- the curve every job had before (30 s doubling up to 600 s), so a job written by the
-- previous release, and every job already stored, retries exactly as it did. The wait
-- itself is drawn where the retry is recorded (queries/queue.sql record_retry reads these
-- columns), so every worker draws from the job's current curve.
ALTER TABLE jobs ADD COLUMN retry_base_s double precision NOT NULL DEFAULT 30
    CHECK (retry_base_s > 0 AND retry_base_s <= 3600);
ALTER TABLE jobs ADD COLUMN retry_cap_s double precision NOT NULL DEFAULT 600
    CHECK (retry_cap_s <= 86400 AND retry_cap_s >= retry_base_s);

-- stored_jobs (migration 0017) gains the columns at its end; security_invoker, so a tenant's
-- row-level policies apply to whoever reads through the view.
CREATE OR REPLACE VIEW stored_jobs WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures, retry_base_s, retry_cap_s
FROM jobs;

-- job_writes_2: the columns every insert of this release writes, in the order insert_jobs
-- and the import's COPY send them (creation instant last). A new view rather than
-- job_writes made again: a process of the previous release still inserts through job_writes
-- (its 28 columns) while this one migrates; the curve takes its defaults there (expand,
-- then contract: docs/architecture.md, "Changing the schema").
CREATE VIEW job_writes_2 WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       at, start_at, end_at, max_runs, labels, alert_after_failures, retry_base_s,
       retry_cap_s, created_at
FROM jobs;
