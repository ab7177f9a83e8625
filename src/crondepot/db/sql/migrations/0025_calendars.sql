-- Exclusion calendars (issue 31, item 4; docs/schedules.md, "Holiday calendars"): a
-- tenant's named sets of dates ("in-bank-holidays"), and the job field that names one.
-- A calendar's dates are read by the scheduler's tick for the jobs it claims (one query
-- per tick, cached by (tenant, name, version)); version grows with every change, so a
-- cached set is never used after the calendar changed.
CREATE TABLE calendars (
    tenant_id  bigint NOT NULL REFERENCES tenants (id),
    name       text NOT NULL CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
    dates      date[] NOT NULL CHECK (cardinality(dates) <= 10000),
    version    integer NOT NULL DEFAULT 1,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- Row-level security as for every tenant table (migration 0021).
ALTER TABLE calendars ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON calendars
    USING ((SELECT current_setting('crondepot.tenant_id', true) = 'all')
           OR tenant_id = (SELECT nullif(nullif(
                  current_setting('crondepot.tenant_id', true), 'all'), '')::bigint));

-- Audited as the jobs are (functions/audit_jobs.sql): whatever the session says, by
-- crondepot_audit_actor(); 'calendar.set' (created or changed) or 'calendar.delete'. The
-- search_path the function keeps: this transaction's, made safe first (as migration 0020).
SELECT set_config('search_path', format('%I, pg_catalog, pg_temp', current_schema()), true);
CREATE FUNCTION crondepot_audit_calendars() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
    VALUES (coalesce(NEW.tenant_id, OLD.tenant_id), crondepot_audit_actor(),
            CASE WHEN TG_OP = 'DELETE' THEN 'calendar.delete' ELSE 'calendar.set' END,
            'calendar ' || coalesce(NEW.name, OLD.name),
            CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END,
            CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
    RETURN NULL;
END $$;
CREATE TRIGGER calendars_audit AFTER INSERT OR UPDATE OR DELETE ON calendars
    FOR EACH ROW EXECUTE FUNCTION crondepot_audit_calendars();

-- The job field: {"exclude": NAME, "on_excluded": ..., "business_days": ...}, checked by the
-- document's validator (job/spec.py); null: no calendar. Expand only.
ALTER TABLE jobs ADD COLUMN calendar jsonb;
-- A calendar in use by a live job cannot be deleted, and a change nudges its jobs: both
-- look for the tenant's jobs naming it.
CREATE INDEX jobs_calendar ON jobs (tenant_id, (calendar ->> 'exclude'))
    WHERE calendar IS NOT NULL AND active;

-- stored_jobs gains it last (migration 0023 made it).
CREATE OR REPLACE VIEW stored_jobs WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority, active, paused,
       target, payload, misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup,
       spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit, created_at,
       updated_at, cancelled_at, version, timetable_since,
       at, start_at, end_at, max_runs, fire_count, ended_at, ended_reason, labels,
       alert_after_failures, retry_base_s, retry_cap_s, pause_note, paused_at, paused_by,
       pause_after_failures, crons, every_s, anchor_at, calendar
FROM jobs;

-- job_writes_5: job_writes_4 (migration 0024) and calendar, creation instant last. The
-- previous release goes on inserting through job_writes_4 (the field null there).
CREATE VIEW job_writes_5 WITH (security_invoker = true) AS
SELECT id, tenant_id, key, cron, tz, next_run_at, next_nominal_at, priority,
       active, target, payload, misfire_policy, misfire_seconds, misfire_until, catchup,
       max_catchup, spread_seconds, spread_key, max_attempts, lease_seconds, rate_limit,
       at, start_at, end_at, max_runs, labels, alert_after_failures, retry_base_s,
       retry_cap_s, pause_after_failures, crons, every_s, anchor_at, calendar, created_at
FROM jobs;
