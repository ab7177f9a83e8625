-- revision: 7
-- crondepot_audit_job_row, crondepot_audit_jobs and crondepot_audit_jobs_inserted: the jobs
-- table's audit triggers, which this file creates (migration 0003 made the first; 0020 says
-- why every write is recorded now). Whatever the session's settings, and by
-- crondepot_audit_actor() (the named actor, or 'role:<session_user>'):
-- * an update that changes anything but the bookkeeping columns (next_run_at,
--   next_nominal_at, fire_count and updated_at, which the tick moves with every fire, and
--   failing_fires, which the workers' outcomes move; left out of before/after and of the
--   comparison) is one entry: 'job.cancel', or 'job.end' for a
--   job that ends by its schedule (a tick's, or a pause that settles its last fire),
--   'job.pause', 'job.resume', else 'job.update' (a payload rewritten without a new
--   version is one too);
-- * an insert statement is, per tenant, 'job.create' with the job when it wrote one job,
--   else one 'job.bulk_create' with the count and the ids (an import's batch, a
--   create_jobs of many: the entry a bulk path costs, instead of one per job);
-- * a delete (crondepot never deletes a job) is 'job.delete'.
-- SECURITY DEFINER, owned by the owner, so the runtime role, which may only read audit_log,
-- writes through them; the search_path is fixed and ends in pg_temp.
SELECT set_config('search_path', format('%I, pg_catalog, pg_temp', current_schema()), true);

-- No SET clause here: it would keep the WHEN clause below from inlining it (it reads no table).
CREATE OR REPLACE FUNCTION crondepot_audit_job_row(j jobs) RETURNS jsonb LANGUAGE sql
IMMUTABLE AS $$
    SELECT to_jsonb(j) - 'next_run_at' - 'next_nominal_at' - 'updated_at' - 'fire_count'
           - 'failing_fires'
$$;

CREATE OR REPLACE FUNCTION crondepot_audit_jobs() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    action text;
BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO audit_log (tenant_id, actor, action, subject, before)
        VALUES (OLD.tenant_id, crondepot_audit_actor(), 'job.delete', OLD.id::text,
                crondepot_audit_job_row(OLD));
        RETURN NULL;
    ELSIF TG_OP = 'INSERT' THEN
        action := 'job.create';
    ELSIF OLD.active AND NOT NEW.active THEN
        action := CASE WHEN NEW.ended_reason IS NOT NULL THEN 'job.end' ELSE 'job.cancel' END;
    ELSIF NEW.paused AND NOT OLD.paused THEN
        action := 'job.pause';
    ELSIF OLD.paused AND NOT NEW.paused THEN
        action := 'job.resume';
    ELSE
        action := 'job.update';
    END IF;
    INSERT INTO audit_log (tenant_id, actor, action, subject, before, after)
    VALUES (NEW.tenant_id, crondepot_audit_actor(), action, NEW.id::text,
            CASE WHEN TG_OP = 'UPDATE' THEN crondepot_audit_job_row(OLD) END,
            crondepot_audit_job_row(NEW));
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION crondepot_audit_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO audit_log (tenant_id, actor, action, subject, after)
    SELECT n.tenant_id, crondepot_audit_actor(),
           CASE WHEN n.jobs = 1 THEN 'job.create' ELSE 'job.bulk_create' END,
           CASE WHEN n.jobs = 1 THEN n.first::text
                ELSE 'jobs ' || n.first || '..' || n.last END,
           CASE WHEN n.jobs = 1
                THEN (SELECT crondepot_audit_job_row(j::jobs) FROM audited_new_jobs j
                      WHERE j.id = n.first)
                ELSE jsonb_build_object('count', n.jobs, 'ids', n.ids) END
    FROM (SELECT tenant_id, count(*) AS jobs, min(id) AS first, max(id) AS last,
                 jsonb_agg(id ORDER BY id) AS ids
          FROM audited_new_jobs GROUP BY tenant_id) AS n
    ORDER BY n.tenant_id;
    RETURN NULL;
END $$;

-- The row-level trigger of 0003 took inserts too; now they are the statement's.
-- Updates: two triggers, so that the tick (thousands of rows a second) pays next to nothing.
-- It sets only bookkeeping columns and active, ended_reason, ended_at (a job that ends by its
-- schedule), so jobs_audit, declared on every other column, is skipped before its WHEN is
-- looked at; jobs_audit_ended compares three columns, and the whole row only for a job whose
-- end changed (and only when nothing else did: then jobs_audit writes the one entry).
-- Every column of jobs is in one of the two lists or is bookkeeping; a column a migration
-- adds must be added here (tests/integration/test_audit_bypass.py checks it).
CREATE OR REPLACE TRIGGER jobs_audit
    AFTER UPDATE OF id, tenant_id, key, cron, tz, priority, paused, target, payload,
        misfire_policy, misfire_seconds, misfire_until, catchup, max_catchup, spread_seconds,
        spread_key, max_attempts, lease_seconds, rate_limit, created_at, cancelled_at,
        version, timetable_since, at, start_at, end_at, max_runs, labels,
        alert_after_failures, retry_base_s, retry_cap_s, pause_note, paused_at, paused_by,
        pause_after_failures, crons, every_s, anchor_at, calendar, overlap, delivery_window
    ON jobs FOR EACH ROW
    WHEN (crondepot_audit_job_row(OLD) IS DISTINCT FROM crondepot_audit_job_row(NEW))
    EXECUTE FUNCTION crondepot_audit_jobs();
CREATE OR REPLACE TRIGGER jobs_audit_ended
    AFTER UPDATE OF active, ended_reason, ended_at ON jobs FOR EACH ROW
    WHEN ((OLD.active IS DISTINCT FROM NEW.active
           OR OLD.ended_reason IS DISTINCT FROM NEW.ended_reason
           OR OLD.ended_at IS DISTINCT FROM NEW.ended_at)
          AND crondepot_audit_job_row(OLD) - 'active' - 'ended_reason' - 'ended_at'
              = crondepot_audit_job_row(NEW) - 'active' - 'ended_reason' - 'ended_at')
    EXECUTE FUNCTION crondepot_audit_jobs();
CREATE OR REPLACE TRIGGER jobs_audit_deleted AFTER DELETE ON jobs FOR EACH ROW
    EXECUTE FUNCTION crondepot_audit_jobs();
CREATE OR REPLACE TRIGGER jobs_audit_inserted AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS audited_new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION crondepot_audit_jobs_inserted();
